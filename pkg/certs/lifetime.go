package certs

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
)

// Lifetime says how long a new certificate is valid and when it is
// replaced. The zero value of each field means its documented default.
type Lifetime struct {
	// Validity is how long a new certificate is valid, at least a second.
	// The default depends on the certificate (a year for serving
	// certificates, ten years for CAs).
	Validity time.Duration
	// RenewBefore is how long before it expires a certificate is replaced;
	// it must be less than Validity. Zero means Validity/3: a certificate
	// is replaced once two thirds of its life have passed. A certificate
	// whose life was cut short (a serving certificate is never valid
	// beyond the CA that signed it) is replaced at the same fraction of
	// its life.
	RenewBefore time.Duration
}

// MaxValidity bounds a Lifetime's Validity: a certificate valid longer
// outlives any plan to rotate its key.
const MaxValidity = 10 * 365 * 24 * time.Hour

// withDefaults returns l with a zero Validity replaced by validity and a
// zero RenewBefore by Validity/3.
func (l Lifetime) withDefaults(validity time.Duration) Lifetime {
	if l.Validity == 0 {
		l.Validity = validity
	}
	if l.RenewBefore == 0 {
		l.RenewBefore = l.Validity / 3
	}
	return l
}

// validate checks l (after withDefaults); field names it in errors.
func (l Lifetime) validate(field string) error {
	if l.Validity > MaxValidity {
		return fmt.Errorf("certs: %s.Validity (%v) is more than MaxValidity (10 years): lower it, or leave it zero for the default", field, l.Validity)
	}
	if l.Validity < time.Second {
		return fmt.Errorf("certs: %s.Validity (%v) must be at least 1s (certificates count whole seconds): raise it, or leave it zero for the default", field, l.Validity)
	}
	if l.RenewBefore < 0 || l.RenewBefore >= l.Validity {
		return fmt.Errorf("certs: %s.RenewBefore (%v) must be positive and less than %s.Validity (%v): lower it, or leave it zero to renew with a third of the validity left", field, l.RenewBefore, field, l.Validity)
	}
	return nil
}

// renewAt is when c is due for replacement under l: when the same fraction
// of its life has passed as (Validity-RenewBefore)/Validity.
func (l Lifetime) renewAt(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	keep := time.Duration(float64(life) * (float64(l.RenewBefore) / float64(l.Validity)))
	return c.NotAfter.Add(-keep)
}

// newHosts validates DNS names and IP addresses for a serving certificate;
// field names the options struct in errors.
func newHosts(field string, dnsNames []string, ips []net.IP) (hosts, error) {
	var h hosts
	for _, n := range dnsNames {
		name := strings.TrimPrefix(n, "*.")
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return hosts{}, fmt.Errorf("certs: %s.DNSNames: %q is not a DNS name: %s", field, n, strings.Join(errs, "; "))
		}
		h.dnsNames = append(h.dnsNames, n)
	}
	for _, ip := range ips {
		if ip.To16() == nil {
			return hosts{}, fmt.Errorf("certs: %s.IPAddresses: %q is not an IP address", field, ip)
		}
		h.ips = append(h.ips, ip)
	}
	return h, nil
}

// sleep waits for d on clk; it returns false if ctx is done first.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
