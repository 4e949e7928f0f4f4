package informer_test

import (
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// Gadget is a custom resource type that, unlike Widget, is registered into
// client-go's global scheme, as sample-controller registers its types
// (samplescheme.AddToScheme(scheme.Scheme)).
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (g *Gadget) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// GadgetList is a list of Gadgets.
type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gadget `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *GadgetList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Gadget, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*Gadget)
		}
	}
	return &out
}

var (
	gadgetGV  = schema.GroupVersion{Group: "globalscheme.test.ctrlkit.io", Version: "v1"}
	gadgetGVK = gadgetGV.WithKind("Gadget")
)

// registerGadgetGlobally adds Gadget to client-go's global scheme, the way
// sample-controller does. A scheme cannot forget a type, so the
// registration lasts for the rest of the test binary: its group is used by
// no other test, and no other test declares a Gadget. It runs before the
// test builds any client, so nothing reads the scheme while it is written.
var registerGadgetGlobally = sync.OnceFunc(func() {
	kubescheme.Scheme.AddKnownTypes(gadgetGV, &Gadget{}, &GadgetList{})
	metav1.AddToGroupVersion(kubescheme.Scheme, gadgetGV)
})

// TestForCustomTypeInGlobalScheme declares a custom type registered into
// client-go's global scheme, with Options.Scheme left nil (so the Cache's
// scheme is that global one): it is still custom, listed as JSON decoded
// straight into it, and built-in types of the same Cache are still listed
// in protobuf.
func TestForCustomTypeInGlobalScheme(t *testing.T) {
	registerGadgetGlobally()
	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gadgetGV.String(),
		"kind":       "Gadget",
		"metadata":   map[string]any{"namespace": "default", "name": "g1"},
	}}
	kube := newClusterIn(t, kubescheme.Scheme, configMap("default", "cm", nil), gadget)
	c, err := informer.New(kube.withMapper(newMapper(gadgetGVK)), informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gadgets, err := informer.For[*Gadget](c)
	if err != nil {
		t.Fatalf("For[*Gadget] with Gadget in client-go's global scheme: %v", err)
	}
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)

	if g, err := gadgets.Lister().Get("default", "g1"); err != nil {
		t.Errorf("Get gadget: %v", err)
	} else if g.Name != "g1" {
		t.Errorf("Get gadget returned %q, want g1", g.Name)
	}
	got, err := keys(cms.Lister().List(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"default/cm"}; !slices.Equal(got, want) {
		t.Errorf("cached ConfigMaps %q, want %q", got, want)
	}
}
