package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/ctrlkit/ctrlkit/internal/pprof"
	"github.com/ctrlkit/ctrlkit/internal/serve"
	"github.com/ctrlkit/ctrlkit/pkg/certs"
	"github.com/ctrlkit/ctrlkit/pkg/httpauth"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// DefaultSecureMetricsAddr is where secure metrics are served when
// SecureMetricsOptions.Addr is empty: kubebuilder's metrics port.
const DefaultSecureMetricsAddr = ":8443"

// SecureMetricsOptions serves /metrics over HTTPS to clients the cluster
// authenticates and authorizes (see Options.SecureMetrics). The zero value
// serves on DefaultSecureMetricsAddr with a self-signed certificate, over
// HTTP/1.1, without pprof.
//
// A client sends a bearer token (a ServiceAccount token, as Prometheus
// does); the manager has the API server review it (package httpauth) and
// answers 401 if it is not authenticated and 403 if its user may not get
// the path as a non-resource URL. Scraping needs a ClusterRole such as
//
//	rules:
//	- nonResourceURLs: ["/metrics"]
//	  verbs: ["get"]
//
// bound to the scraper's ServiceAccount, and the operator's own
// ServiceAccount needs create on tokenreviews.authentication.k8s.io and
// subjectaccessreviews.authorization.k8s.io. Reviews are cached (an
// allowed result for httpauth.DefaultAllowTTL, a refused one for
// httpauth.DefaultDenyTTL), go through a clientset of their own with its
// own rate limiter, and are bounded as httpauth.Options says: a request
// whose review is throttled gets 429, one whose review times out 503.
type SecureMetricsOptions struct {
	// Addr is where the HTTPS server listens, e.g. ":8443" or
	// "127.0.0.1:0". Empty means DefaultSecureMetricsAddr. It must differ
	// from Options.HTTPAddr.
	Addr string
	// Certificate is the server's certificate. Nil means a self-signed
	// certificate made in memory for localhost by New
	// (certs.NewSelfSigned): scrapers then skip verifying it (Prometheus:
	// tls_config.insecure_skip_verify), which still encrypts the traffic
	// and keeps the bearer token off the wire. To serve a certificate
	// mounted from a Secret (cert-manager), pass certs.NewFiles. Run
	// starts the source when the server starts and stops it when the
	// server stops: do not also Add it.
	Certificate CertificateSource
	// HTTP2 lets clients speak HTTP/2 to this server. Off by default, as
	// on every server the manager starts, against HTTP/2 rapid reset
	// (CVE-2023-44487) and stream floods: metrics and profiles gain
	// nothing from HTTP/2.
	HTTP2 bool
	// Pprof serves Go's profiles on this server, behind the same
	// authentication and authorization: /debug/pprof/ lists them,
	// /debug/pprof/{name} serves one (heap, goroutine, allocs, block,
	// mutex, threadcreate; ?debug=1 for text), /debug/pprof/profile a CPU
	// profile and /debug/pprof/trace an execution trace (?seconds=N, 30
	// and 1 by default). `go tool pprof` reads them. Access takes get on
	// nonResourceURLs "/debug/pprof/*". pprof is served nowhere else.
	Pprof bool
	// TLS, when set, edits the server's TLS configuration, as
	// webhook.Options.TLS does: to require TLS 1.3, or client
	// certificates for mutual TLS (the bearer token is still required).
	// New fails if it lowers MinVersion below TLS 1.2 or removes
	// GetCertificate.
	TLS func(*tls.Config)
}

// CertificateSource provides a TLS server's certificate and keeps it
// current; package certs's SelfSigned and Files are ones. GetCertificate
// is called on every TLS handshake, so it must be quick and safe for
// concurrent use. Start (see Runnable) runs for as long as the server
// serves, to renew or reload the certificate; it must return nil when its
// ctx is done. An error it returns before then stops Run with it.
type CertificateSource interface {
	Runnable
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// secureMetrics is the server Options.SecureMetrics configures.
type secureMetrics struct {
	opts  SecureMetricsOptions // Addr and Certificate filled in
	guard *httpauth.Guard
	tls   *tls.Config // cloned for each server
}

// validateSecureMetrics checks o.SecureMetrics and fills in its defaults,
// in a copy: the caller's struct is left alone.
func validateSecureMetrics(o *Options) []error {
	if o.SecureMetrics == nil {
		return nil
	}
	sm := *o.SecureMetrics
	o.SecureMetrics = &sm
	if sm.Addr == "" {
		sm.Addr = DefaultSecureMetricsAddr
	}
	if sm.Certificate != nil && isNilSource(sm.Certificate) {
		return []error{fmt.Errorf("manager: Options.SecureMetrics.Certificate is a nil %T: pass a certificate source, or leave it nil for a self-signed certificate", sm.Certificate)}
	}
	host, port, err := net.SplitHostPort(sm.Addr)
	if err != nil {
		return []error{fmt.Errorf("manager: Options.SecureMetrics.Addr is %q: use host:port such as \":8443\" or \"127.0.0.1:0\", or empty for %q", sm.Addr, DefaultSecureMetricsAddr)}
	}
	if o.HTTPAddr == "" || port == "0" {
		return nil
	}
	plainHost, plainPort, err := net.SplitHostPort(o.HTTPAddr)
	if err == nil && plainPort == port && (host == plainHost || anyHost(host) || anyHost(plainHost)) {
		return []error{fmt.Errorf("manager: Options.SecureMetrics.Addr %q and Options.HTTPAddr %q share a port: serve them apart, e.g. secure metrics on \":8443\" and health probes on \":8081\"", sm.Addr, o.HTTPAddr)}
	}
	return nil
}

// anyHost reports whether host, from a listen address, means every
// interface.
func anyHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// newSecureMetrics builds the guard and, unless opts names one, the
// self-signed certificate. The guard reviews tokens through a clientset of
// its own, built from cfg with a rate limiter of its own, so that a flood
// of tokens on the metrics port cannot spend the request budget the
// manager's other clients share. It is built from c.Config over
// c.HTTPClient (the manager's connections, closed when Run returns). opts
// has been validated.
func newSecureMetrics(opts SecureMetricsOptions, c informer.Clients) (*secureMetrics, error) {
	// Twice the guard's bound on reviews of unknown tokens, leaving room
	// for the renewals of known ones, which it does not count.
	const qps, burst = 2 * httpauth.DefaultReviewsPerSecond, 2 * httpauth.DefaultReviewBurst
	cfg := rest.CopyConfig(c.Config)
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	kube, err := kubernetes.NewForConfigAndClient(cfg, c.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("manager: Options.SecureMetrics: building the guard's clientset: %w", err)
	}
	guard, err := httpauth.New(httpauth.Options{Client: kube})
	if err != nil {
		return nil, fmt.Errorf("manager: Options.SecureMetrics: %w", err)
	}
	if opts.Certificate == nil {
		ss, err := certs.NewSelfSigned(certs.SelfSignedOptions{})
		if err != nil {
			return nil, fmt.Errorf("manager: Options.SecureMetrics: making a self-signed certificate: %w", err)
		}
		opts.Certificate = ss
	}
	tc, err := serve.TLSConfig(opts.Certificate.GetCertificate, opts.TLS)
	if err != nil {
		return nil, fmt.Errorf("manager: Options.SecureMetrics.TLS: %w", err)
	}
	return &secureMetrics{opts: opts, guard: guard, tls: tc}, nil
}

// SecureMetricsAddr is the address the secure metrics server listens on,
// or nil before Run has opened its listener (or without
// Options.SecureMetrics).
func (m *Manager) SecureMetricsAddr() net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.metricsAddr
}

// serveSecureMetrics listens on Options.SecureMetrics.Addr and serves
// /metrics (and pprof) over TLS to the requests the guard admits, and runs
// the certificate source, until the returned stop is called (see serveOn);
// stop returns the source's error. A source that fails before then ends
// Run's ctx through fail. ctx carries the manager's logger.
func (m *Manager) serveSecureMetrics(ctx context.Context, fail context.CancelCauseFunc) (stop func(abort bool) error, err error) {
	sm := m.metrics
	ln, err := net.Listen("tcp", sm.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("manager: listening on Options.SecureMetrics.Addr %q: %w", sm.opts.Addr, err)
	}
	m.mu.Lock()
	m.metricsAddr = ln.Addr()
	m.mu.Unlock()
	m.log.Info("Serving secure metrics", "addr", ln.Addr().String(), "pprof", sm.opts.Pprof, "http2", sm.opts.HTTP2)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{}))
	if sm.opts.Pprof {
		pprof.Handle(mux)
	}
	srv := m.newServer("secure-metrics", sm.guard.Wrap(mux), sm.opts.HTTP2)
	srv.TLSConfig = sm.tls.Clone()

	certCtx, stopCert := context.WithCancel(ctx)
	var certDone sync.WaitGroup
	var certErr error // set before certDone is done
	certDone.Go(func() {
		err := sm.opts.Certificate.Start(certCtx)
		if err == nil || certCtx.Err() != nil && errors.Is(err, context.Canceled) {
			return
		}
		certErr = fmt.Errorf("manager: the secure metrics server's certificate source: %w", err)
		fail(certErr)
	})
	stopServer := m.serveOn(srv, ln)
	return func(abort bool) error {
		stopServer(abort)
		stopCert()
		certDone.Wait()
		return certErr
	}, nil
}

// newServer returns a server for h, named name in the logs, with the
// manager's logger in its requests' contexts, bounded by
// Options.ServerLimits (see serve.NewServer).
func (m *Manager) newServer(name string, h http.Handler, http2 bool) *http.Server {
	srv := serve.NewServer(context.Background(), m.log.WithValues("server", name), h, http2)
	_ = m.opts.ServerLimits.Apply(srv) // validated by New
	return srv
}

// serveOn serves srv on ln (over TLS if srv.TLSConfig is set) until the
// returned stop is called; stop waits for the server to close: for
// requests in flight to finish (up to 5s, then they are cut off), or, if
// abort, not at all. A server that fails is logged.
func (m *Manager) serveOn(srv *http.Server, ln net.Listener) (stop func(abort bool)) {
	s := serve.Start(srv, ln)
	var logged sync.WaitGroup
	logged.Go(func() {
		if err := s.Err(); err != nil {
			m.log.Error(err, "HTTP server failed", "addr", ln.Addr().String())
		}
	})
	return func(abort bool) {
		drain := 5 * time.Second
		if abort {
			drain = 0
		}
		s.Stop(drain)
		logged.Wait()
	}
}
