package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// call records one Validator call.
type call struct {
	method   string
	old, obj *Gadget
	req      *admissionv1.AdmissionRequest
}

// validator denies a Gadget by its color: "red" with a plain error,
// "invalid" with a field error, "panic" by panicking. It warns about a
// size of 0.
type validator struct {
	mu    sync.Mutex
	calls []call
}

func (v *validator) record(ctx context.Context, method string, old, obj *Gadget) (webhook.Warnings, error) {
	req, _ := webhook.RequestFrom(ctx)
	v.mu.Lock()
	v.calls = append(v.calls, call{method, old, obj, req})
	v.mu.Unlock()
	var warnings webhook.Warnings
	if obj.Spec.Size == 0 {
		warnings = append(warnings, "spec.size is 0: the gadget does nothing")
	}
	switch obj.Spec.Color {
	case "red":
		return warnings, errors.New(`spec.color "red" is not allowed: pick blue or green`)
	case "invalid":
		return warnings, apierrors.NewInvalid(schema.GroupKind{Group: groupV1.Group, Kind: "Gadget"}, obj.Name,
			field.ErrorList{field.NotSupported(field.NewPath("spec", "color"), "invalid", []string{"blue", "green"})})
	case "panic":
		panic("validator bug")
	}
	return warnings, nil
}

func (v *validator) ValidateCreate(ctx context.Context, obj *Gadget) (webhook.Warnings, error) {
	return v.record(ctx, "create", nil, obj)
}

func (v *validator) ValidateUpdate(ctx context.Context, old, obj *Gadget) (webhook.Warnings, error) {
	return v.record(ctx, "update", old, obj)
}

func (v *validator) ValidateDelete(ctx context.Context, obj *Gadget) (webhook.Warnings, error) {
	return v.record(ctx, "delete", nil, obj)
}

// review is an AdmissionReview v1 in JSON for op, with the objects given
// as JSON ("" leaves one out).
func review(op admissionv1.Operation, obj, old string) []byte {
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("req-" + strings.ToLower(string(op))),
		Kind:      metav1.GroupVersionKind{Group: groupV1.Group, Version: "v1", Kind: "Gadget"},
		Resource:  metav1.GroupVersionResource{Group: groupV1.Group, Version: "v1", Resource: "gadgets"},
		Namespace: "ns", Name: "g", Operation: op,
		UserInfo: authenticationv1.UserInfo{Username: "alice"},
	}
	if obj != "" {
		req.Object = runtime.RawExtension{Raw: []byte(obj)}
	}
	if old != "" {
		req.OldObject = runtime.RawExtension{Raw: []byte(old)}
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		panic(err)
	}
	return b
}

// post sends body to h as the API server does and returns the recorder.
func post(h http.Handler, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// admit posts body to h and returns the review's response, failing the
// test unless the answer is a 200 AdmissionReview v1 echoing the UID.
func admit(t *testing.T, h http.Handler, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	w := post(h, body)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("decoding the answer %s: %v", w.Body, err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil {
		t.Fatalf("answer %s is not an admission.k8s.io/v1 AdmissionReview with a response", w.Body)
	}
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	if out.Response.UID != in.Request.UID {
		t.Errorf("response UID %q, want the request's %q", out.Response.UID, in.Request.UID)
	}
	return out.Response
}

func TestValidating(t *testing.T) {
	v := &validator{}
	h, err := webhook.NewValidating[*Gadget](newScheme(), v)
	if err != nil {
		t.Fatal(err)
	}
	blue := gadgetJSON(groupV1, "g", `{"size":1,"color":"blue"}`)
	green := gadgetJSON(groupV1, "g", `{"size":2,"color":"green"}`)
	red := gadgetJSON(groupV1, "g", `{"size":1,"color":"red"}`)
	for _, tc := range []struct {
		name         string
		body         []byte
		wantCall     string // "" for no call
		wantOld      int32  // the old object's size, if any
		wantObj      int32  // the object's size
		wantAllowed  bool
		wantCode     int32
		wantReason   metav1.StatusReason
		wantMessage  string // the whole message
		wantWarnings []string
	}{
		{name: "create allowed", body: review(admissionv1.Create, blue, ""), wantCall: "create", wantObj: 1, wantAllowed: true},
		{name: "create denied with the validator's message", body: review(admissionv1.Create, red, ""), wantCall: "create", wantObj: 1,
			wantCode: 403, wantReason: metav1.StatusReasonForbidden, wantMessage: `spec.color "red" is not allowed: pick blue or green`},
		{name: "an API status passes through", body: review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"size":1,"color":"invalid"}`), ""), wantCall: "create", wantObj: 1,
			wantCode: 422, wantReason: metav1.StatusReasonInvalid,
			wantMessage: `Gadget.test.ctrlkit.io "g" is invalid: spec.color: Unsupported value: "invalid": supported values: "blue", "green"`},
		{name: "warnings with an admission", body: review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"color":"blue"}`), ""), wantCall: "create",
			wantAllowed: true, wantWarnings: []string{"spec.size is 0: the gadget does nothing"}},
		{name: "warnings with a denial", body: review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"color":"red"}`), ""), wantCall: "create",
			wantCode: 403, wantReason: metav1.StatusReasonForbidden, wantMessage: `spec.color "red" is not allowed: pick blue or green`,
			wantWarnings: []string{"spec.size is 0: the gadget does nothing"}},
		{name: "update gets old and new", body: review(admissionv1.Update, green, blue), wantCall: "update", wantOld: 1, wantObj: 2, wantAllowed: true},
		{name: "delete gets the stored object from oldObject", body: review(admissionv1.Delete, "", green), wantCall: "delete", wantObj: 2, wantAllowed: true},
		{name: "connect is allowed without a call", body: review(admissionv1.Connect, "", ""), wantAllowed: true},
		{name: "create without an object", body: review(admissionv1.Create, "", ""),
			wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "the request has no object"},
		{name: "update without an old object", body: review(admissionv1.Update, green, ""),
			wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "the request has no oldObject"},
		{name: "delete without an old object", body: review(admissionv1.Delete, green, ""),
			wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "the request has no oldObject"},
		{name: "an object of another kind", body: review(admissionv1.Create, `{"apiVersion":"v1","kind":"ConfigMap"}`, ""),
			wantCode: 400, wantReason: metav1.StatusReasonBadRequest,
			wantMessage: `the object is a "v1" "ConfigMap", but this webhook admits test.ctrlkit.io/v1 Gadget: match only that in the webhook configuration's rules`},
		{name: "an object that does not decode", body: review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"size":"big"}`), ""),
			wantCode: 400, wantReason: metav1.StatusReasonBadRequest,
			wantMessage: "decoding the object as webhook_test.Gadget: json: cannot unmarshal string into Go struct field GadgetSpec.spec.size of type int32"},
		{name: "a panic is a 500", body: review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"size":1,"color":"panic"}`), ""), wantCall: "create", wantObj: 1,
			wantCode: 500, wantReason: metav1.StatusReasonInternalError, wantMessage: "internal error: the webhook panicked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v.mu.Lock()
			v.calls = nil
			v.mu.Unlock()
			resp := admit(t, h, tc.body)
			if resp.Allowed != tc.wantAllowed {
				t.Errorf("Allowed = %v, want %v (result %+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if !tc.wantAllowed {
				r := resp.Result
				if r == nil {
					t.Fatal("a denial without a result")
				}
				if r.Status != metav1.StatusFailure || r.Code != tc.wantCode || r.Reason != tc.wantReason || r.Message != tc.wantMessage {
					t.Errorf("result = %q %d %q %q,\nwant %q %d %q %q", r.Status, r.Code, r.Reason, r.Message,
						metav1.StatusFailure, tc.wantCode, tc.wantReason, tc.wantMessage)
				}
			}
			if !reflect.DeepEqual([]string(resp.Warnings), tc.wantWarnings) {
				t.Errorf("Warnings = %q, want %q", resp.Warnings, tc.wantWarnings)
			}
			if resp.Patch != nil || resp.PatchType != nil {
				t.Errorf("a validating webhook answered with a patch: %s", resp.Patch)
			}
			v.mu.Lock()
			calls := v.calls
			v.mu.Unlock()
			if tc.wantCall == "" {
				if len(calls) != 0 {
					t.Fatalf("the validator was called: %+v", calls)
				}
				return
			}
			if len(calls) != 1 || calls[0].method != tc.wantCall {
				t.Fatalf("calls = %+v, want one %s", calls, tc.wantCall)
			}
			c := calls[0]
			if c.obj == nil || c.obj.Spec.Size != tc.wantObj || c.obj.Name != "g" || c.obj.Namespace != "ns" {
				t.Errorf("the validator got object %+v, want g in ns of size %d", c.obj, tc.wantObj)
			}
			if (c.old != nil) != (tc.wantOld != 0) || c.old != nil && c.old.Spec.Size != tc.wantOld {
				t.Errorf("the validator got old object %+v, want size %d", c.old, tc.wantOld)
			}
		})
	}
}

func TestRequestFrom(t *testing.T) {
	if _, ok := webhook.RequestFrom(t.Context()); ok {
		t.Error("RequestFrom found a request in a plain context")
	}
	v := &validator{}
	h, err := webhook.NewValidating[*Gadget](newScheme(), v)
	if err != nil {
		t.Fatal(err)
	}
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(review(admissionv1.Update, gadgetJSON(groupV1, "g", `{"size":1}`), gadgetJSON(groupV1, "g", `{}`)), &in); err != nil {
		t.Fatal(err)
	}
	dryRun := true
	in.Request.DryRun = &dryRun
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	admit(t, h, body)
	req := v.calls[0].req
	if req == nil {
		t.Fatal("RequestFrom found no request in the validator's ctx")
	}
	if req.UserInfo.Username != "alice" || req.Operation != admissionv1.Update || req.DryRun == nil || !*req.DryRun ||
		req.UID != in.Request.UID || req.Resource.Resource != "gadgets" {
		t.Errorf("RequestFrom = %+v, want alice's dry-run update of gadgets", req)
	}
}

// TestAdmissionHTTPErrors covers requests that are not AdmissionReviews:
// they get an HTTP error whose body says what was wrong.
func TestAdmissionHTTPErrors(t *testing.T) {
	h, err := webhook.NewValidating[*Gadget](newScheme(), &validator{})
	if err != nil {
		t.Fatal(err)
	}
	good := review(admissionv1.Create, gadgetJSON(groupV1, "g", `{}`), "")
	for _, tc := range []struct {
		name        string
		method, ct  string
		body        []byte
		wantCode    int
		wantMessage string
	}{
		{"GET", http.MethodGet, "application/json", good, 405, "webhook: method GET is not allowed: send the AdmissionReview with POST"},
		{"no content type", http.MethodPost, "", good, 415, `webhook: Content-Type "" is not supported: send the AdmissionReview as application/json`},
		{"YAML", http.MethodPost, "application/yaml", good, 415, `webhook: Content-Type "application/yaml" is not supported: send the AdmissionReview as application/json`},
		{"empty body", http.MethodPost, "application/json", nil, 400, "webhook: the request body is empty: send the AdmissionReview in it"},
		{"malformed", http.MethodPost, "application/json", []byte(`{"request":`), 400, "webhook: decoding the AdmissionReview: unexpected end of JSON input"},
		{"v1beta1", http.MethodPost, "application/json", bytes.Replace(good, []byte("admission.k8s.io/v1"), []byte("admission.k8s.io/v1beta1"), 1), 400,
			`webhook: the body is "admission.k8s.io/v1beta1" "AdmissionReview", want admission.k8s.io/v1 AdmissionReview: list v1 first in the webhook configuration's review versions`},
		{"no request", http.MethodPost, "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), 400,
			"webhook: the AdmissionReview has no request"},
		{"too large", http.MethodPost, "application/json", append(good, bytes.Repeat([]byte(" "), 7<<20)...), 413,
			"webhook: the AdmissionReview is larger than 7340032 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/hook", bytes.NewReader(tc.body))
			if tc.ct != "" {
				r.Header.Set("Content-Type", tc.ct)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if got := strings.TrimSpace(w.Body.String()); w.Code != tc.wantCode || got != tc.wantMessage {
				t.Errorf("got %d %q,\nwant %d %q", w.Code, got, tc.wantCode, tc.wantMessage)
			}
		})
	}
	// A charset parameter is fine.
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(good))
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("application/json; charset=utf-8: status %d, want 200: %s", w.Code, w.Body)
	}
}

// defaulter sets a Gadget's missing color to blue and size to 1; a color
// of "error" fails.
func defaulter(_ context.Context, g *Gadget) error {
	if g.Spec.Color == "error" {
		return apierrors.NewBadRequest("cannot default an error")
	}
	if g.Spec.Color == "" {
		g.Spec.Color = "blue"
	}
	if g.Spec.Size == 0 {
		g.Spec.Size = 1
	}
	return nil
}

func TestDefaulting(t *testing.T) {
	h, err := webhook.NewDefaulting[*Gadget](newScheme(), webhook.DefaulterFunc[*Gadget](defaulter))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		body      []byte
		wantPatch string // "" for none
		wantDeny  string
	}{
		{name: "fills fields", body: review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"tags":["a"]}`), ""),
			wantPatch: `[{"op":"add","path":"/spec/color","value":"blue"},{"op":"add","path":"/spec/size","value":1}]`},
		{name: "fills a missing spec", body: review(admissionv1.Create, `{"apiVersion":"test.ctrlkit.io/v1","kind":"Gadget","metadata":{"name":"g"}}`, ""),
			wantPatch: `[{"op":"add","path":"/spec","value":{"color":"blue","size":1}}]`},
		{name: "on update", body: review(admissionv1.Update, gadgetJSON(groupV1, "g", `{"size":3}`), gadgetJSON(groupV1, "g", `{"size":3,"color":"red"}`)),
			wantPatch: `[{"op":"add","path":"/spec/color","value":"blue"}]`},
		{name: "no patch when nothing changed", body: review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"size":2,"color":"red"}`), "")},
		{name: "a field the type does not know is kept", body: review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"size":2,"future":{"x":1}}`), ""),
			wantPatch: `[{"op":"add","path":"/spec/color","value":"blue"}]`},
		{name: "delete is admitted unchanged", body: review(admissionv1.Delete, "", gadgetJSON(groupV1, "g", `{}`))},
		{name: "an error denies", body: review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"color":"error"}`), ""), wantDeny: "cannot default an error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := admit(t, h, tc.body)
			if tc.wantDeny != "" {
				if resp.Allowed || resp.Result == nil || resp.Result.Message != tc.wantDeny || resp.Result.Code != 400 {
					t.Errorf("response %+v, want a 400 denial %q", resp, tc.wantDeny)
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if tc.wantPatch == "" {
				if resp.Patch != nil || resp.PatchType != nil {
					t.Errorf("patch %s, want none", resp.Patch)
				}
				return
			}
			if string(resp.Patch) != tc.wantPatch {
				t.Errorf("patch:\n got %s\nwant %s", resp.Patch, tc.wantPatch)
			}
			if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Errorf("PatchType = %v, want JSONPatch", resp.PatchType)
			}
		})
	}
}

// valueObject is a runtime.Object that is not a pointer.
type valueObject struct{}

func (valueObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (valueObject) DeepCopyObject() runtime.Object   { return valueObject{} }

func TestNewAdmissionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func() error
		want string
	}{
		{"nil scheme", func() error { _, err := webhook.NewValidating[*Gadget](nil, &validator{}); return err },
			"webhook: the scheme for *webhook_test.Gadget is nil: pass the scheme its group version is registered in"},
		{"not registered", func() error {
			_, err := webhook.NewDefaulting[*Unregistered](newScheme(), webhook.DefaulterFunc[*Unregistered](func(context.Context, *Unregistered) error { return nil }))
			return err
		}, "webhook: type *webhook_test.Unregistered is not registered in the scheme: add it with its API package's AddToScheme (or scheme.AddKnownTypes) before building the webhook: "},
		{"not a pointer", func() error {
			_, err := webhook.NewDefaulting[valueObject](newScheme(), webhook.DefaulterFunc[valueObject](func(context.Context, valueObject) error { return nil }))
			return err
		}, "webhook: type webhook_test.valueObject is not a pointer to a struct: use the pointer type, such as *v1.Widget"},
		{"nil validator", func() error { _, err := webhook.NewValidating[*Gadget](newScheme(), nil); return err },
			"webhook: NewValidating needs a Validator, got nil"},
		{"nil defaulter", func() error {
			_, err := webhook.NewDefaulting[*Gadget](newScheme(), webhook.DefaulterFunc[*Gadget](nil))
			return err
		},
			"webhook: NewDefaulting needs a Defaulter, got nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.new()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error = %v,\nwant one starting %q", err, tc.want)
			}
		})
	}
	if _, err := webhook.NewValidating[*Unregistered](newScheme(), unregisteredValidator{}); !runtime.IsNotRegisteredError(errors.Unwrap(err)) {
		t.Errorf("the not-registered error %v does not wrap the scheme's", err)
	}
}

type unregisteredValidator struct{}

func (unregisteredValidator) ValidateCreate(context.Context, *Unregistered) (webhook.Warnings, error) {
	return nil, nil
}

func (unregisteredValidator) ValidateUpdate(context.Context, *Unregistered, *Unregistered) (webhook.Warnings, error) {
	return nil, nil
}

func (unregisteredValidator) ValidateDelete(context.Context, *Unregistered) (webhook.Warnings, error) {
	return nil, nil
}
