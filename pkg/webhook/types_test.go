package webhook_test

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The test API: Gadget in three versions. v1 is the hub; v1alpha1 spells
// color "colour"; v1beta1 nests the size.
var (
	groupV1       = schema.GroupVersion{Group: "test.ctrlkit.io", Version: "v1"}
	groupV1alpha1 = schema.GroupVersion{Group: "test.ctrlkit.io", Version: "v1alpha1"}
	groupV1beta1  = schema.GroupVersion{Group: "test.ctrlkit.io", Version: "v1beta1"}
)

// newScheme returns a scheme with the three versions of Gadget and Other, a
// second kind.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(groupV1, &Gadget{}, &Other{})
	s.AddKnownTypeWithName(groupV1alpha1.WithKind("Gadget"), &GadgetV1alpha1{})
	s.AddKnownTypeWithName(groupV1beta1.WithKind("Gadget"), &GadgetV1beta1{})
	return s
}

// Gadget is the hub version, test.ctrlkit.io/v1.
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GadgetSpec `json:"spec,omitempty"`
}

// GadgetSpec is the spec of a v1 Gadget.
type GadgetSpec struct {
	Size  int32    `json:"size,omitempty"`
	Color string   `json:"color,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

func (g *Gadget) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Tags = append([]string(nil), g.Spec.Tags...)
	return &out
}

// GadgetV1alpha1 is test.ctrlkit.io/v1alpha1 Gadget.
type GadgetV1alpha1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size   int32  `json:"size,omitempty"`
		Colour string `json:"colour,omitempty"`
	} `json:"spec,omitempty"`
}

func (g *GadgetV1alpha1) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// errUnconvertible is what ConvertTo returns for a Gadget whose colour is
// "plaid".
var errUnconvertible = errors.New("plaid has no v1 color")

func (g *GadgetV1alpha1) ConvertTo(hub runtime.Object) error {
	h := hub.(*Gadget)
	if g.Spec.Colour == "plaid" {
		return errUnconvertible
	}
	if g.Spec.Colour == "panic" {
		panic("converter bug")
	}
	h.ObjectMeta = g.ObjectMeta
	h.Spec.Size = g.Spec.Size
	h.Spec.Color = g.Spec.Colour
	return nil
}

func (g *GadgetV1alpha1) ConvertFrom(hub runtime.Object) error {
	h := hub.(*Gadget)
	g.ObjectMeta = h.ObjectMeta
	g.Spec.Size = h.Spec.Size
	g.Spec.Colour = h.Spec.Color
	return nil
}

// GadgetV1beta1 is test.ctrlkit.io/v1beta1 Gadget.
type GadgetV1beta1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Dimensions struct {
			Size int32 `json:"size,omitempty"`
		} `json:"dimensions"`
		Color string `json:"color,omitempty"`
	} `json:"spec,omitempty"`
}

func (g *GadgetV1beta1) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

func (g *GadgetV1beta1) ConvertTo(hub runtime.Object) error {
	h := hub.(*Gadget)
	h.ObjectMeta = g.ObjectMeta
	h.Spec.Size = g.Spec.Dimensions.Size
	h.Spec.Color = g.Spec.Color
	return nil
}

func (g *GadgetV1beta1) ConvertFrom(hub runtime.Object) error {
	h := hub.(*Gadget)
	g.ObjectMeta = h.ObjectMeta
	g.Spec.Dimensions.Size = h.Spec.Size
	g.Spec.Color = h.Spec.Color
	return nil
}

// Other is a second kind of the group, test.ctrlkit.io/v1 Other.
type Other struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (o *Other) DeepCopyObject() runtime.Object {
	out := *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

func (o *Other) ConvertTo(runtime.Object) error   { return nil }
func (o *Other) ConvertFrom(runtime.Object) error { return nil }

// Unregistered is a type no scheme knows.
type Unregistered struct{ Gadget }

func (u *Unregistered) ConvertTo(runtime.Object) error   { return nil }
func (u *Unregistered) ConvertFrom(runtime.Object) error { return nil }

func (u *Unregistered) DeepCopyObject() runtime.Object {
	out := *u
	return &out
}

// gadgetJSON is a Gadget of version gv in JSON, with spec as given.
func gadgetJSON(gv schema.GroupVersion, name, spec string) string {
	return fmt.Sprintf(`{"apiVersion":%q,"kind":"Gadget","metadata":{"name":%q,"namespace":"ns","uid":"u-%s"},"spec":%s}`,
		gv.String(), name, strings.ToLower(name), spec)
}
