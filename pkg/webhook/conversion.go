package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Convertible is a version of a kind that is not its hub: it converts
// itself to and from the hub version.
//
// ConvertTo fills hub (a new object of the hub's Go type) from the
// receiver; ConvertFrom fills the receiver from hub. Both must copy the
// ObjectMeta whole: the API server rejects a conversion that changes
// anything in metadata but labels and annotations. A field one version has
// and the other lacks is kept across a round trip by storing it in an
// annotation, or lost. They are called concurrently, each on objects of
// its own.
type Convertible interface {
	runtime.Object
	ConvertTo(hub runtime.Object) error
	ConvertFrom(hub runtime.Object) error
}

// Conversion is an http.Handler that answers the API server's
// apiextensions.k8s.io/v1 ConversionReviews for the versions of one kind of
// custom resource, hub and spoke: one version is the hub, every other (a
// spoke) converts to and from it, and a conversion between two spokes goes
// through the hub. Build it with NewConversion and register it on a Server
// at the path of the CRD's spec.conversion.webhook.clientConfig.
//
// A request that is not a POST of a ConversionReview in JSON is answered
// with an HTTP error saying what was wrong (405, 415 or 400). Anything that
// fails in converting the review's objects (an object of an unknown
// version or another kind, a desiredAPIVersion it does not know, an error
// or panic in ConvertTo or ConvertFrom) fails the whole review: its
// response's result says which object and why, and the API server returns
// that to the client. An object already at the desired version is returned
// unchanged. The request body is not bounded: the API server converts a
// list in one review.
type Conversion struct {
	gk  schema.GroupKind
	hub schema.GroupVersionKind
	// types are the Go types of the versions, the hub's included.
	types map[schema.GroupVersionKind]reflect.Type
}

var conversionReviewKind = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "ConversionReview"}

// conversionReview, conversionRequest and conversionResponse are the wire
// form of apiextensions.k8s.io/v1 ConversionReview: package webhook does not
// import the apiextensions apiserver, whose module would come with it.
type conversionReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *conversionRequest  `json:"request,omitempty"`
	Response        *conversionResponse `json:"response,omitempty"`
}

type conversionRequest struct {
	UID               types.UID              `json:"uid"`
	DesiredAPIVersion string                 `json:"desiredAPIVersion"`
	Objects           []runtime.RawExtension `json:"objects"`
}

type conversionResponse struct {
	UID              types.UID              `json:"uid"`
	ConvertedObjects []runtime.RawExtension `json:"convertedObjects"`
	Result           metav1.Status          `json:"result"`
}

// NewConversion returns the conversion handler for the kind of hub: hub
// is an object of the hub version's Go type and spokes one object of each
// other version's type, such as &v1.Widget{} and &v1alpha1.Widget{}. It
// fails unless every type is a pointer to a struct registered in scheme as
// a version of the hub's group and kind, each version given once.
func NewConversion(scheme *runtime.Scheme, hub runtime.Object, spokes ...Convertible) (*Conversion, error) {
	if scheme == nil {
		return nil, errors.New("webhook: NewConversion: the scheme is nil: pass the scheme the versions are registered in")
	}
	if isNil(hub) {
		return nil, errors.New("webhook: NewConversion: the hub is nil: pass an object of the hub version's type, such as &v1.Widget{}")
	}
	if len(spokes) == 0 {
		return nil, fmt.Errorf("webhook: NewConversion: no spokes for hub %T: pass an object of each other version's type", hub)
	}
	c := &Conversion{types: make(map[schema.GroupVersionKind]reflect.Type, 1+len(spokes))}
	var err error
	if c.hub, err = versionOf(scheme, hub, "hub", schema.GroupKind{}); err != nil {
		return nil, err
	}
	c.gk = c.hub.GroupKind()
	c.types[c.hub] = reflect.TypeOf(hub).Elem()
	for i, s := range spokes {
		if isNil(s) {
			return nil, fmt.Errorf("webhook: NewConversion: spoke %d is nil", i)
		}
		gvk, err := versionOf(scheme, s, "spoke", c.gk)
		if err != nil {
			return nil, err
		}
		if prev, ok := c.types[gvk]; ok {
			return nil, fmt.Errorf("webhook: NewConversion: %T and %v are both version %s of %s: give each version once", s, reflect.PointerTo(prev), gvk.Version, c.gk)
		}
		c.types[gvk] = reflect.TypeOf(s).Elem()
	}
	return c, nil
}

// versionOf returns the version of obj (role names it) in scheme; with gk
// set, obj must be of that group and kind.
func versionOf(scheme *runtime.Scheme, obj runtime.Object, role string, gk schema.GroupKind) (schema.GroupVersionKind, error) {
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return schema.GroupVersionKind{}, fmt.Errorf("webhook: NewConversion: %s %v is not a pointer to a struct: pass one such as &v1.Widget{}", role, t)
	}
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("webhook: NewConversion: %s %v is not registered in the scheme: add it with its API package's AddToScheme (or scheme.AddKnownTypes) before building the webhook: %w", role, t, err)
	}
	if gk.Empty() {
		return gvks[0], nil
	}
	for _, gvk := range gvks {
		if gvk.GroupKind() == gk {
			return gvk, nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("webhook: NewConversion: %s %v is %s, not a version of the hub's %s: build one Conversion for each kind", role, t, gvkString(gvks[0]), gk)
}

// ServeHTTP answers one ConversionReview.
func (c *Conversion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := logr.FromContextOrDiscard(r.Context())
	var review conversionReview
	if herr := readReview(w, r, 0, conversionReviewKind, &review); herr != nil {
		writeError(w, log, herr)
		return
	}
	req := review.Request
	if req == nil {
		writeError(w, log, badRequest("the ConversionReview has no request"))
		return
	}
	log = log.WithValues("uid", req.UID, "desiredAPIVersion", req.DesiredAPIVersion, "objects", len(req.Objects))
	resp := &conversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	converted, err := c.convertAll(logr.NewContext(r.Context(), log), req)
	if err != nil {
		log.V(4).Info("Conversion failed", "err", err)
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		log.V(4).Info("Converted")
		resp.ConvertedObjects = converted
	}
	writeReview(w, log, &conversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: conversionReviewKind.GroupVersion().String(), Kind: conversionReviewKind.Kind},
		Response: resp,
	})
}

func (c *Conversion) convertAll(ctx context.Context, req *conversionRequest) ([]runtime.RawExtension, error) {
	gv, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		return nil, fmt.Errorf("desiredAPIVersion %q: %w", req.DesiredAPIVersion, err)
	}
	to := gv.WithKind(c.gk.Kind)
	if _, ok := c.types[to]; !ok {
		return nil, fmt.Errorf("desiredAPIVersion %q is not a version of %s this webhook converts (%s)", req.DesiredAPIVersion, c.gk, c.versions())
	}
	out := make([]runtime.RawExtension, len(req.Objects))
	for i, raw := range req.Objects {
		converted, err := c.convert(ctx, raw.Raw, to)
		if err != nil {
			return nil, fmt.Errorf("converting object %d%s to %s: %w", i, describe(raw.Raw), req.DesiredAPIVersion, err)
		}
		out[i] = runtime.RawExtension{Raw: converted}
	}
	return out, nil
}

// convert converts one object to version to, through the hub.
func (c *Conversion) convert(ctx context.Context, raw []byte, to schema.GroupVersionKind) (_ []byte, err error) {
	var tm metav1.TypeMeta
	if err := utiljson.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	from := tm.GroupVersionKind()
	if _, ok := c.types[from]; !ok {
		return nil, fmt.Errorf("the object is a %q %q, not a version of %s this webhook converts (%s)", tm.APIVersion, tm.Kind, c.gk, c.versions())
	}
	if from == to {
		return raw, nil
	}
	src := c.newObject(from)
	if err := utiljson.Unmarshal(raw, src); err != nil {
		return nil, fmt.Errorf("decoding as %T: %w", src, err)
	}
	dst := c.newObject(to)
	defer func() {
		if p := recover(); p != nil {
			countPanic(ctx, true)
			logr.FromContextOrDiscard(ctx).Error(fmt.Errorf("panic: %v", p), "Conversion panicked", "from", from.Version, "to", to.Version, "stack", string(debug.Stack()))
			err = fmt.Errorf("conversion panicked: %v", p)
		}
	}()
	switch {
	case from == c.hub:
		err = dst.(Convertible).ConvertFrom(src)
	case to == c.hub:
		err = src.(Convertible).ConvertTo(dst)
	default:
		hub := c.newObject(c.hub)
		if err = src.(Convertible).ConvertTo(hub); err == nil {
			err = dst.(Convertible).ConvertFrom(hub)
		}
	}
	if err != nil {
		return nil, err
	}
	dst.GetObjectKind().SetGroupVersionKind(to)
	return json.Marshal(dst)
}

func (c *Conversion) newObject(gvk schema.GroupVersionKind) runtime.Object {
	return reflect.New(c.types[gvk]).Interface().(runtime.Object)
}

// versions lists the versions, hub first.
func (c *Conversion) versions() string {
	var spokes []string
	for gvk := range c.types {
		if gvk != c.hub {
			spokes = append(spokes, gvk.Version)
		}
	}
	slices.Sort(spokes)
	return "hub " + c.hub.Version + ", spokes " + strings.Join(spokes, ", ")
}

// describe names an object by namespace and name, for an error.
func describe(raw []byte) string {
	var obj struct {
		Metadata struct{ Namespace, Name string } `json:"metadata"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Metadata.Name == "" {
		return ""
	}
	if obj.Metadata.Namespace == "" {
		return fmt.Sprintf(" (%s)", obj.Metadata.Name)
	}
	return fmt.Sprintf(" (%s/%s)", obj.Metadata.Namespace, obj.Metadata.Name)
}
