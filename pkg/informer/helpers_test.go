package informer_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/internal/faketest"
	ckfake "github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// TestMain fails the package if any test leaves an informer goroutine
// behind: every started Cache must be stopped and waited for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Widget is a custom resource type (group test.ctrlkit.io/v1) with a
// hand-written DeepCopyObject, standing in for a CRD's generated Go type.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec"`
}

// WidgetSpec is the spec of a Widget.
type WidgetSpec struct {
	Size int `json:"size"`
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *WidgetList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Widget, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*Widget)
		}
	}
	return &out
}

var (
	widgetGV  = schema.GroupVersion{Group: "test.ctrlkit.io", Version: "v1"}
	widgetGVK = widgetGV.WithKind("Widget")
	widgetGVR = widgetGV.WithResource("widgets")

	configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	secretGVK    = corev1.SchemeGroupVersion.WithKind("Secret")
	namespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")
)

// widgetScheme knows Widget and WidgetList, and nothing else.
func widgetScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(widgetGV, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, widgetGV)
	return s
}

// newMapper returns a RESTMapper that serves ConfigMaps, Secrets and
// Namespaces, plus extra namespaced kinds.
func newMapper(extra ...schema.GroupVersionKind) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(configMapGVK, meta.RESTScopeNamespace)
	m.Add(secretGVK, meta.RESTScopeNamespace)
	m.Add(namespaceGVK, meta.RESTScopeRoot)
	for _, gvk := range extra {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return m
}

// cluster is a fake API server (pkg/fake) and a clientset on it: writes
// through the clientset are the fake's, and the informers list and watch
// it, through the reactors the test adds, as they would kube-apiserver.
type cluster struct {
	*faketest.Cluster
}

// newCluster returns a fake API server that serves the built-in kinds and
// Widgets, holding objs.
func newCluster(t *testing.T, objs ...runtime.Object) *cluster {
	t.Helper()
	s := runtime.NewScheme()
	if err := kubescheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypes(widgetGV, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, widgetGV)
	return newClusterIn(t, s, objs...)
}

// newClusterIn returns a fake API server that serves the kinds of scheme,
// holding objs.
func newClusterIn(t *testing.T, scheme *runtime.Scheme, objs ...runtime.Object) *cluster {
	t.Helper()
	return &cluster{faketest.NewCluster(t, ckfake.Options{Scheme: scheme, Objects: objs})}
}

// clients returns Clients over c.
func (c *cluster) clients() informer.Clients {
	return informer.Clients{Config: c.Config(), Mapper: c.RESTMapper()}
}

// newCache returns a Cache over c.
func newCache(t *testing.T, c *cluster, opts informer.Options) *informer.Cache {
	t.Helper()
	cache, err := informer.New(c.clients(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return cache
}

// start starts c, stops it when the test ends, and waits for it to sync.
func start(t *testing.T, c *informer.Cache) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	if err := c.Start(ctx); err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		c.Wait()
	})
	syncCtx, cancelSync := context.WithTimeout(ctx, 10*time.Second)
	defer cancelSync()
	if err := c.WaitForSync(syncCtx, logr.Discard(), 0); err != nil {
		t.Fatalf("WaitForSync: %v", err)
	}
}

func configMap(ns, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

func unstructuredWidget(ns, name string, size int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetGV.String(),
		"kind":       "Widget",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       map[string]any{"size": size},
	}}
}

// clientsWith returns Clients over a new fake API server holding objs,
// resolving kinds with mapper (nil: the fake's, which serves every kind).
func clientsWith(t *testing.T, mapper meta.RESTMapper, objs ...runtime.Object) informer.Clients {
	t.Helper()
	c := newCluster(t, objs...).clients()
	if mapper != nil {
		c.Mapper = mapper
	}
	return c
}

// withMapper returns Clients over c, resolving kinds with mapper.
func (c *cluster) withMapper(mapper meta.RESTMapper) informer.Clients {
	cl := c.clients()
	cl.Mapper = mapper
	return cl
}

// add creates objs in c, as a client would.
func (c *cluster) add(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: content}
		m, err := c.RESTMapper().RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(m.Resource).Namespace(u.GetNamespace()).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// react makes verb ("list" or "watch") requests for resource be answered
// by r first, for the Clients that c.clients returns from now on.
func (c *cluster) react(verb, resource string, r faketest.Reactor) {
	c.React(func(req *http.Request) (*http.Response, error) {
		if !faketest.Is(req, resource, verb == "watch") {
			return nil, nil
		}
		return r(req)
	})
}

// statusResponse is the API server's answer of err.
var statusResponse = faketest.Status
