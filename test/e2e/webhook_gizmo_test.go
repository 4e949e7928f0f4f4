package e2e

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// The hooks.e2e.ctrlkit.io API: Gizmo in v1alpha1, which spells color
// "colour", and v1, the hub and storage version (testdata/webhook).
var (
	hooksV1       = schema.GroupVersion{Group: "hooks.e2e.ctrlkit.io", Version: "v1"}
	hooksV1alpha1 = schema.GroupVersion{Group: "hooks.e2e.ctrlkit.io", Version: "v1alpha1"}
)

// Gizmo is hooks.e2e.ctrlkit.io/v1 Gizmo.
type Gizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GizmoSpec `json:"spec,omitempty"`
}

// GizmoSpec is the spec of a v1 Gizmo.
type GizmoSpec struct {
	Size  int32  `json:"size,omitempty"`
	Color string `json:"color,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (g *Gizmo) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// GizmoV1alpha1 is hooks.e2e.ctrlkit.io/v1alpha1 Gizmo.
type GizmoV1alpha1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GizmoV1alpha1Spec `json:"spec,omitempty"`
}

// GizmoV1alpha1List is a list of v1alpha1 Gizmos.
type GizmoV1alpha1List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GizmoV1alpha1 `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *GizmoV1alpha1List) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = make([]GizmoV1alpha1, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*GizmoV1alpha1)
	}
	return &out
}

// GizmoV1alpha1Spec is the spec of a v1alpha1 Gizmo.
type GizmoV1alpha1Spec struct {
	Size   int32  `json:"size,omitempty"`
	Colour string `json:"colour,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (g *GizmoV1alpha1) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// ConvertTo converts g to the hub, v1. A colour of "plaid" has no v1
// color.
func (g *GizmoV1alpha1) ConvertTo(hub runtime.Object) error {
	if g.Spec.Colour == "plaid" {
		return errors.New(`colour "plaid" has no v1 color`)
	}
	h := hub.(*Gizmo)
	h.ObjectMeta = g.ObjectMeta
	h.Spec = GizmoSpec{Size: g.Spec.Size, Color: g.Spec.Colour}
	return nil
}

// ConvertFrom converts the hub, v1, to g.
func (g *GizmoV1alpha1) ConvertFrom(hub runtime.Object) error {
	h := hub.(*Gizmo)
	g.ObjectMeta = h.ObjectMeta
	g.Spec = GizmoV1alpha1Spec{Size: h.Spec.Size, Colour: h.Spec.Color}
	return nil
}

func gizmoScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(hooksV1.WithKind("Gizmo"), &Gizmo{})
	s.AddKnownTypeWithName(hooksV1alpha1.WithKind("Gizmo"), &GizmoV1alpha1{})
	s.AddKnownTypeWithName(hooksV1alpha1.WithKind("GizmoList"), &GizmoV1alpha1List{})
	return s
}

// gizmoValidator refuses red Gizmos, and shrinking them.
type gizmoValidator struct{}

func (gizmoValidator) ValidateCreate(_ context.Context, g *Gizmo) (webhook.Warnings, error) {
	if g.Spec.Color == "red" {
		return nil, fmt.Errorf("spec.color %q is not allowed: pick blue or green", g.Spec.Color)
	}
	return nil, nil
}

func (v gizmoValidator) ValidateUpdate(ctx context.Context, old, g *Gizmo) (webhook.Warnings, error) {
	if g.Spec.Size < old.Spec.Size {
		return nil, fmt.Errorf("spec.size cannot shrink (from %d to %d)", old.Spec.Size, g.Spec.Size)
	}
	return v.ValidateCreate(ctx, g)
}

func (gizmoValidator) ValidateDelete(context.Context, *Gizmo) (webhook.Warnings, error) {
	return nil, nil
}

// defaultGizmo makes a Gizmo blue and of size 1 unless it says otherwise.
func defaultGizmo(_ context.Context, g *Gizmo) error {
	if g.Spec.Color == "" {
		g.Spec.Color = "blue"
	}
	if g.Spec.Size == 0 {
		g.Spec.Size = 1
	}
	return nil
}
