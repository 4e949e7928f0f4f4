package client_test

import (
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var gv = schema.GroupVersion{Group: "test.ctrlkit.io", Version: "v1"}

// Gizmo is a custom type with a status subresource, standing in for a
// CRD's generated Go type.
type Gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GizmoSpec   `json:"spec,omitempty"`
	Status            GizmoStatus `json:"status,omitempty"`
}

// GizmoSpec is the desired state of a Gizmo.
type GizmoSpec struct {
	Size  int32             `json:"size,omitempty"`
	Color string            `json:"color,omitempty"`
	Tags  map[string]string `json:"tags,omitempty"`
}

// GizmoStatus is the observed state of a Gizmo.
type GizmoStatus struct {
	Seen int32 `json:"seen,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (g *Gizmo) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if g.Spec.Tags != nil {
		out.Spec.Tags = make(map[string]string, len(g.Spec.Tags))
		for k, v := range g.Spec.Tags {
			out.Spec.Tags[k] = v
		}
	}
	return &out
}

// GizmoList is a list of Gizmos.
type GizmoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gizmo `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *GizmoList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Gizmo, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Gizmo)
	}
	return &out
}

// newScheme returns client-go's types plus Gizmo.
func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypes(gv, &Gizmo{}, &GizmoList{})
	metav1.AddToGroupVersion(s, gv)
	return s
}

// newFake returns a fake API server holding objs and a client on it.
func newFake(t testing.TB, objs ...runtime.Object) (*fake.Cluster, *client.Client) {
	t.Helper()
	s := newScheme(t)
	cluster, err := fake.New(fake.Options{Scheme: s, Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config(), client.Options{Scheme: s, Mapper: cluster.RESTMapper(), FieldManager: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	return cluster, c
}

// gizmoAC is a hand-written apply configuration for Gizmo, standing in
// for one controller-gen generates.
type gizmoAC struct {
	APIVersion *string        `json:"apiVersion,omitempty"`
	Kind       *string        `json:"kind,omitempty"`
	Metadata   *gizmoACMeta   `json:"metadata,omitempty"`
	Spec       *gizmoACSpec   `json:"spec,omitempty"`
	Status     *gizmoACStatus `json:"status,omitempty"`
}

type gizmoACMeta struct {
	Name      *string           `json:"name,omitempty"`
	Namespace *string           `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

type gizmoACSpec struct {
	Size  *int32  `json:"size,omitempty"`
	Color *string `json:"color,omitempty"`
}

type gizmoACStatus struct {
	Seen *int32 `json:"seen,omitempty"`
}

func newGizmoAC(namespace, name string) *gizmoAC {
	apiVersion, kind := gv.String(), "Gizmo"
	return &gizmoAC{APIVersion: &apiVersion, Kind: &kind, Metadata: &gizmoACMeta{Name: &name, Namespace: &namespace}}
}

func (a gizmoAC) IsApplyConfiguration()      {}
func (a *gizmoAC) GetName() *string          { return a.Metadata.Name }
func (a *gizmoAC) GetNamespace() *string     { return a.Metadata.Namespace }
func (a *gizmoAC) GetKind() *string          { return a.Kind }
func (a *gizmoAC) GetAPIVersion() *string    { return a.APIVersion }
func (a *gizmoAC) withSize(n int32) *gizmoAC { a.Spec = &gizmoACSpec{Size: &n}; return a }

func (a *gizmoAC) withStatus(n int32) *gizmoAC { a.Status = &gizmoACStatus{Seen: &n}; return a }
