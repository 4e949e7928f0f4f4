package certs_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
)

// Every webhook entry of the named configurations and the CRD's conversion
// webhook get the CA bundle; a caBundle someone overwrites, and a webhook
// entry added later, get it back within CheckInterval; other objects are
// left alone.
func TestSharedInjects(t *testing.T) {
	c := newCluster(t,
		validating("validating", "one.example.com", "two.example.com"),
		mutating("mutating", "three.example.com"),
		webhookCRD("widgets.example.com"),
		validating("someone-elses", "four.example.com"))
	clk := clocktesting.NewFakeClock(time.Now())
	s := newShared(t, c, nil, certs.SharedOptions{
		Clock: clk,
		Inject: certs.Targets{
			ValidatingWebhookConfigurations: []string{"validating"},
			MutatingWebhookConfigurations:   []string{"mutating"},
			CRDs:                            []string{"widgets.example.com"},
		},
	})
	runStart(t, s.Start)
	eventually(t, func() bool { return s.Ready() == nil }, "the replica to be ready")
	bundle := s.CABundle()
	if len(bundle) == 0 {
		t.Fatal("CABundle is empty once ready")
	}
	bundles := targetBundles(t, c)
	if len(bundles) != 4 {
		t.Fatalf("%d caBundles in the targets, want 4 (two validating webhooks, one mutating, one CRD)", len(bundles))
	}
	for i, b := range bundles {
		if !bytes.Equal(b, bundle) {
			t.Errorf("caBundle %d is %q, want CABundle()", i, b)
		}
	}
	var other admissionv1.ValidatingWebhookConfiguration
	if err := c.Get(types.NamespacedName{Name: "someone-elses"}, &other); err != nil {
		t.Fatal(err)
	}
	if other.Webhooks[0].ClientConfig.CABundle != nil {
		t.Errorf("a configuration not named in Inject got a caBundle")
	}

	// kubectl apply of the manifests: the caBundle of one entry is
	// replaced, and a third entry without one appears.
	foreign, _ := pemPair(t, "someone.example.com")
	reapplied := validating("validating", "one.example.com", "two.example.com", "five.example.com")
	reapplied.Webhooks[1].ClientConfig.CABundle = foreign
	patch, err := json.Marshal(map[string]any{"webhooks": reapplied.Webhooks})
	if err != nil {
		t.Fatal(err)
	}
	kube, _ := clients(t, c, nil)
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(t.Context(), "validating", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	step(t, clk, 1, 10*time.Second) // CheckInterval
	eventually(t, func() bool {
		var v admissionv1.ValidatingWebhookConfiguration
		if err := c.Get(types.NamespacedName{Name: "validating"}, &v); err != nil {
			t.Fatal(err)
		}
		for _, w := range v.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
				return false
			}
		}
		return len(v.Webhooks) == 3
	}, "the overwritten caBundle and the new entry to be injected")
	if s.Ready() != nil {
		t.Errorf("Ready after restoring the caBundle: %v", s.Ready())
	}
}

// A target that is missing, or a CRD without a conversion webhook, makes
// Ready say so (and is logged once), while the certificate is served; once
// they are fixed, the replica becomes ready.
func TestSharedTargetProblems(t *testing.T) {
	noWebhook := webhookCRD("widgets.example.com")
	noWebhook.Spec.Conversion = &crdConversion{Strategy: "None"}
	c := newCluster(t, noWebhook)
	clk := clocktesting.NewFakeClock(time.Now())
	log, lines := newLog(t)
	s := newShared(t, c, nil, certs.SharedOptions{
		Clock:  clk,
		Logger: log,
		Inject: certs.Targets{
			MutatingWebhookConfigurations: []string{"mutating"},
			CRDs:                          []string{"widgets.example.com"},
		},
	})
	runStart(t, s.Start)
	eventually(t, func() bool {
		return s.Ready() != nil && strings.Contains(s.Ready().Error(), "has no conversion webhook")
	}, "Ready to report the problems")
	err := s.Ready()
	for _, want := range []string{
		`reading MutatingWebhookConfiguration mutating: mutatingwebhookconfigurations.admissionregistration.k8s.io "mutating" not found`,
		`CustomResourceDefinition widgets.example.com has no conversion webhook to inject a caBundle into (spec.conversion.strategy is "None"): set the strategy to Webhook with a clientConfig, or remove the CRD from SharedOptions.Inject.CRDs`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Ready: %v\nwant it to contain %q", err, want)
		}
	}
	if _, err := s.GetCertificate(nil); err != nil {
		t.Errorf("GetCertificate while targets are missing: %v", err)
	}
	step(t, clk, 1, 10*time.Second)
	if n := lines.count("not found"); n != 1 {
		t.Errorf("the missing target was logged %d times over two rounds, want once", n)
	}

	kube, dyn := clients(t, c, nil)
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(), mutating("mutating", "one.example.com"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fixed, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": webhookCRD("").Spec.Conversion}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crdGV.WithResource("customresourcedefinitions")).Patch(t.Context(), "widgets.example.com", types.MergePatchType, fixed, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	step(t, clk, 1, 10*time.Second)
	eventually(t, func() bool { return s.Ready() == nil }, "the replica to be ready once the targets are fixed")
	var got crd
	if err := c.Get(types.NamespacedName{Name: "widgets.example.com"}, &got); err != nil {
		t.Fatal(err)
	}
	if b := got.Spec.Conversion.Webhook.ClientConfig.CABundle; !bytes.Equal(b, s.CABundle()) {
		t.Errorf("the CRD's caBundle is %s, want CABundle()", base64.StdEncoding.EncodeToString(b))
	}
}
