package envtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/envtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// client-go's transports keep idle connections' loops until
		// they time out; klog flushes forever.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.envtest.ctrlkit.io
spec:
  group: envtest.ctrlkit.io
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

// assets is KUBEBUILDER_ASSETS; the tests that start a control plane
// skip without it (make e2e sets it; make unit does not build the
// binaries).
func assets(t *testing.T) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: make e2e runs this test with bin/k8s")
	}
}

// TestEnvironment starts a control plane with a CRD and checks what an
// operator's e2e tests rely on: the CRD is served when Start returns, the
// admin config can write, a ServiceAccount token from TokenRequest
// authenticates and RBAC holds it to what it is granted, and Stop ends
// the processes and removes their files.
func TestEnvironment(t *testing.T) {
	assets(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "widgets.yaml"), []byte("---\n"+widgetCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{dir}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = env.Stop()
		}
	})
	ctx := t.Context()

	// The CRD is served: no wait needed before the first create.
	dyn := dynamic.NewForConfigOrDie(cfg)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "envtest.ctrlkit.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec":     map[string]any{"size": int64(3)},
	}}
	widgets := schema.GroupVersionResource{Group: "envtest.ctrlkit.io", Version: "v1", Resource: "widgets"}
	if _, err := dyn.Resource(widgets).Namespace("default").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Widget right after Start: %v", err)
	}

	// A ServiceAccount's token authenticates, and RBAC denies what no
	// Role grants.
	kube := kubernetes.NewForConfigOrDie(cfg)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "op", Namespace: "default"}}
	if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "op", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	saCfg := rest.AnonymousClientConfig(cfg)
	saCfg.BearerToken = tr.Status.Token
	_, err = kubernetes.NewForConfigOrDie(saCfg).CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets as a ServiceAccount with no Role = %v, want 403 Forbidden", err)
	}
	review, err := kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil || !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:default:op" {
		t.Errorf("TokenReview of the ServiceAccount's token = %+v, %v; want it authenticated as system:serviceaccount:default:op", review, err)
	}

	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	short := rest.CopyConfig(cfg)
	short.Timeout = 2 * time.Second
	if _, err := kubernetes.NewForConfigOrDie(short).Discovery().ServerVersion(); err == nil {
		t.Error("the API server answers after Stop")
	}
	if err := env.Stop(); err != nil {
		t.Errorf("a second Stop = %v, want nil", err)
	}
}

// TestStartErrors checks that what Start cannot use is refused before any
// process starts, with what is wrong.
func TestStartErrors(t *testing.T) {
	bin := t.TempDir() // files named as the binaries; no test here runs them
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(bin, name), nil, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	notCRD := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(notCRD, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		env  *envtest.Environment
		want string
	}{
		{"no binaries", &envtest.Environment{}, "set BinaryAssetsDirectory or KUBEBUILDER_ASSETS"},
		{"binaries missing", &envtest.Environment{BinaryAssetsDirectory: t.TempDir()}, "etcd is not in"},
		{"CRD path missing", &envtest.Environment{BinaryAssetsDirectory: bin, CRDDirectoryPaths: []string{filepath.Join(bin, "nope")}}, "CRDDirectoryPaths: stat"},
		{"not a CRD", &envtest.Environment{BinaryAssetsDirectory: bin, CRDDirectoryPaths: []string{notCRD}}, `v1 ConfigMap "x", not an apiextensions.k8s.io/v1 CustomResourceDefinition`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBEBUILDER_ASSETS", "")
			_, err := tt.env.Start()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
