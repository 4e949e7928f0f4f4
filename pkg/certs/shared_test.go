package certs_test

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	if want := map[string]string{certs.SharedLabel: certs.SharedLabelValue}; !maps.Equal(s.Labels, want) {
		t.Errorf("the Secret's labels are %v, want %v", s.Labels, want)
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

// A Secret with the source's label but without usable certificates (a
// placeholder from the manifests) is filled in, keeping its type and
// labels, with a serving certificate that does not outlive its CA; an
// expired CA is replaced.
func TestSharedReplacesUnusable(t *testing.T) {
	placeholder := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretName, Labels: map[string]string{
			certs.SharedLabel: certs.SharedLabelValue,
			"app":             "my-operator",
		}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"tls.crt": []byte("not a certificate")},
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
	if want := placeholder.Labels; !maps.Equal(s.Labels, want) {
		t.Errorf("after two updates the Secret's labels are %v, want %v", s.Labels, want)
	}
}

// foreignSecret returns a Secret of another application that happens to
// have the shared Secret's name: a certificate of its own, a password, and
// labels that do not mark it as the source's.
func foreignSecret(t testing.TB) *corev1.Secret {
	t.Helper()
	certPEM, keyPEM := pemPair(t, "billing.example.com")
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretName, Labels: map[string]string{
			"app.kubernetes.io/name":       "billing",
			"app.kubernetes.io/managed-by": "Helm",
		}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": certPEM, "password": []byte("hunter2")},
	}
}

// refusal is what Ready reports for the test's Secret when the source did
// not create it and may not take it.
const refusal = "certs: the Secret operators/webhook-cert was not made by this source: it lacks the label certs.ctrlkit.io/managed-by=shared and does not hold this source's certificates, so it is left untouched; " +
	"delete it, set SharedOptions.SecretName to another name, or, if it is meant for this operator, label it (its data is then replaced): " +
	"kubectl label secret --namespace operators webhook-cert certs.ctrlkit.io/managed-by=shared"

// A Secret the source did not create is never written, whatever it holds
// and whatever its labels say: Ready names it and says what to do, and the
// refusal is logged once, however many rounds retry it.
func TestSharedLeavesForeignSecret(t *testing.T) {
	c := newCluster(t, foreignSecret(t))
	before := secret(t, c)
	clk := clocktesting.NewFakeClock(time.Now())
	log, lines := newLog(t)
	s := newShared(t, c, nil, certs.SharedOptions{Clock: clk, Logger: log})
	runStart(t, s.Start)
	eventually(t, func() bool { err := s.Ready(); return err != nil && err.Error() == refusal }, "Ready to report %q", refusal)
	for range 3 {
		step(t, clk, 1, 10*time.Second) // CheckInterval: another round
	}
	if err := s.Ready(); err == nil || err.Error() != refusal {
		t.Errorf("Ready after more rounds: %v, want %q", err, refusal)
	}
	after := secret(t, c)
	if !reflect.DeepEqual(after.Data, before.Data) || !maps.Equal(after.Labels, before.Labels) || after.Type != before.Type {
		t.Errorf("the foreign Secret changed:\n  data %q, labels %v, type %s\nwant\n  data %q, labels %v, type %s",
			after.Data, after.Labels, after.Type, before.Data, before.Labels, before.Type)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the foreign Secret's resourceVersion changed from %s to %s", before.ResourceVersion, after.ResourceVersion)
	}
	for _, w := range c.Writes() {
		if w.Resource.Resource == "secrets" {
			t.Errorf("the source wrote the foreign Secret: %s (err %v)", w.Verb, w.Err)
		}
	}
	if _, err := s.GetCertificate(nil); err == nil {
		t.Error("GetCertificate serves a certificate, want none (the Secret is not the source's)")
	}
	if n := lines.count("kubectl label secret"); n != 1 {
		t.Errorf("the refusal was logged %d times over 4 rounds, want once", n)
	}
}

// Labelling a refused Secret, with the command its error gives, lets the
// running source take it without a restart: its data is replaced, its
// type and other labels are kept.
func TestSharedTakesForeignSecretOnceLabelled(t *testing.T) {
	c := newCluster(t, foreignSecret(t))
	log, lines := newLog(t)
	s := newShared(t, c, nil, certs.SharedOptions{Clock: clocktesting.NewFakeClock(time.Now()), Logger: log})
	runStart(t, s.Start)
	eventually(t, func() bool { err := s.Ready(); return err != nil && err.Error() == refusal }, "Ready to report %q", refusal)

	// What kubectl label does.
	kube, _ := clients(t, c, nil)
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, certs.SharedLabel, certs.SharedLabelValue)
	if _, err := kube.CoreV1().Secrets(namespace).Patch(t.Context(), secretName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling the Secret: %v", err)
	}
	// The fake clock never moves: the watch wakes the loop.
	eventually(t, func() bool { return s.Ready() == nil }, "the source to take the labelled Secret")
	got := secret(t, c)
	if err := verify(served(t, s.GetCertificate), got.Data["ca.crt"], "webhooks.operators.svc", time.Now()); err != nil {
		t.Errorf("the served certificate does not verify against the Secret's ca.crt: %v", err)
	}
	if _, ok := got.Data["password"]; ok || got.Data["signer.key"] == nil {
		t.Errorf("the Secret holds the keys %v, want the source's layout alone", slices.Sorted(maps.Keys(got.Data)))
	}
	if got.Labels["app.kubernetes.io/name"] != "billing" || got.Labels[certs.SharedLabel] != certs.SharedLabelValue || got.Type != corev1.SecretTypeTLS {
		t.Errorf("the Secret has labels %v and type %s, want its labels and type kept", got.Labels, got.Type)
	}
	if lines.count("replaced the Secret's unusable certificates") != 1 {
		t.Errorf("replacing the labelled Secret's data was not logged")
	}
}

// A Secret without the label's key that holds the source's whole,
// consistent layout, as a Secret an earlier ctrlkit made does, is labelled
// and used, its data unchanged, by one of two replicas that race to label
// it; one whose layout is incomplete or inconsistent, or whose label has
// another value, is refused.
func TestSharedAdoptsEarlierSecret(t *testing.T) {
	// The data of a Secret an earlier ctrlkit made.
	c0 := newCluster(t)
	s0 := newShared(t, c0, nil, certs.SharedOptions{Clock: clocktesting.NewFakeClock(time.Now())})
	stop := runStart(t, s0.Start)
	eventually(t, func() bool { return s0.Ready() == nil }, "the Secret to be made")
	stop()
	made := secret(t, c0).Data

	edit := func(f func(map[string][]byte)) map[string][]byte {
		d := maps.Clone(made)
		f(d)
		return d
	}
	const otherValue = `certs: the Secret operators/webhook-cert was not made by this source: its label certs.ctrlkit.io/managed-by is "someone-else", not "shared", so it is left untouched; ` +
		"delete it, set SharedOptions.SecretName to another name, or, if it is meant for this operator, label it (its data is then replaced): " +
		"kubectl label secret --namespace operators webhook-cert certs.ctrlkit.io/managed-by=shared --overwrite"
	for _, tt := range []struct {
		name    string
		labels  map[string]string
		data    map[string][]byte
		refused string // Ready's error; empty: adopted
	}{
		{"created by an earlier ctrlkit", map[string]string{"app.kubernetes.io/managed-by": "ctrlkit"}, made, ""},
		{"a placeholder an earlier ctrlkit filled in", nil, made, ""},
		{"no signer key", nil, edit(func(d map[string][]byte) { delete(d, "signer.key") }), refusal},
		{"a serving key that does not match", nil, edit(func(d map[string][]byte) { d["tls.key"] = d["signer.key"] }), refusal},
		{"a bundle without the signer", nil, edit(func(d map[string][]byte) { d["ca.crt"] = d["tls.crt"] }), refusal},
		{"the label with another value", map[string]string{certs.SharedLabel: "someone-else"}, made, otherValue},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretName, Labels: tt.labels},
				Type:       corev1.SecretTypeTLS,
				Data:       tt.data,
			})
			g := &gate{}
			g.arm(2) // both replicas read the unlabelled Secret before either labels it
			log, lines := newLog(t)
			a := newShared(t, c, g.wrap, certs.SharedOptions{Clock: clocktesting.NewFakeClock(time.Now()), Logger: log})
			b := newShared(t, c, g.wrap, certs.SharedOptions{Clock: clocktesting.NewFakeClock(time.Now()), Logger: log})
			runStart(t, a.Start)
			runStart(t, b.Start)
			if tt.refused != "" {
				eventually(t, func() bool {
					ea, eb := a.Ready(), b.Ready()
					return ea != nil && ea.Error() == tt.refused && eb != nil && eb.Error() == tt.refused
				}, "both replicas to report %q", tt.refused)
				if got := secret(t, c); !reflect.DeepEqual(got.Data, tt.data) || !maps.Equal(got.Labels, tt.labels) {
					t.Errorf("the refused Secret was changed: labels %v, want %v", got.Labels, tt.labels)
				}
				if n := len(secretWrites(c)); n != 0 {
					t.Errorf("the refused Secret was written %d times", n)
				}
				return
			}
			eventually(t, func() bool { return a.Ready() == nil && b.Ready() == nil }, "both replicas to be ready")
			got := secret(t, c)
			want := maps.Clone(tt.labels)
			if want == nil {
				want = map[string]string{}
			}
			want[certs.SharedLabel] = certs.SharedLabelValue
			if !maps.Equal(got.Labels, want) {
				t.Errorf("the adopted Secret's labels are %v, want %v", got.Labels, want)
			}
			if !reflect.DeepEqual(got.Data, made) {
				t.Error("adopting the Secret changed its data")
			}
			var conflicts int
			for _, w := range c.Writes() {
				if w.Resource.Resource == "secrets" && apierrors.IsConflict(w.Err) {
					conflicts++
				}
			}
			if n := len(secretWrites(c)); n != 1 || conflicts != 1 {
				t.Errorf("the Secret was written %d times and %d writes conflicted, want 1 and 1 (one replica labels it, the other re-reads)", n, conflicts)
			}
			for name, src := range map[string]*certs.Shared{"a": a, "b": b} {
				if !served(t, src.GetCertificate).Equal(leaf(t, made["tls.crt"])) {
					t.Errorf("replica %s does not serve the adopted Secret's certificate", name)
				}
			}
			if n := lines.count("labelled the Secret as this source's"); n != 1 {
				t.Errorf("adopting the Secret was logged %d times, want once", n)
			}
		})
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
