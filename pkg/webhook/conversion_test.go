package webhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// conversionReview is the test's own copy of the
// apiextensions.k8s.io/v1 ConversionReview wire form.
type conversionReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID               string            `json:"uid"`
		DesiredAPIVersion string            `json:"desiredAPIVersion"`
		Objects           []json.RawMessage `json:"objects"`
	} `json:"request,omitempty"`
	Response *struct {
		UID              string            `json:"uid"`
		ConvertedObjects []json.RawMessage `json:"convertedObjects"`
		Result           metav1.Status     `json:"result"`
	} `json:"response,omitempty"`
}

func conversionBody(desired schema.GroupVersion, objects ...string) []byte {
	return []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"conv-1","desiredAPIVersion":"` +
		desired.String() + `","objects":[` + strings.Join(objects, ",") + `]}}`)
}

// convert posts body to h and returns the review's response.
func convert(t *testing.T, h http.Handler, body []byte) (objects []string, result metav1.Status) {
	t.Helper()
	w := post(h, body)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", w.Code, w.Body)
	}
	var out conversionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("decoding the answer %s: %v", w.Body, err)
	}
	if out.APIVersion != "apiextensions.k8s.io/v1" || out.Kind != "ConversionReview" || out.Response == nil || out.Request != nil {
		t.Fatalf("answer %s is not an apiextensions.k8s.io/v1 ConversionReview with only a response", w.Body)
	}
	if out.Response.UID != "conv-1" {
		t.Errorf("response UID %q, want the request's conv-1", out.Response.UID)
	}
	for _, o := range out.Response.ConvertedObjects {
		objects = append(objects, string(o))
	}
	return objects, out.Response.Result
}

func newConversion(t *testing.T) *webhook.Conversion {
	t.Helper()
	c, err := webhook.NewConversion(newScheme(), &Gadget{}, &GadgetV1alpha1{}, &GadgetV1beta1{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConversion(t *testing.T) {
	c := newConversion(t)
	alpha := gadgetJSON(groupV1alpha1, "a", `{"size":1,"colour":"red"}`)
	hub := gadgetJSON(groupV1, "h", `{"size":2,"color":"blue"}`)
	beta := gadgetJSON(groupV1beta1, "b", `{"dimensions":{"size":3},"color":"green"}`)
	for _, tc := range []struct {
		name    string
		to      schema.GroupVersion
		objects []string
		want    []string
	}{
		{"spoke to hub", groupV1, []string{alpha},
			[]string{gadgetJSON(groupV1, "a", `{"size":1,"color":"red"}`)}},
		{"hub to spoke", groupV1alpha1, []string{hub},
			[]string{gadgetJSON(groupV1alpha1, "h", `{"size":2,"colour":"blue"}`)}},
		{"spoke to spoke through the hub", groupV1beta1, []string{alpha},
			[]string{gadgetJSON(groupV1beta1, "a", `{"dimensions":{"size":1},"color":"red"}`)}},
		{"several versions in one review, the desired one unchanged", groupV1alpha1, []string{hub, beta, alpha},
			[]string{gadgetJSON(groupV1alpha1, "h", `{"size":2,"colour":"blue"}`), gadgetJSON(groupV1alpha1, "b", `{"size":3,"colour":"green"}`), alpha}},
		{"no objects", groupV1, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, result := convert(t, c, conversionBody(tc.to, tc.objects...))
			if result.Status != metav1.StatusSuccess {
				t.Fatalf("result %+v, want Success", result)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("converted %d objects, want %d: %s", len(got), len(tc.want), got)
			}
			for i := range got {
				assertJSONEqual(t, got[i], tc.want[i])
			}
		})
	}
}

// TestConversionRoundTrip converts each version to every other and back.
func TestConversionRoundTrip(t *testing.T) {
	c := newConversion(t)
	versions := map[schema.GroupVersion]string{
		groupV1:       gadgetJSON(groupV1, "g", `{"size":4,"color":"blue"}`),
		groupV1alpha1: gadgetJSON(groupV1alpha1, "g", `{"size":4,"colour":"blue"}`),
		groupV1beta1:  gadgetJSON(groupV1beta1, "g", `{"dimensions":{"size":4},"color":"blue"}`),
	}
	for from, obj := range versions {
		for to, want := range versions {
			got, result := convert(t, c, conversionBody(to, obj))
			if result.Status != metav1.StatusSuccess || len(got) != 1 {
				t.Fatalf("%s to %s: %d objects, result %+v", from, to, len(got), result)
			}
			assertJSONEqual(t, got[0], want)
			back, _ := convert(t, c, conversionBody(from, got[0]))
			assertJSONEqual(t, back[0], obj)
		}
	}
}

// TestConversionFailure checks that a failure is reported in the review's
// result, naming the object, with no converted objects.
func TestConversionFailure(t *testing.T) {
	c := newConversion(t)
	good := gadgetJSON(groupV1alpha1, "good", `{"size":1}`)
	for _, tc := range []struct {
		name    string
		to      schema.GroupVersion
		objects []string
		want    string
	}{
		{"ConvertTo fails", groupV1, []string{good, gadgetJSON(groupV1alpha1, "tartan", `{"colour":"plaid"}`)},
			"converting object 1 (ns/tartan) to test.ctrlkit.io/v1: plaid has no v1 color"},
		{"ConvertTo panics", groupV1beta1, []string{gadgetJSON(groupV1alpha1, "bug", `{"colour":"panic"}`)},
			"converting object 0 (ns/bug) to test.ctrlkit.io/v1beta1: conversion panicked: converter bug"},
		{"unknown desired version", schema.GroupVersion{Group: groupV1.Group, Version: "v2"}, []string{good},
			`desiredAPIVersion "test.ctrlkit.io/v2" is not a version of Gadget.test.ctrlkit.io this webhook converts (hub v1, spokes v1alpha1, v1beta1)`},
		{"another kind", groupV1, []string{`{"apiVersion":"test.ctrlkit.io/v1alpha1","kind":"Other","metadata":{"name":"o"}}`},
			`converting object 0 (o) to test.ctrlkit.io/v1: the object is a "test.ctrlkit.io/v1alpha1" "Other", not a version of Gadget.test.ctrlkit.io this webhook converts (hub v1, spokes v1alpha1, v1beta1)`},
		{"an object that does not decode", groupV1, []string{gadgetJSON(groupV1alpha1, "x", `{"size":"big"}`)},
			"converting object 0 (ns/x) to test.ctrlkit.io/v1: decoding as *webhook_test.GadgetV1alpha1: json: cannot unmarshal string into Go struct field .spec.size of type int32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, result := convert(t, c, conversionBody(tc.to, tc.objects...))
			if result.Status != metav1.StatusFailure || result.Message != tc.want {
				t.Errorf("result %q %q,\nwant %q %q", result.Status, result.Message, metav1.StatusFailure, tc.want)
			}
			if len(got) != 0 {
				t.Errorf("a failed review returned objects: %s", got)
			}
		})
	}
}

func TestConversionHTTPErrors(t *testing.T) {
	c := newConversion(t)
	for _, tc := range []struct {
		name, ct    string
		body        []byte
		wantCode    int
		wantMessage string
	}{
		{"YAML", "application/yaml", conversionBody(groupV1), 415, `webhook: Content-Type "application/yaml" is not supported: send the ConversionReview as application/json`},
		{"malformed", "application/json", []byte(`[`), 400, "webhook: decoding the ConversionReview: unexpected end of JSON input"},
		{"an AdmissionReview", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`), 400,
			`webhook: the body is "admission.k8s.io/v1" "AdmissionReview", want apiextensions.k8s.io/v1 ConversionReview: list v1 first in the webhook configuration's review versions`},
		{"no request", "application/json", []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`), 400,
			"webhook: the ConversionReview has no request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(tc.body))
			r.Header.Set("Content-Type", tc.ct)
			w := httptest.NewRecorder()
			c.ServeHTTP(w, r)
			if got := strings.TrimSpace(w.Body.String()); w.Code != tc.wantCode || got != tc.wantMessage {
				t.Errorf("got %d %q,\nwant %d %q", w.Code, got, tc.wantCode, tc.wantMessage)
			}
		})
	}
}

func TestNewConversionErrors(t *testing.T) {
	s := newScheme()
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"nil scheme", func() error { _, err := webhook.NewConversion(nil, &Gadget{}, &GadgetV1alpha1{}); return err },
			"webhook: NewConversion: the scheme is nil: pass the scheme the versions are registered in"},
		{"nil hub", func() error { _, err := webhook.NewConversion(s, nil, &GadgetV1alpha1{}); return err },
			"webhook: NewConversion: the hub is nil: pass an object of the hub version's type, such as &v1.Widget{}"},
		{"no spokes", func() error { _, err := webhook.NewConversion(s, &Gadget{}); return err },
			"webhook: NewConversion: no spokes for hub *webhook_test.Gadget: pass an object of each other version's type"},
		{"hub not registered", func() error { _, err := webhook.NewConversion(s, &Unregistered{}, &GadgetV1alpha1{}); return err },
			"webhook: NewConversion: hub *webhook_test.Unregistered is not registered in the scheme: add it with its API package's AddToScheme (or scheme.AddKnownTypes) before building the webhook: "},
		{"spoke not registered", func() error { _, err := webhook.NewConversion(s, &Gadget{}, &Unregistered{}); return err },
			"webhook: NewConversion: spoke *webhook_test.Unregistered is not registered in the scheme: add it with its API package's AddToScheme (or scheme.AddKnownTypes) before building the webhook: "},
		{"spoke of another kind", func() error { _, err := webhook.NewConversion(s, &Gadget{}, &Other{}); return err },
			"webhook: NewConversion: spoke *webhook_test.Other is test.ctrlkit.io/v1 Other, not a version of the hub's Gadget.test.ctrlkit.io: build one Conversion for each kind"},
		{"a version twice", func() error {
			_, err := webhook.NewConversion(s, &Gadget{}, &GadgetV1alpha1{}, &GadgetV1alpha1{})
			return err
		}, "webhook: NewConversion: *webhook_test.GadgetV1alpha1 and *webhook_test.GadgetV1alpha1 are both version v1alpha1 of Gadget.test.ctrlkit.io: give each version once"},
		{"nil spoke", func() error { _, err := webhook.NewConversion(s, &Gadget{}, (*GadgetV1alpha1)(nil)); return err },
			"webhook: NewConversion: spoke 0 is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error = %v,\nwant one starting %q", err, tc.want)
			}
		})
	}
}

// assertJSONEqual compares two JSON documents by value.
func assertJSONEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("decoding %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("decoding %s: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("got  %s\nwant %s", gb, wb)
	}
}

var _ webhook.Convertible = &GadgetV1alpha1{}
var _ runtime.Object = &Gadget{}
