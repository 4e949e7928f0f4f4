package fake_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// notPointer implements runtime.Object on a value receiver.
type notPointer struct{}

func (notPointer) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (n notPointer) DeepCopyObject() runtime.Object { return n }

// unregistered is a well-formed API type missing from every scheme.
type unregistered struct{ Widget }

func (u *unregistered) DeepCopyObject() runtime.Object {
	return &unregistered{*u.Widget.DeepCopyObject().(*Widget)}
}

// TestNewRefusesBadInput checks that New names what is wrong.
func TestNewRefusesBadInput(t *testing.T) {
	terminating := configMap("ns", "t", nil)
	terminating.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name string
		opts fake.Options
		want string
	}{
		{"kind not in scheme", fake.Options{Objects: []runtime.Object{&Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}}}}, "not a kind the scheme serves"},
		{"type not in scheme", fake.Options{Scheme: newScheme(t), Objects: []runtime.Object{&unregistered{}}}, "not a kind the scheme serves"},
		{"duplicate", fake.Options{Objects: []runtime.Object{configMap("ns", "a", nil), configMap("ns", "a", nil)}}, "given twice"},
		{"not a pointer", fake.Options{Objects: []runtime.Object{notPointer{}}}, "pointer"},
		{"nil", fake.Options{Objects: []runtime.Object{nil}}, "nil"},
		{"no name", fake.Options{Objects: []runtime.Object{configMap("ns", "", nil)}}, "metadata.name"},
		{"no namespace", fake.Options{Objects: []runtime.Object{configMap("", "a", nil)}}, "metadata.namespace"},
		{"namespace on a cluster-scoped kind", fake.Options{Objects: []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "n"}}}}, "cluster-scoped"},
		{"deletion without finalizers", fake.Options{Objects: []runtime.Object{terminating}}, "deletionTimestamp"},
		{"unknown cluster-scoped kind", fake.Options{ClusterScoped: []schema.GroupVersionKind{gadgetGVK}}, "ClusterScoped"},
		{"a List kind", fake.Options{Objects: []runtime.Object{&corev1.ConfigMapList{}}}, "not a kind the scheme serves"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := fake.New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, %v; want an error mentioning %q", c, err, tc.want)
			}
		})
	}
}

// TestNewSeedsObjects checks what New keeps and sets on Options.Objects
// objects, typed or unstructured.
func TestNewSeedsObjects(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName("u")
	u.SetResourceVersion("77")
	typed := configMap("ns", "t", nil)
	typed.UID = "mine"
	typed.Generation = 4
	c, err := fake.New(fake.Options{Objects: []runtime.Object{typed, u}})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "t"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.UID != "mine" || got.Generation != 4 || got.ResourceVersion != "1" || got.CreationTimestamp.IsZero() {
		t.Errorf("seeded %+v: want uid and generation kept, resourceVersion 1, creationTimestamp set", got.ObjectMeta)
	}
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "u"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "2" || got.UID == "" || got.Generation != 1 {
		t.Errorf("seeded unstructured %+v: want resourceVersion 2, a uid, generation 1", got.ObjectMeta)
	}
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "missing"}, &got); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing object: %v, want NotFound", err)
	}
	if err := c.Get(types.NamespacedName{Name: "x"}, &unregistered{}); err == nil {
		t.Error("Get into a type not in the scheme succeeded")
	}
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "t"}, u); err == nil {
		t.Error("Get into an unstructured object succeeded")
	}
}

// TestRESTMapper checks kinds, resources and scopes, and that List,
// Options and meta kinds are not mapped.
func TestRESTMapper(t *testing.T) {
	m := newCluster(t).RESTMapper()
	for _, tc := range []struct {
		gk       schema.GroupKind
		resource string
		scope    meta.RESTScopeName
	}{
		{schema.GroupKind{Kind: "ConfigMap"}, "configmaps", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Kind: "Endpoints"}, "endpoints", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Kind: "Node"}, "nodes", meta.RESTScopeNameRoot},
		{schema.GroupKind{Kind: "Namespace"}, "namespaces", meta.RESTScopeNameRoot},
		{schema.GroupKind{Group: "apps", Kind: "Deployment"}, "deployments", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "networking.k8s.io", Kind: "NetworkPolicy"}, "networkpolicies", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "networking.k8s.io", Kind: "IngressClass"}, "ingressclasses", meta.RESTScopeNameRoot},
		{schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}, "clusterrolebindings", meta.RESTScopeNameRoot},
		{schema.GroupKind{Group: "storage.k8s.io", Kind: "StorageClass"}, "storageclasses", meta.RESTScopeNameRoot},
		{schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}, "validatingwebhookconfigurations", meta.RESTScopeNameRoot},
		{schema.GroupKind{Group: testGV.Group, Kind: "Widget"}, "widgets", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: testGV.Group, Kind: "Gadget"}, "gadgets", meta.RESTScopeNameRoot},
	} {
		mapping, err := m.RESTMapping(tc.gk)
		if err != nil {
			t.Errorf("RESTMapping(%v): %v", tc.gk, err)
			continue
		}
		if mapping.Resource.Resource != tc.resource || mapping.Scope.Name() != tc.scope {
			t.Errorf("RESTMapping(%v) = %s %s, want %s %s", tc.gk, mapping.Resource.Resource, mapping.Scope.Name(), tc.resource, tc.scope)
		}
	}
	for _, gk := range []schema.GroupKind{{Kind: "ConfigMapList"}, {Kind: "ListOptions"}, {Kind: "Status"}, {Kind: "WatchEvent"}, {Kind: "DeleteOptions"}} {
		if _, err := m.RESTMapping(gk); err == nil {
			t.Errorf("RESTMapping(%v) succeeded, want no mapping", gk)
		}
	}
}
