package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// Widget is example.com/v1 Widget, the hub version.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

type WidgetSpec struct {
	Size  int32  `json:"size,omitempty"`
	Color string `json:"color,omitempty"`
}

func (w *Widget) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// WidgetV1alpha1 is example.com/v1alpha1 Widget, which spelled color
// "colour".
type WidgetV1alpha1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size   int32  `json:"size,omitempty"`
		Colour string `json:"colour,omitempty"`
	} `json:"spec,omitempty"`
}

func (w *WidgetV1alpha1) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// ConvertTo converts w to the hub version.
func (w *WidgetV1alpha1) ConvertTo(hub runtime.Object) error {
	h := hub.(*Widget)
	h.ObjectMeta = w.ObjectMeta
	h.Spec = WidgetSpec{Size: w.Spec.Size, Color: w.Spec.Colour}
	return nil
}

// ConvertFrom converts the hub version to w.
func (w *WidgetV1alpha1) ConvertFrom(hub runtime.Object) error {
	h := hub.(*Widget)
	w.ObjectMeta = h.ObjectMeta
	w.Spec.Size, w.Spec.Colour = h.Spec.Size, h.Spec.Color
	return nil
}

func exampleScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, &Widget{})
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "Widget"}, &WidgetV1alpha1{})
	return s
}

// widgetValidator refuses red widgets, and shrinking them.
type widgetValidator struct{}

func (widgetValidator) ValidateCreate(_ context.Context, w *Widget) (webhook.Warnings, error) {
	if w.Spec.Color == "red" {
		return nil, errors.New(`spec.color: "red" is not allowed, pick blue or green`)
	}
	return nil, nil
}

func (v widgetValidator) ValidateUpdate(ctx context.Context, old, w *Widget) (webhook.Warnings, error) {
	if w.Spec.Size < old.Spec.Size {
		return nil, fmt.Errorf("spec.size: a widget cannot shrink (from %d to %d)", old.Spec.Size, w.Spec.Size)
	}
	return v.ValidateCreate(ctx, w)
}

func (widgetValidator) ValidateDelete(ctx context.Context, w *Widget) (webhook.Warnings, error) {
	if req, _ := webhook.RequestFrom(ctx); req.UserInfo.Username != "admin" {
		return webhook.Warnings{"deleted by " + req.UserInfo.Username}, nil
	}
	return nil, nil
}

// ExampleNewValidating builds a validating webhook and answers a review as
// the API server would send it.
func ExampleNewValidating() {
	validate, err := webhook.NewValidating[*Widget](exampleScheme(), widgetValidator{})
	if err != nil {
		panic(err)
	}
	// On a Server: srv.Register("/validate-widgets", validate).
	resp := send(validate, admissionv1.Create, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red"}}`)
	fmt.Println(resp.Allowed, resp.Result.Code, resp.Result.Message)

	// A type missing from the scheme fails at construction.
	_, err = webhook.NewValidating[*Widget](runtime.NewScheme(), widgetValidator{})
	fmt.Println(err != nil)
	// Output:
	// false 403 spec.color: "red" is not allowed, pick blue or green
	// true
}

// ExampleNewDefaulting builds a defaulting webhook: the answer patches what
// Default changed, and nothing else.
func ExampleNewDefaulting() {
	mutate, err := webhook.NewDefaulting[*Widget](exampleScheme(), webhook.DefaulterFunc[*Widget](
		func(_ context.Context, w *Widget) error {
			if w.Spec.Size == 0 {
				w.Spec.Size = 1
			}
			return nil
		}))
	if err != nil {
		panic(err)
	}
	// On a Server: srv.Register("/default-widgets", mutate).
	resp := send(mutate, admissionv1.Create, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"blue"}}`)
	fmt.Println(resp.Allowed, *resp.PatchType, string(resp.Patch))
	// Output:
	// true JSONPatch [{"op":"add","path":"/spec/size","value":1}]
}

// ExampleNewConversion builds the conversion webhook of a CRD served as
// v1alpha1 and v1, and converts a v1alpha1 Widget to v1.
func ExampleNewConversion() {
	convert, err := webhook.NewConversion(exampleScheme(), &Widget{}, &WidgetV1alpha1{})
	if err != nil {
		panic(err)
	}
	// On a Server: srv.Register("/convert-widgets", convert), the path of
	// the CRD's spec.conversion.webhook.clientConfig.
	body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"example.com/v1",
		"objects":[{"apiVersion":"example.com/v1alpha1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2,"colour":"green"}}]}}`
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/convert-widgets", bytes.NewBufferString(body))
	r.Header.Set("Content-Type", "application/json")
	convert.ServeHTTP(w, r)
	var out struct {
		Response struct {
			ConvertedObjects []json.RawMessage `json:"convertedObjects"`
			Result           metav1.Status     `json:"result"`
		} `json:"response"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		panic(err)
	}
	fmt.Println(out.Response.Result.Status, string(out.Response.ConvertedObjects[0]))
	// Output:
	// Success {"kind":"Widget","apiVersion":"example.com/v1","metadata":{"name":"w"},"spec":{"size":2,"color":"green"}}
}

// ExampleServer registers webhooks on a Server; a path can be registered
// once.
func ExampleServer() {
	srv, err := webhook.NewServer(webhook.Options{
		Addr: ":9443",
		// A certificate source's method; see manager.CertificateSource.
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, errors.New("not yet") },
	})
	if err != nil {
		panic(err)
	}
	validate, err := webhook.NewValidating[*Widget](exampleScheme(), widgetValidator{})
	if err != nil {
		panic(err)
	}
	fmt.Println(srv.Register("/validate-widgets", validate))
	fmt.Println(srv.Register("/validate-widgets", validate))
	// srv.Start(ctx) serves until ctx is done; a manager does it itself.
	// Output:
	// <nil>
	// webhook: path "/validate-widgets" is registered twice: give each webhook a path of its own
}

// send posts an AdmissionReview of op on obj to h, as the API server does,
// and returns the response.
func send(h http.Handler, op admissionv1.Operation, obj string) *admissionv1.AdmissionResponse {
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "1", Operation: op,
			Object: runtime.RawExtension{Raw: []byte(obj)}},
	})
	if err != nil {
		panic(err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, r)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		panic(err)
	}
	return out.Response
}

// Mutual TLS: the server accepts only clients whose certificate a CA of
// yours signed, such as an API server given a client certificate for
// webhooks in its --admission-control-config-file. (It has no Output: it
// serves until stopped.)
func ExampleOptions_mutualTLS() {
	clientCA, err := os.ReadFile("/etc/webhook/client-ca.crt")
	if err != nil {
		log.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(clientCA)
	source, err := certs.NewFiles(certs.FilesOptions{CertFile: "/etc/webhook/certs/tls.crt", KeyFile: "/etc/webhook/certs/tls.key"})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := webhook.NewServer(webhook.Options{
		GetCertificate: source.GetCertificate,
		TLS: func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS13
			c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = srv.Start(context.Background())
}
