// Package applydiff runs the same sequences of server-side apply, update
// and patch against pkg/fake and against kube-apiserver (envtest), and
// fails on any difference in status codes, conflict causes, objects or
// managedFields. The fake merges the custom kind by its CRD's schema
// (fake.CRDTypeConverter of testdata/gadgets.yaml). It neither defaults
// nor validates, as its doc says: the random sequences never write a
// field's default value, and a sequence is compared only up to a step
// kube-apiserver refuses as invalid (the test logs how many).
package applydiff

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// realCfg is the admin config of the envtest control plane.
var realCfg *rest.Config

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "applydiff: KUBEBUILDER_ASSETS is not set: point it at kube-apiserver and etcd (bin/k8s after make envtest)")
		os.Exit(1)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{"testdata"}, ErrorIfCRDPathMissing: true}
	var err error
	if realCfg, err = env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "applydiff: starting envtest: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "applydiff: stopping envtest: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "applydiff: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	gadgetGV  = schema.GroupVersion{Group: "applydiff.ctrlkit.io", Version: "v1"}
	gadgetGVR = gadgetGV.WithResource("gadgets")
)

// Gadget is the custom kind of testdata/gadgets.yaml, as a Go type for
// the fake's scheme. Spec and Status are pointers so that an object
// without them encodes without them, as the unstructured object
// kube-apiserver stores.
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              *GadgetSpec   `json:"spec,omitempty"`
	Status            *GadgetStatus `json:"status,omitempty"`
}

// GadgetSpec is the spec of a Gadget. Tags and Labels are pointers so
// that an empty list or map is kept, as kube-apiserver keeps it in a
// custom resource: a slice or map with omitempty would drop it, and the
// fake stores objects as their Go types.
type GadgetSpec struct {
	Size   *int64             `json:"size,omitempty"`
	Color  *string            `json:"color,omitempty"`
	Tags   *[]string          `json:"tags,omitempty"`
	Labels *map[string]string `json:"labels,omitempty"`
}

// GadgetStatus is the status of a Gadget.
type GadgetStatus struct {
	Ready    *bool  `json:"ready,omitempty"`
	Observed *int64 `json:"observed,omitempty"`
}

// GadgetList is a list of Gadgets.
type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gadget `json:"items"`
}

// DeepCopyObject copies g through runtime's JSON-compatible converter.
func (g *Gadget) DeepCopyObject() runtime.Object { return deepCopy(g, &Gadget{}) }

// DeepCopyObject copies l.
func (l *GadgetList) DeepCopyObject() runtime.Object { return deepCopy(l, &GadgetList{}) }

func deepCopy[T runtime.Object](in, out T) runtime.Object {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	if err != nil {
		panic(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, out); err != nil {
		panic(err)
	}
	return out
}

// fakeScheme is client-go's scheme with Gadget.
func fakeScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	s.AddKnownTypes(gadgetGV, &Gadget{}, &GadgetList{})
	metav1.AddToGroupVersion(s, gadgetGV)
	return s, nil
}
