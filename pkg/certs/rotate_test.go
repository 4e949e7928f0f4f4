package certs_test

import (
	"bytes"
	"crypto/x509"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// step lets n Start loops finish their round, moves clk by d, and waits
// until they wait again.
func step(t testing.TB, clk *clocktesting.FakeClock, n int, d time.Duration) {
	t.Helper()
	eventually(t, func() bool { return clk.Waiters() == n }, "%d loops to wait", n)
	clk.Step(d)
	eventually(t, func() bool { return clk.Waiters() == n }, "%d loops to wait after a step of %v", n, d)
}

// A serving certificate due for renewal is replaced under the same CA; of
// two replicas that read the same Secret and both renew, one update wins
// and the other (409) re-reads and serves the winner's certificate.
func TestSharedRenewsServing(t *testing.T) {
	c := newCluster(t, validating("hooks", "a.example.com"))
	clk := clocktesting.NewFakeClock(time.Now())
	g := &gate{}
	logA, linesA := newLog(t)
	logB, linesB := newLog(t)
	opts := certs.SharedOptions{
		Clock:   clk,
		Serving: certs.Lifetime{Validity: time.Hour, RenewBefore: 20 * time.Minute},
		Inject:  certs.Targets{ValidatingWebhookConfigurations: []string{"hooks"}},
	}
	opts.Logger = logA
	a := newShared(t, c, g.wrap, opts)
	opts.Logger = logB
	b := newShared(t, c, g.wrap, opts)
	runStart(t, a.Start)
	runStart(t, b.Start)
	eventually(t, func() bool { return a.Ready() == nil && b.Ready() == nil }, "both replicas to be ready")
	before := secret(t, c)
	first := served(t, a.GetCertificate)

	step(t, clk, 2, 30*time.Minute) // not due: renewed with 20m of 60m left
	if n := len(secretWrites(c)); n != 1 {
		t.Fatalf("the Secret was written %d times by 30m of 60m, want once (created)", n)
	}
	writes := len(c.Writes())
	g.arm(2) // both replicas read the Secret before either renews it
	step(t, clk, 2, 15*time.Minute)
	eventually(t, func() bool {
		sa, sb := served(t, a.GetCertificate), served(t, b.GetCertificate)
		return !sa.Equal(first) && sa.Equal(sb)
	}, "both replicas to serve the same renewed certificate")

	var updated, conflicts, patches int
	for _, w := range c.Writes()[writes:] {
		switch {
		case w.Resource.Resource == "secrets" && w.Err == nil:
			updated++
		case w.Resource.Resource == "secrets" && apierrors.IsConflict(w.Err):
			conflicts++
		case w.Verb == "patch":
			patches++
		}
	}
	if updated != 1 || conflicts != 1 {
		t.Errorf("renewing: %d updates of the Secret and %d conflicts, want 1 and 1", updated, conflicts)
	}
	if patches != 0 {
		t.Errorf("renewing under the same CA patched the webhook configuration %d times, want none", patches)
	}
	after := secret(t, c)
	if !bytes.Equal(after.Data["ca.crt"], before.Data["ca.crt"]) || !bytes.Equal(after.Data["signer.crt"], before.Data["signer.crt"]) {
		t.Errorf("renewing the serving certificate changed the CA")
	}
	renewed := served(t, a.GetCertificate)
	if err := verify(renewed, before.Data["ca.crt"], "webhooks.operators.svc", clk.Now()); err != nil {
		t.Errorf("the renewed certificate does not verify against the unchanged CA: %v", err)
	}
	if n := linesA.count("renewed the serving certificate") + linesB.count("renewed the serving certificate"); n != 1 {
		t.Errorf("logged %d renewals, want 1", n)
	}
}

// A CA due for rotation is first added to every target's caBundle; only
// once every target has held it for PublishDelay does the serving
// certificate switch to it; the old CA stays in the bundle until it
// expires. At no time does a target lack the CA of a certificate a replica
// serves.
func TestSharedRotatesCA(t *testing.T) {
	c := newCluster(t,
		validating("validating", "one.example.com", "two.example.com"),
		mutating("mutating", "three.example.com"),
		webhookCRD("widgets.example.com"))
	clk := clocktesting.NewFakeClock(time.Now())
	start := clk.Now()
	logA, linesA := newLog(t)
	logB, linesB := newLog(t)
	opts := certs.SharedOptions{
		Clock:        clk,
		CA:           certs.Lifetime{Validity: 10 * time.Hour, RenewBefore: 3 * time.Hour},
		Serving:      certs.Lifetime{Validity: 2 * time.Hour, RenewBefore: 30 * time.Minute},
		PublishDelay: time.Minute,
		Inject: certs.Targets{
			ValidatingWebhookConfigurations: []string{"validating"},
			MutatingWebhookConfigurations:   []string{"mutating"},
			CRDs:                            []string{"widgets.example.com"},
		},
	}
	opts.Logger = logA
	a := newShared(t, c, nil, opts)
	opts.Logger = logB
	b := newShared(t, c, nil, opts)
	runStart(t, a.Start)
	runStart(t, b.Start)
	eventually(t, func() bool { return a.Ready() == nil && b.Ready() == nil }, "both replicas to be ready")
	oldCA := leaf(t, secret(t, c).Data["signer.crt"])

	// trusted checks that every caBundle of every target verifies what
	// both replicas serve now.
	trusted := func() {
		t.Helper()
		for _, bundle := range targetBundles(t, c) {
			for name, src := range map[string]*certs.Shared{"a": a, "b": b} {
				if err := verify(served(t, src.GetCertificate), bundle, "webhooks.operators.svc", clk.Now()); err != nil {
					t.Fatalf("at %v, a target's caBundle does not verify what replica %s serves: %v", clk.Since(start), name, err)
				}
			}
		}
	}
	// Twenty-minute steps while no new CA is in the Secret (it is due at
	// about 7h), ten-second steps while one is, until the serving
	// certificate switches to it.
	for leaf(t, secret(t, c).Data["signer.crt"]).Equal(oldCA) {
		if clk.Since(start) > 9*time.Hour {
			t.Fatalf("the serving certificate did not switch to a new CA by 9h")
		}
		d := 20 * time.Minute
		if secret(t, c).Data["next-signer.crt"] != nil {
			d = 10 * time.Second
		}
		step(t, clk, 2, d)
		trusted()
	}
	s := secret(t, c)
	newCA := leaf(t, s.Data["signer.crt"])
	if cas, _ := parsePEM(s.Data["ca.crt"]); len(cas) != 2 || !cas[0].Equal(oldCA) || !cas[1].Equal(newCA) {
		t.Errorf("after the switch ca.crt holds %d CAs, want the old and the new", len(cas))
	}
	checkRotationWrites(t, c.Writes(), opts.PublishDelay)
	eventually(t, func() bool {
		return served(t, a.GetCertificate).CheckSignatureFrom(newCA) == nil && served(t, b.GetCertificate).CheckSignatureFrom(newCA) == nil
	}, "both replicas to serve a certificate of the new CA")

	// Past the old CA's expiry it leaves the bundle.
	for clk.Since(start) < 10*time.Hour+10*time.Minute {
		step(t, clk, 2, 20*time.Minute)
		trusted()
	}
	if cas, _ := parsePEM(secret(t, c).Data["ca.crt"]); len(cas) != 1 || !cas[0].Equal(newCA) {
		t.Errorf("after the old CA expired ca.crt holds %d CAs, want the new one alone", len(cas))
	}
	eventually(t, func() bool {
		for _, bundle := range targetBundles(t, c) {
			if cas, _ := parsePEM(bundle); len(cas) != 1 {
				return false
			}
		}
		return true
	}, "every target's caBundle to drop the expired CA")
	checkRotationWrites(t, c.Writes(), opts.PublishDelay)
	for _, msg := range []string{"added a new CA to the bundle", "switched the serving certificate to the new CA", "removed expired CAs from the bundle"} {
		if n := linesA.count(msg) + linesB.count(msg); n != 1 {
			t.Errorf("%q was logged %d times, want once", msg, n)
		}
	}
}

// checkRotationWrites replays the fake's writes in order and checks that
// every write of the Secret stores a serving certificate whose CA every
// target already trusts (once all were injected), that every patch of a
// target keeps trusting the CA of the serving certificate stored, and that
// the serving certificate switched to a new CA no sooner than publishDelay
// after that CA was added.
func checkRotationWrites(t *testing.T, writes []fake.Request, publishDelay time.Duration) {
	t.Helper()
	bundles := map[string][][]byte{}
	var signer *x509.Certificate
	added := map[string]time.Time{} // new CA (by serial) → when it was added
	for i, w := range writes {
		if w.Err != nil || w.Object == nil {
			continue
		}
		if s, ok := w.Object.(*corev1.Secret); ok {
			st := decode(t, s)
			if next := st["next-signer.crt"]; next != nil {
				if _, ok := added[next.SerialNumber.String()]; !ok {
					added[next.SerialNumber.String()] = issued(next)
				}
			}
			if signer != nil && !st["signer.crt"].Equal(signer) {
				at, ok := added[st["signer.crt"].SerialNumber.String()]
				if !ok {
					t.Errorf("write %d: the serving certificate switched to a CA that was never added to the bundle first", i)
				} else if d := issued(st["tls.crt"]).Sub(at); d < publishDelay {
					t.Errorf("write %d: the serving certificate switched to the new CA %v after it was added, before PublishDelay (%v)", i, d, publishDelay)
				}
			}
			signer = st["signer.crt"]
			if len(bundles) == 3 {
				for name, bs := range bundles {
					for _, b := range bs {
						if !bundleTrusts(b, signer) {
							t.Errorf("write %d stores a serving certificate whose CA %s does not trust yet", i, name)
						}
					}
				}
			}
			continue
		}
		name, bs := objectBundles(w.Object)
		bundles[name] = bs
		for _, b := range bs {
			if signer != nil && !bundleTrusts(b, signer) {
				t.Errorf("write %d (patch of %s) drops the CA of the stored serving certificate", i, name)
			}
		}
	}
}

// issued is when a certificate the package made was issued: NotBefore is
// backdated by a tenth of the validity, at most 5m.
func issued(c *x509.Certificate) time.Time {
	validity := c.NotAfter.Sub(c.NotBefore) * 10 / 11
	return c.NotBefore.Add(min(validity/10, 5*time.Minute))
}

// decode parses every certificate key of a Secret's data.
func decode(t testing.TB, s *corev1.Secret) map[string]*x509.Certificate {
	out := map[string]*x509.Certificate{}
	for _, k := range []string{"tls.crt", "signer.crt", "next-signer.crt"} {
		if s.Data[k] != nil {
			out[k] = leaf(t, s.Data[k])
		}
	}
	return out
}

// bundleTrusts reports whether the PEM bundle holds ca.
func bundleTrusts(bundle []byte, ca *x509.Certificate) bool {
	cas, _ := parsePEM(bundle)
	for _, c := range cas {
		if c.Equal(ca) {
			return true
		}
	}
	return false
}

// objectBundles returns a target's name and caBundles.
func objectBundles(obj runtime.Object) (string, [][]byte) {
	var out [][]byte
	switch o := obj.(type) {
	case *admissionv1.ValidatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
		return "ValidatingWebhookConfiguration " + o.Name, out
	case *admissionv1.MutatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
		return "MutatingWebhookConfiguration " + o.Name, out
	case *crd:
		return "CRD " + o.Name, [][]byte{o.Spec.Conversion.Webhook.ClientConfig.CABundle}
	}
	return "", nil
}

// targetBundles returns every caBundle of the three targets of
// TestSharedRotatesCA as the fake stores them.
func targetBundles(t testing.TB, c *fake.Cluster) [][]byte {
	t.Helper()
	var out [][]byte
	for name, obj := range map[string]runtime.Object{
		"validating":          &admissionv1.ValidatingWebhookConfiguration{},
		"mutating":            &admissionv1.MutatingWebhookConfiguration{},
		"widgets.example.com": &crd{},
	} {
		if err := c.Get(types.NamespacedName{Name: name}, obj); err != nil {
			t.Fatal(err)
		}
		_, bs := objectBundles(obj)
		out = append(out, bs...)
	}
	return out
}
