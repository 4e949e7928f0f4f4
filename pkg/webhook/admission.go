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

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Warnings are messages returned to the client with the API server's
// answer, whether the request is admitted or not; kubectl prints each as
// "Warning: ...".
type Warnings []string

// Validator checks objects of type T on their way to the API server's
// storage. T is a pointer to a Go type registered in the scheme given to
// NewValidating, such as *v1.Widget.
//
// A nil error admits the request. An error denies it, and its message is
// what the client sees after the API server's "admission webhook "name"
// denied the request: ". An error that is, or wraps, an
// apierrors.APIStatus (apierrors.NewForbidden, NewInvalid, ...) sets the
// denial's code, reason and details; any other error is a 403 Forbidden.
//
// The methods are called concurrently, from the server's request
// goroutines; the objects are decoded for each call and belong to it.
// RequestFrom(ctx) tells who asked, the operation and whether it is a dry
// run (a validator must then have no side effects, as the webhook
// configuration's sideEffects: None promises).
type Validator[T runtime.Object] interface {
	// ValidateCreate checks an object being created.
	ValidateCreate(ctx context.Context, obj T) (Warnings, error)
	// ValidateUpdate checks a change from oldObj to newObj.
	ValidateUpdate(ctx context.Context, oldObj, newObj T) (Warnings, error)
	// ValidateDelete checks the deletion of obj, the object as stored.
	ValidateDelete(ctx context.Context, obj T) (Warnings, error)
}

// Defaulter fills in the fields of an object of type T that its author
// left out, on create and update. T is a pointer to a Go type registered in
// the scheme given to NewDefaulting.
//
// Default changes obj in place; the API server receives a JSON patch of
// exactly what it changed, and none when it changed nothing. An error
// denies the request, as a Validator's does. Default is called
// concurrently; obj is decoded for each call and belongs to it.
type Defaulter[T runtime.Object] interface {
	Default(ctx context.Context, obj T) error
}

// DefaulterFunc adapts a function to a Defaulter.
type DefaulterFunc[T runtime.Object] func(ctx context.Context, obj T) error

var _ Defaulter[runtime.Object] = DefaulterFunc[runtime.Object](nil)

// Default calls f(ctx, obj).
func (f DefaulterFunc[T]) Default(ctx context.Context, obj T) error { return f(ctx, obj) }

// Admission is an http.Handler that answers the API server's
// admission.k8s.io/v1 AdmissionReviews with a Validator or a Defaulter.
// Build it with NewValidating or NewDefaulting and register it on a Server.
//
// A request that is not a POST of an AdmissionReview in JSON is answered
// with an HTTP error saying what was wrong (405, 415, 413 over 7 MiB, or
// 400); the API server then counts the call as failed and applies the
// webhook's failurePolicy. Everything else is answered with a review whose
// response echoes the request's UID: an object that does not decode, or is
// not of type T, is denied with 400 Bad Request, and a panic in the
// Validator or Defaulter is logged and denied with 500.
type Admission struct {
	handle func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

var admissionReviewKind = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

type requestKey struct{}

// RequestFrom returns the admission request being answered, from the ctx
// passed to a Validator or Defaulter: the user (UserInfo), the Operation,
// DryRun, the resource and sub-resource, and the raw objects. The request
// is shared: do not modify it.
func RequestFrom(ctx context.Context) (*admissionv1.AdmissionRequest, bool) {
	req, ok := ctx.Value(requestKey{}).(*admissionv1.AdmissionRequest)
	return req, ok
}

// NewValidating returns the handler of a validating webhook for objects of
// type T. It fails if scheme is nil, T is not a pointer to a struct, or T
// is not registered in scheme.
//
// Create and update are checked with obj (and the old object on update)
// decoded from the request; delete with the stored object, which the API
// server sends as the request's oldObject. Other operations (CONNECT) are
// admitted without a call.
func NewValidating[T runtime.Object](scheme *runtime.Scheme, v Validator[T]) (*Admission, error) {
	if isNil(v) {
		return nil, errors.New("webhook: NewValidating needs a Validator, got nil")
	}
	k, err := kindOf[T](scheme)
	if err != nil {
		return nil, err
	}
	return &Admission{handle: func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		var warnings Warnings
		var err error
		switch req.Operation {
		case admissionv1.Create:
			obj, derr := k.decode(req.Object, "object")
			if derr != nil {
				return derr
			}
			warnings, err = v.ValidateCreate(ctx, obj)
		case admissionv1.Update:
			oldObj, derr := k.decode(req.OldObject, "oldObject")
			if derr != nil {
				return derr
			}
			obj, derr := k.decode(req.Object, "object")
			if derr != nil {
				return derr
			}
			warnings, err = v.ValidateUpdate(ctx, oldObj, obj)
		case admissionv1.Delete:
			obj, derr := k.decode(req.OldObject, "oldObject")
			if derr != nil {
				return derr
			}
			warnings, err = v.ValidateDelete(ctx, obj)
		default:
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		if err != nil {
			return &admissionv1.AdmissionResponse{Result: denial(err), Warnings: warnings}
		}
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
	}}, nil
}

// NewDefaulting returns the handler of a mutating webhook that defaults
// objects of type T. It fails if scheme is nil, T is not a pointer to a
// struct, or T is not registered in scheme.
//
// Create and update call Default; other operations are admitted
// unchanged. The patch is computed on the object as the request carries
// it, and changes only what Default changed: a field the Go type does not
// know is left as it was, not removed.
func NewDefaulting[T runtime.Object](scheme *runtime.Scheme, d Defaulter[T]) (*Admission, error) {
	if isNil(d) {
		return nil, errors.New("webhook: NewDefaulting needs a Defaulter, got nil")
	}
	k, err := kindOf[T](scheme)
	if err != nil {
		return nil, err
	}
	return &Admission{handle: func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		obj, derr := k.decode(req.Object, "object")
		if derr != nil {
			return derr
		}
		before, err := json.Marshal(obj)
		if err != nil {
			return errored(http.StatusInternalServerError, fmt.Errorf("encoding the object: %w", err))
		}
		if err := d.Default(ctx, obj); err != nil {
			return &admissionv1.AdmissionResponse{Result: denial(err)}
		}
		after, err := json.Marshal(obj)
		if err != nil {
			return errored(http.StatusInternalServerError, fmt.Errorf("encoding the defaulted object: %w", err))
		}
		ops, err := jsonPatch(req.Object.Raw, before, after)
		if err != nil {
			return errored(http.StatusInternalServerError, fmt.Errorf("computing the patch: %w", err))
		}
		if len(ops) == 0 {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return errored(http.StatusInternalServerError, fmt.Errorf("encoding the patch: %w", err))
		}
		pt := admissionv1.PatchTypeJSONPatch
		return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
	}}, nil
}

// ServeHTTP answers one AdmissionReview.
func (a *Admission) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := logr.FromContextOrDiscard(r.Context())
	var review admissionv1.AdmissionReview
	if herr := readReview(w, r, maxAdmissionBody, admissionReviewKind, &review); herr != nil {
		writeError(w, log, herr)
		return
	}
	req := review.Request
	if req == nil {
		writeError(w, log, badRequest("the AdmissionReview has no request"))
		return
	}
	log = log.WithValues("uid", req.UID, "operation", req.Operation, "namespace", req.Namespace, "name", req.Name)
	ctx := logr.NewContext(context.WithValue(r.Context(), requestKey{}, req), log)
	resp := a.call(ctx, log, req)
	resp.UID = req.UID
	if log := log.V(4); log.Enabled() {
		if resp.Allowed {
			log.Info("Admitted", "patched", len(resp.Patch) > 0, "warnings", len(resp.Warnings))
		} else {
			log.Info("Denied", "code", resp.Result.Code, "reason", resp.Result.Reason, "message", resp.Result.Message)
		}
	}
	writeReview(w, log, &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionReviewKind.GroupVersion().String(), Kind: admissionReviewKind.Kind},
		Response: resp,
	})
}

// call runs the handler, turning a panic into a denial.
func (a *Admission) call(ctx context.Context, log logr.Logger, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse) {
	defer func() {
		if p := recover(); p != nil {
			countPanic(ctx, false)
			log.Error(fmt.Errorf("panic: %v", p), "Admission webhook panicked", "stack", string(debug.Stack()))
			resp = errored(http.StatusInternalServerError, errors.New("internal error: the webhook panicked"))
		}
	}()
	return a.handle(ctx, req)
}

// denial is the status of a request denied with err.
func denial(err error) *metav1.Status {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		st.Status = metav1.StatusFailure
		if st.Code == 0 {
			st.Code = http.StatusForbidden
		}
		return &st
	}
	return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
		Reason: metav1.StatusReasonForbidden, Message: err.Error()}
}

// errored is a denial for a request the webhook could not judge: a bad
// object (400) or a failure of its own (500).
func errored(code int32, err error) *admissionv1.AdmissionResponse {
	reason := metav1.StatusReasonBadRequest
	if code == http.StatusInternalServerError {
		reason = metav1.StatusReasonInternalError
	}
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: err.Error(),
	}}
}

// kind is what a webhook for T knows of T.
type kind[T runtime.Object] struct {
	gvks []schema.GroupVersionKind
	elem reflect.Type
}

// kindOf checks that T is a pointer to a struct registered in scheme.
func kindOf[T runtime.Object](scheme *runtime.Scheme) (kind[T], error) {
	t := reflect.TypeFor[T]()
	if scheme == nil {
		return kind[T]{}, fmt.Errorf("webhook: the scheme for %v is nil: pass the scheme its group version is registered in", t)
	}
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return kind[T]{}, fmt.Errorf("webhook: type %v is not a pointer to a struct: use the pointer type, such as *v1.Widget", t)
	}
	gvks, _, err := scheme.ObjectKinds(reflect.New(t.Elem()).Interface().(T))
	if err != nil {
		return kind[T]{}, fmt.Errorf("webhook: type %v is not registered in the scheme: add it with its API package's AddToScheme (or scheme.AddKnownTypes) before building the webhook: %w", t, err)
	}
	return kind[T]{gvks: gvks, elem: t.Elem()}, nil
}

// decode decodes the request's object (field names it), or returns the
// response that denies the request.
func (k kind[T]) decode(raw runtime.RawExtension, field string) (T, *admissionv1.AdmissionResponse) {
	var zero T
	if len(raw.Raw) == 0 {
		return zero, errored(http.StatusBadRequest, fmt.Errorf("the request has no %s", field))
	}
	var tm metav1.TypeMeta
	if err := utiljson.Unmarshal(raw.Raw, &tm); err != nil {
		return zero, errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", field, err))
	}
	if gvk := tm.GroupVersionKind(); !slices.Contains(k.gvks, gvk) {
		return zero, errored(http.StatusBadRequest, fmt.Errorf("the %s is a %q %q, but this webhook admits %s: match only that in the webhook configuration's rules",
			field, gvk.GroupVersion().String(), gvk.Kind, gvkString(k.gvks[0])))
	}
	obj := reflect.New(k.elem).Interface().(T)
	if err := utiljson.Unmarshal(raw.Raw, obj); err != nil {
		return zero, errored(http.StatusBadRequest, fmt.Errorf("decoding the %s as %v: %w", field, k.elem, err))
	}
	return obj, nil
}

func gvkString(gvk schema.GroupVersionKind) string {
	return fmt.Sprintf("%s %s", gvk.GroupVersion().String(), gvk.Kind)
}

// isNil reports whether v is nil or holds a nil pointer, map or func.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
