package fake_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// TestMain fails the package if a test leaves a watch goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	testGV    = schema.GroupVersion{Group: "test.ctrlkit.io", Version: "v1"}
	widgetGVR = testGV.WithResource("widgets")
	gadgetGVK = testGV.WithKind("Gadget")
)

// Widget is a namespaced custom resource with a status subresource and a
// hand-written DeepCopyObject, standing in for a CRD's generated Go type.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec   `json:"spec,omitempty"`
	Status            WidgetStatus `json:"status,omitempty"`
}

// WidgetSpec is the spec of a Widget.
type WidgetSpec struct {
	Size  int      `json:"size,omitempty"`
	Tags  []string `json:"tags,omitempty"`
	Color string   `json:"color,omitempty"`
}

// WidgetStatus is the status of a Widget.
type WidgetStatus struct {
	Ready bool   `json:"ready,omitempty"`
	Phase string `json:"phase,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Tags = append([]string(nil), w.Spec.Tags...)
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
	out.Items = make([]Widget, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Widget)
	}
	return &out
}

// Gadget is a cluster-scoped custom resource without a status.
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (g *Gadget) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Tags = append([]string(nil), g.Spec.Tags...)
	return &out
}

// newScheme returns client-go's built-in types plus Widget and Gadget.
func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := kubescheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypes(testGV, &Widget{}, &WidgetList{}, &Gadget{})
	metav1.AddToGroupVersion(s, testGV)
	return s
}

// newCluster returns a fake serving newScheme, Gadget cluster-scoped.
func newCluster(t testing.TB, objs ...runtime.Object) *fake.Cluster {
	t.Helper()
	c, err := fake.New(fake.Options{Scheme: newScheme(t), ClusterScoped: []schema.GroupVersionKind{gadgetGVK}, Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// contentTypes are the request encodings client-go's typed clients use.
var contentTypes = []struct {
	name, contentType string
}{
	{"json", "application/json"},
	{"protobuf", "application/vnd.kubernetes.protobuf"},
}

// clientset returns a typed clientset on c sending contentType.
func clientset(t testing.TB, c *fake.Cluster, contentType string) kubernetes.Interface {
	t.Helper()
	cfg := c.Config()
	cfg.ContentType = contentType
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// dynamicClient returns a dynamic client on c.
func dynamicClient(t testing.TB, c *fake.Cluster) dynamic.Interface {
	t.Helper()
	cfg := c.Config()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// widget returns an unstructured Widget for the dynamic client.
func widget(ns, name string, size int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(testGV.String())
	u.SetKind("Widget")
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, int64(size), "spec", "size")
	return u
}

// rawDo sends a request straight to the fake and returns the response
// status code and body.
func rawDo(t testing.TB, c *fake.Cluster, method, path, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, fake.Host+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return resp.StatusCode, out
}
