package certs_test

import (
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
)

func TestSelfSignedDefaults(t *testing.T) {
	now := time.Now()
	s, err := certs.NewSelfSigned(certs.SelfSignedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaf := served(t, s.GetCertificate)
	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		if err := verify(leaf, s.CABundle(), host, now); err != nil {
			t.Errorf("the certificate does not verify for %s: %v", host, err)
		}
	}
	if err := verify(leaf, s.CABundle(), "example.com", now); err == nil {
		t.Error("the certificate verifies for example.com, which it was not made for")
	}
	if got, want := leaf.NotAfter.Sub(now), 365*24*time.Hour; got < want-time.Minute || got > want+time.Minute {
		t.Errorf("the certificate is valid for %v from now, want %v", got, want)
	}
}

func TestSelfSignedRenews(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	log, lines := newLog(t)
	s, err := certs.NewSelfSigned(certs.SelfSignedOptions{
		DNSNames:    []string{"metrics.operators.svc"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.1")},
		Lifetime:    certs.Lifetime{Validity: time.Hour, RenewBefore: 15 * time.Minute},
		Logger:      log,
		Clock:       clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	first := served(t, s.GetCertificate)
	runStart(t, s.Start)

	eventually(t, clk.HasWaiters, "Start to wait for the renewal")
	clk.Step(40 * time.Minute) // not due yet: renewed with 15m of 60m left
	eventually(t, clk.HasWaiters, "Start to wait again")
	if got := served(t, s.GetCertificate); !got.Equal(first) {
		t.Fatalf("the certificate was replaced at 40m of 60m")
	}
	clk.Step(6 * time.Minute)
	eventually(t, func() bool { return !served(t, s.GetCertificate).Equal(first) }, "the certificate to be renewed")
	second := served(t, s.GetCertificate)
	if err := verify(second, s.CABundle(), "metrics.operators.svc", clk.Now()); err != nil {
		t.Errorf("the renewed certificate does not verify: %v", err)
	}
	if err := verify(second, s.CABundle(), "10.0.0.1", clk.Now()); err != nil {
		t.Errorf("the renewed certificate does not verify for its IP: %v", err)
	}
	if !second.NotAfter.After(first.NotAfter) {
		t.Errorf("the renewed certificate expires at %v, not after the first's %v", second.NotAfter, first.NotAfter)
	}
	if n := lines.count("renewed the certificate"); n != 1 {
		t.Errorf("logged %d renewals, want 1", n)
	}
}

func TestSelfSignedInvalidOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts certs.SelfSignedOptions
		want string
	}{
		{"bad name", certs.SelfSignedOptions{DNSNames: []string{"not a name"}}, `certs: SelfSignedOptions.DNSNames: "not a name" is not a DNS name`},
		{"renew after expiry", certs.SelfSignedOptions{Lifetime: certs.Lifetime{Validity: time.Hour, RenewBefore: 2 * time.Hour}},
			"certs: SelfSignedOptions.Lifetime.RenewBefore (2h0m0s) must be positive and less than SelfSignedOptions.Lifetime.Validity (1h0m0s)"},
		{"too short", certs.SelfSignedOptions{Lifetime: certs.Lifetime{Validity: time.Millisecond}},
			"certs: SelfSignedOptions.Lifetime.Validity (1ms) must be at least 1s"},
		{"290 years", certs.SelfSignedOptions{Lifetime: certs.Lifetime{Validity: 290 * 365 * 24 * time.Hour}},
			"certs: SelfSignedOptions.Lifetime.Validity (2540400h0m0s) is more than MaxValidity"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := certs.NewSelfSigned(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewSelfSigned: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestSelfSignedIsNotACA: the self-signed serving certificate signs
// nothing: it is not a CA (it was, and could have signed a certificate for
// any name that its clients would then trust), yet it still verifies with
// itself as the root.
func TestSelfSignedIsNotACA(t *testing.T) {
	s, err := certs.NewSelfSigned(certs.SelfSignedOptions{DNSNames: []string{"metrics.operators.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	leaf := served(t, s.GetCertificate)
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Errorf("the self-signed certificate is a CA (IsCA %v, key usage %v), want a leaf", leaf.IsCA, leaf.KeyUsage)
	}
	if err := verify(leaf, s.CABundle(), "metrics.operators.svc", time.Now()); err != nil {
		t.Errorf("the self-signed certificate does not verify against itself: %v", err)
	}
}
