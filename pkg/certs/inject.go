package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// Targets name the cluster-scoped objects whose caBundle a Shared source
// keeps equal to its CA bundle.
type Targets struct {
	// ValidatingWebhookConfigurations and MutatingWebhookConfigurations
	// are injected into every webhook entry's clientConfig.caBundle.
	ValidatingWebhookConfigurations []string
	MutatingWebhookConfigurations   []string
	// CRDs (CustomResourceDefinition names, such as
	// "widgets.example.com") are injected into
	// spec.conversion.webhook.clientConfig.caBundle; their
	// spec.conversion.strategy must be Webhook.
	CRDs []string
}

// target is one object to inject.
type target struct {
	kind string // for messages
	gvr  schema.GroupVersionResource
	name string
}

func (t target) String() string { return t.kind + " " + t.name }

var (
	validatingGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	mutatingGVR   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// list returns the targets in t, checking their names.
func (t Targets) list() ([]target, error) {
	var out []target
	seen := map[target]bool{}
	for _, g := range []struct {
		field, kind string
		gvr         schema.GroupVersionResource
		names       []string
	}{
		{"ValidatingWebhookConfigurations", "ValidatingWebhookConfiguration", validatingGVR, t.ValidatingWebhookConfigurations},
		{"MutatingWebhookConfigurations", "MutatingWebhookConfiguration", mutatingGVR, t.MutatingWebhookConfigurations},
		{"CRDs", "CustomResourceDefinition", crdGVR, t.CRDs},
	} {
		for _, n := range g.names {
			tg := target{kind: g.kind, gvr: g.gvr, name: n}
			if n == "" {
				return nil, fmt.Errorf("certs: SharedOptions.Inject.%s holds an empty name: remove it", g.field)
			}
			if seen[tg] {
				return nil, fmt.Errorf("certs: SharedOptions.Inject.%s names %q twice: remove one", g.field, n)
			}
			seen[tg] = true
			out = append(out, tg)
		}
	}
	return out, nil
}

// observed is what a target's caBundles held when read.
type observed struct {
	resourceVersion string
	// bundles are the caBundles of the target, one per webhook entry (one
	// for a CRD), and paths their JSON pointers.
	bundles [][]byte
	paths   []string
	err     error // reading failed, or the object has no place for a caBundle
}

// has reports whether every caBundle of the target holds c.
func (o observed) has(c *x509.Certificate) bool {
	if o.err != nil {
		return false
	}
	for _, b := range o.bundles {
		if !bundleHas(b, c) {
			return false
		}
	}
	return true
}

// equals reports whether every caBundle of the target is bundle.
func (o observed) equals(bundle []byte) bool {
	for _, b := range o.bundles {
		if !bytes.Equal(b, bundle) {
			return false
		}
	}
	return true
}

// observe reads a target's caBundles.
func observe(ctx context.Context, dyn dynamic.Interface, t target) observed {
	u, err := dyn.Resource(t.gvr).Get(ctx, t.name, metav1.GetOptions{})
	if err != nil {
		return observed{err: fmt.Errorf("reading %s: %w", t, err)}
	}
	o := observed{resourceVersion: u.GetResourceVersion()}
	add := func(path string, clientConfig map[string]any) error {
		var b []byte
		if s, ok := clientConfig["caBundle"].(string); ok {
			if b, err = base64.StdEncoding.DecodeString(s); err != nil {
				return fmt.Errorf("%s: %s is not base64: %w", t, path, err)
			}
		}
		o.bundles, o.paths = append(o.bundles, b), append(o.paths, path)
		return nil
	}
	if t.gvr == crdGVR {
		strategy, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "strategy")
		cc, found, _ := unstructured.NestedMap(u.Object, "spec", "conversion", "webhook", "clientConfig")
		if strategy != "Webhook" || !found {
			return observed{err: fmt.Errorf("%s has no conversion webhook to inject a caBundle into (spec.conversion.strategy is %q): set the strategy to Webhook with a clientConfig, or remove the CRD from SharedOptions.Inject.CRDs", t, strategy)}
		}
		if err := add("/spec/conversion/webhook/clientConfig/caBundle", cc); err != nil {
			return observed{err: err}
		}
		return o
	}
	webhooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	for i, w := range webhooks {
		wm, _ := w.(map[string]any)
		cc, _ := wm["clientConfig"].(map[string]any)
		if err := add("/webhooks/"+strconv.Itoa(i)+"/clientConfig/caBundle", cc); err != nil {
			return observed{err: err}
		}
	}
	return o
}

// inject sets every caBundle of the target to bundle, with a JSON patch
// that carries the resourceVersion o was read at, so that it fails with a
// conflict if the target changed since.
func inject(ctx context.Context, dyn dynamic.Interface, t target, o observed, bundle []byte) error {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	var ops []op
	if o.resourceVersion != "" {
		ops = append(ops, op{Op: "replace", Path: "/metadata/resourceVersion", Value: o.resourceVersion})
	}
	for _, p := range o.paths {
		ops = append(ops, op{Op: "add", Path: p, Value: base64.StdEncoding.EncodeToString(bundle)})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(t.gvr).Patch(ctx, t.name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("injecting the caBundle into %s: %w", t, err)
	}
	return nil
}
