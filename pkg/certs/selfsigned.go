package certs

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// SelfSignedOptions configure NewSelfSigned. The zero value is a
// certificate for localhost, valid for a year and renewed with four months
// left.
type SelfSignedOptions struct {
	// DNSNames and IPAddresses are the names the certificate is valid for.
	// If both are empty, it is valid for localhost, 127.0.0.1 and ::1.
	DNSNames    []string
	IPAddresses []net.IP
	// Lifetime of the certificate. Zero Validity means a year.
	Lifetime Lifetime
	// Logger receives a line for each renewal. Zero means the logger in
	// Start's ctx (logr.FromContext; a manager puts its own there), or
	// none.
	Logger logr.Logger
	// Clock tells the time. Nil means the real clock.
	Clock clock.WithTicker
}

// SelfSigned serves an in-memory self-signed certificate, for servers whose
// clients do not verify it against a CA they were given (a Prometheus
// scraping with insecure_skip_verify) or pin it (CABundle). The key never
// leaves the process; each replica has its own certificate.
//
// GetCertificate and CABundle are safe for concurrent use and never block.
type SelfSigned struct {
	hosts    hosts
	lifetime Lifetime
	log      logr.Logger
	clock    clock.WithTicker
	current  atomic.Pointer[keyPair]
}

// NewSelfSigned generates a self-signed certificate for opts' names, so
// GetCertificate serves it at once; Start renews it before it expires.
func NewSelfSigned(opts SelfSignedOptions) (*SelfSigned, error) {
	if len(opts.DNSNames) == 0 && len(opts.IPAddresses) == 0 {
		opts.DNSNames = []string{"localhost"}
		opts.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	h, err := newHosts("SelfSignedOptions", opts.DNSNames, opts.IPAddresses)
	if err != nil {
		return nil, err
	}
	lt := opts.Lifetime.withDefaults(365 * 24 * time.Hour)
	if err := lt.validate("SelfSignedOptions.Lifetime"); err != nil {
		return nil, err
	}
	s := &SelfSigned{hosts: h, lifetime: lt, log: opts.Logger, clock: opts.Clock}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	kp, err := newSelfSigned(h, s.clock.Now(), lt.Validity)
	if err != nil {
		return nil, err
	}
	s.current.Store(kp)
	return s, nil
}

// GetCertificate returns the current certificate; it fits
// tls.Config.GetCertificate.
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.current.Load().tlsCertificate(), nil
}

// CABundle returns the current certificate in PEM, for a client that pins
// it. It changes when the certificate is renewed.
func (s *SelfSigned) CABundle() []byte {
	return s.current.Load().certPEM
}

// Start renews the certificate in memory when it is due (Lifetime), until
// ctx is done; then it returns nil. Call it once. It runs on the caller's
// goroutine and starts none.
func (s *SelfSigned) Start(ctx context.Context) error {
	log := s.log
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx)
	}
	log = log.WithName("certs").WithValues("certificate", "self-signed")
	for {
		wait := s.lifetime.renewAt(s.current.Load().cert).Sub(s.clock.Now())
		if wait > 0 {
			if !sleep(ctx, s.clock, wait) {
				return nil
			}
			continue
		}
		kp, err := newSelfSigned(s.hosts, s.clock.Now(), s.lifetime.Validity)
		if err != nil { // only if crypto/rand fails; the old certificate is still valid
			log.Error(err, "renewing the certificate failed; retrying in a minute")
			if !sleep(ctx, s.clock, time.Minute) {
				return nil
			}
			continue
		}
		s.current.Store(kp)
		log.Info("renewed the certificate", "notAfter", kp.cert.NotAfter)
	}
}
