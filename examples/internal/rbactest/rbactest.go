// Package rbactest runs an example's e2e test as a user that holds exactly
// the permissions of the example's rbac.yaml, so the manifest cannot claim
// less than the operator uses.
package rbactest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// User creates the ClusterRoles and Roles in file (YAML, one or more
// documents), binds each to a user named after the first role, and returns
// that user's rest config. A namespaced Role's namespace must exist.
func User(t testing.TB, env *envtest.Environment, kube kubernetes.Interface, file string) *rest.Config {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var (
		user  string
		dec   = yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		found int
	)
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading %s: %v", file, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decoding %s: %v", file, err)
		}
		found++
		switch role := obj.(type) {
		case *rbacv1.ClusterRole:
			if user == "" {
				user = role.Name
			}
			create(t, func() error {
				_, err := kube.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{})
				return err
			})
			create(t, func() error {
				_, err := kube.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
					ObjectMeta: metav1.ObjectMeta{Name: role.Name},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
					Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
				}, metav1.CreateOptions{})
				return err
			})
		case *rbacv1.Role:
			if user == "" {
				user = role.Name
			}
			create(t, func() error {
				_, err := kube.RbacV1().Roles(role.Namespace).Create(t.Context(), role, metav1.CreateOptions{})
				return err
			})
			create(t, func() error {
				_, err := kube.RbacV1().RoleBindings(role.Namespace).Create(t.Context(), &rbacv1.RoleBinding{
					ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
					Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
				}, metav1.CreateOptions{})
				return err
			})
		default:
			t.Fatalf("%s holds a %T, want ClusterRoles and Roles only", file, obj)
		}
	}
	if found == 0 {
		t.Fatalf("%s holds no roles", file)
	}
	u, err := env.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return u.Config()
}

// create runs f, accepting AlreadyExists so a test can run again (-count)
// against the same API server.
func create(t testing.TB, f func() error) {
	t.Helper()
	if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(fmt.Errorf("rbactest: %w", err))
	}
}
