package informer_test

import (
	"context"
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
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

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

// newDynamic returns a fake dynamic client holding objs (unstructured
// Widgets), able to list widgets.
func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgetGVR: "WidgetList"}, objs...)
}

// newCache returns a Cache over a fake clientset holding objs.
func newCache(t *testing.T, kube *fake.Clientset, opts informer.Options) *informer.Cache {
	t.Helper()
	c, err := informer.New(informer.Clients{Kube: kube, Dynamic: newDynamic(), Mapper: newMapper()}, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
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
