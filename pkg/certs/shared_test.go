package certs_test

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
)

// Two replicas that find no Secret both create one; the first create wins,
// the other gets AlreadyExists and serves what the winner wrote.
func TestSharedFirstWriterWins(t *testing.T) {
	c := newCluster(t)
	g := &gate{}
	g.arm(2) // both replicas read "no Secret" before either creates it
	clk := clocktesting.NewFakeClock(time.Now())
	logA, linesA := newLog(t)
	logB, linesB := newLog(t)
	a := newShared(t, c, g.wrap, certs.SharedOptions{Clock: clk, Logger: logA})
	b := newShared(t, c, g.wrap, certs.SharedOptions{Clock: clk, Logger: logB})
	if _, err := a.GetCertificate(nil); err == nil || !strings.Contains(err.Error(), "no serving certificate yet") {
		t.Errorf("GetCertificate before Start: %v, want an error saying there is no certificate yet", err)
	}
	runStart(t, a.Start)
	runStart(t, b.Start)
	eventually(t, func() bool { return a.Ready() == nil && b.Ready() == nil }, "both replicas to be ready")

	var creates, lost int
	for _, w := range c.Writes() {
		if w.Verb == "create" && w.Resource.Resource == "secrets" {
			creates++
			if apierrors.IsAlreadyExists(w.Err) {
				lost++
			}
		}
	}
	if creates != 2 || lost != 1 {
		t.Fatalf("%d creates of the Secret, %d refused as AlreadyExists; want 2 and 1 (the gate makes both replicas try)", creates, lost)
	}
	if n := len(secretWrites(c)); n != 1 {
		t.Errorf("the Secret was written %d times, want once (the loser must not overwrite the winner's CA)", n)
	}
	s := secret(t, c)
	stored := leaf(t, s.Data["tls.crt"])
	for name, src := range map[string]*certs.Shared{"a": a, "b": b} {
		if got := served(t, src.GetCertificate); !got.Equal(stored) {
			t.Errorf("replica %s serves serial %x, not the Secret's %x", name, got.SerialNumber, stored.SerialNumber)
		}
		if !bytes.Equal(src.CABundle(), s.Data["ca.crt"]) {
			t.Errorf("replica %s's CABundle is not the Secret's ca.crt", name)
		}
	}
	for _, host := range []string{"webhooks.operators.svc", "webhooks.operators.svc.cluster.local"} {
		if err := verify(stored, s.Data["ca.crt"], host, clk.Now()); err != nil {
			t.Errorf("the serving certificate does not verify for %s against ca.crt: %v", host, err)
		}
	}
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("the Secret's type is %q, want %q", s.Type, corev1.SecretTypeTLS)
	}
	if ca := leaf(t, s.Data["ca.crt"]); !ca.IsCA || ca.MaxPathLen != 0 || !ca.MaxPathLenZero {
		t.Errorf("the CA has IsCA %v, MaxPathLen %d (zero set: %v); want a CA of path length 0, which can sign no other CA", ca.IsCA, ca.MaxPathLen, ca.MaxPathLenZero)
	}
	if stored.IsCA {
		t.Error("the serving certificate is a CA")
	}
	if n := linesA.count("created a CA") + linesB.count("created a CA"); n != 1 {
		t.Errorf("%d replicas logged creating a CA, want 1", n)
	}
}

// A Secret that exists without usable certificates (a placeholder from the
// manifests) is filled in, keeping its type, with a serving certificate
// that does not outlive its CA; an expired CA is replaced.
func TestSharedReplacesUnusable(t *testing.T) {
	placeholder := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretName},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"tls.crt": []byte("not a certificate")},
	}
	c := newCluster(t, placeholder)
	clk := clocktesting.NewFakeClock(time.Now())
	log, lines := newLog(t)
	opts := certs.SharedOptions{
		Clock: clk, Logger: log,
		CA:      certs.Lifetime{Validity: 2 * time.Hour},
		Serving: certs.Lifetime{Validity: 3 * time.Hour}, // cut short to the CA's 2h
	}
	a := newShared(t, c, nil, opts)
	stop := runStart(t, a.Start)
	eventually(t, func() bool { return a.Ready() == nil }, "the replica to be ready")
	stop()
	s := secret(t, c)
	if s.Type != corev1.SecretTypeOpaque {
		t.Errorf("the Secret's type changed to %q; it is immutable and must be kept", s.Type)
	}
	if lines.count("replaced the Secret's unusable certificates (tls.crt or tls.key is missing)") != 1 {
		t.Errorf("replacing the placeholder was not logged")
	}
	firstCA := leaf(t, s.Data["signer.crt"])
	if got := leaf(t, s.Data["tls.crt"]).NotAfter; !got.Equal(firstCA.NotAfter) {
		t.Errorf("the serving certificate expires at %v, want the CA's expiry %v (it may not outlive its CA)", got, firstCA.NotAfter)
	}

	// The operator was down for longer than the CA's life.
	clk.Step(3 * time.Hour)
	b := newShared(t, c, nil, opts)
	runStart(t, b.Start)
	eventually(t, func() bool { return b.Ready() == nil }, "the replica to be ready")
	s = secret(t, c)
	if ca := leaf(t, s.Data["signer.crt"]); ca.Equal(firstCA) {
		t.Fatalf("the expired CA was kept")
	}
	if cas, _ := parsePEM(s.Data["ca.crt"]); len(cas) != 1 {
		t.Errorf("ca.crt holds %d CAs, want only the new one", len(cas))
	}
	if err := verify(served(t, b.GetCertificate), s.Data["ca.crt"], "webhooks.operators.svc", clk.Now()); err != nil {
		t.Errorf("the new serving certificate does not verify: %v", err)
	}
	if lines.count("the CA expired") != 1 {
		t.Errorf("replacing the expired CA was not logged")
	}
}

func TestSharedStartTwice(t *testing.T) {
	c := newCluster(t)
	s := newShared(t, c, nil, certs.SharedOptions{})
	runStart(t, s.Start)
	eventually(t, func() bool { return s.Ready() == nil }, "the first Start to load the certificate")
	if err := s.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "called twice") {
		t.Fatalf("a second Start: %v, want an error", err)
	}
}

func TestSharedInvalidOptions(t *testing.T) {
	kube := &kubernetes.Clientset{} // never called: options are checked first
	valid := func(o certs.SharedOptions) certs.SharedOptions {
		o.Namespace, o.SecretName = namespace, secretName
		return o
	}
	for _, tt := range []struct {
		name string
		opts certs.SharedOptions
		want string
	}{
		{"no namespace", certs.SharedOptions{SecretName: "s", ServiceName: "w"}, "certs: SharedOptions.Namespace is required"},
		{"no secret", certs.SharedOptions{Namespace: "ns", ServiceName: "w"}, "certs: SharedOptions.SecretName is required"},
		{"bad secret", certs.SharedOptions{Namespace: "ns", SecretName: "Bad_Name", ServiceName: "w"}, `certs: SharedOptions.SecretName "Bad_Name" is not a valid Secret name`},
		{"no names", valid(certs.SharedOptions{}), "certs: SharedOptions needs ServiceName, DNSNames or IPAddresses"},
		{"bad service", valid(certs.SharedOptions{ServiceName: "web.hooks"}), `certs: SharedOptions.ServiceName "web.hooks" is not a valid Service name`},
		{"bad IP", valid(certs.SharedOptions{IPAddresses: []net.IP{{1, 2}}}), "certs: SharedOptions.IPAddresses"},
		{"no dynamic", valid(certs.SharedOptions{ServiceName: "w", Inject: certs.Targets{CRDs: []string{"widgets.example.com"}}}), "certs: NewShared needs a dynamic client"},
		{"twice", valid(certs.SharedOptions{ServiceName: "w", Inject: certs.Targets{ValidatingWebhookConfigurations: []string{"a", "a"}}}), `certs: SharedOptions.Inject.ValidatingWebhookConfigurations names "a" twice`},
		{"serving renew", valid(certs.SharedOptions{ServiceName: "w", Serving: certs.Lifetime{Validity: time.Hour, RenewBefore: time.Hour}}), "certs: SharedOptions.Serving.RenewBefore (1h0m0s) must be positive and less than SharedOptions.Serving.Validity (1h0m0s)"},
		{"CA too short for the switch", valid(certs.SharedOptions{ServiceName: "w", CA: certs.Lifetime{Validity: time.Minute}}), "certs: SharedOptions.CA.RenewBefore (20s) must exceed PublishDelay + CheckInterval (1m10s)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := certs.NewShared(kube, nil, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewShared: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
