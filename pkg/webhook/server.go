package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	pathpkg "path"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlkit/ctrlkit/internal/serve"
)

// DefaultAddr is where a Server listens when Options.Addr is empty: the
// port kubebuilder's projects give their webhook Service.
const DefaultAddr = ":9443"

// The defaults of Limits.
const (
	// DefaultReadTimeout bounds the time to read a request, its body
	// included: the API server calls a webhook with a timeout of at most
	// 30 seconds.
	DefaultReadTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a kept-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 90 * time.Second
	// DefaultMaxHeaderBytes bounds a request's header.
	DefaultMaxHeaderBytes = 1 << 20
	// DefaultMaxBodyBytes bounds a request's body. It is the bound of a
	// ConversionReview, which carries every object of a list the API
	// server converts; an AdmissionReview is bounded lower still (7 MiB:
	// two objects of the API server's 3 MiB at most, and its fields).
	DefaultMaxBodyBytes = 64 << 20
)

// drainTimeout bounds how long Start waits for requests in flight once its
// ctx is done: the API server's default webhook timeout (timeoutSeconds).
const drainTimeout = 10 * time.Second

// Options configures a Server.
type Options struct {
	// Addr is the host:port the server listens on, such as ":9443" or
	// "127.0.0.1:0". Empty means DefaultAddr.
	Addr string
	// GetCertificate returns the serving certificate for a TLS handshake,
	// as tls.Config.GetCertificate: a certificate source's method, which
	// may change the certificate it returns at any time (rotation takes
	// effect at the next handshake). Required.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// HTTP2 lets clients negotiate HTTP/2. It is off by default:
	// HTTP/2's stream reset lets a client make a server start and abandon
	// requests faster than it can refuse them (the "rapid reset" attack,
	// CVE-2023-44487), and the API server calls webhooks over HTTP/1.1
	// just as well.
	HTTP2 bool
	// Limits bound the requests and connections.
	Limits Limits
	// TLS, when set, edits the server's TLS configuration (TLS 1.2 or
	// later, GetCertificate) once, in NewServer: to require TLS 1.3
	// (MinVersion), or client certificates signed by a CA of yours
	// (ClientCAs, ClientAuth: tls.RequireAndVerifyClientCert) for mutual
	// TLS. NewServer fails if it lowers MinVersion below TLS 1.2 or
	// removes GetCertificate.
	TLS func(*tls.Config)
	// Registry receives the metrics (see the package doc). Nil means they
	// are not registered.
	Registry prometheus.Registerer
	// Logger receives the server's logs and is given to the handlers in
	// their request's context (logr.FromContextOrDiscard), with the key
	// webhook naming the path. The zero value discards logs.
	Logger logr.Logger
}

// Limits bound what a client of a server may make it hold. A zero field
// means its default; a header must also arrive within 10 seconds.
type Limits struct {
	// ReadTimeout bounds the time to read a request, body included: a
	// client that sends it slower has its connection closed. 0 means
	// DefaultReadTimeout.
	ReadTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request. 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header. 0 means
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int64
	// MaxBodyBytes bounds a request's body: a larger one is answered 413
	// Request Entity Too Large. 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// withDefaults returns l with its zero fields set to their defaults, or
// an error naming a negative one; field prefixes the names.
func (l Limits) withDefaults(field string) (Limits, error) {
	for _, f := range []struct {
		name string
		v    *int64
		def  int64
	}{
		{"ReadTimeout", (*int64)(&l.ReadTimeout), int64(DefaultReadTimeout)},
		{"IdleTimeout", (*int64)(&l.IdleTimeout), int64(DefaultIdleTimeout)},
		{"MaxHeaderBytes", &l.MaxHeaderBytes, DefaultMaxHeaderBytes},
		{"MaxBodyBytes", &l.MaxBodyBytes, DefaultMaxBodyBytes},
	} {
		switch {
		case *f.v < 0:
			return l, fmt.Errorf("%s.%s is negative: use 0 for the default, or a positive limit", field, f.name)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	return l, nil
}

// Apply sets srv's timeouts and header limit from l (its zero fields as
// their defaults); a handler bounds the body with http.MaxBytesReader and
// l.MaxBodyBytes. It is for the other servers of a process that serves
// webhooks, such as a manager's probes and metrics, to bound them alike.
// It returns an error if a field is negative.
func (l Limits) Apply(srv *http.Server) error {
	l, err := l.withDefaults("webhook: Limits")
	if err != nil {
		return err
	}
	srv.ReadHeaderTimeout = 10 * time.Second
	srv.ReadTimeout, srv.IdleTimeout, srv.MaxHeaderBytes = l.ReadTimeout, l.IdleTimeout, int(l.MaxHeaderBytes)
	return nil
}

// Server serves webhooks over HTTPS (TLS 1.2 or later), each at the path
// it is registered at. Build it with NewServer, Register handlers, and
// Start it.
//
// Goroutines: Start runs the HTTP server's accept loop and, through
// net/http, a goroutine per connection, and returns once they have ended.
// Handlers run on those goroutines, concurrently. Register and the other
// methods are safe for concurrent use, also while Start runs.
type Server struct {
	opts    Options
	log     logr.Logger
	metrics *metrics
	tls     *tls.Config // cloned for each Start

	mu       sync.RWMutex
	handlers map[string]http.Handler
	started  bool
	addr     net.Addr // once listening
	stopping bool     // Start's ctx is done
}

// NewServer validates opts and returns a Server that is not listening yet.
// It fails if Options.Addr is not host:port, Options.GetCertificate is
// nil, or the metrics cannot be registered.
func NewServer(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return nil, fmt.Errorf("webhook: Options.Addr is %q: use host:port such as %q or \"127.0.0.1:0\"", opts.Addr, DefaultAddr)
	}
	if opts.GetCertificate == nil {
		return nil, errors.New("webhook: Options.GetCertificate is nil: pass a certificate source's GetCertificate, which the TLS handshake asks for the serving certificate")
	}
	var err error
	if opts.Limits, err = opts.Limits.withDefaults("webhook: Options.Limits"); err != nil {
		return nil, err
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	tc, err := serve.TLSConfig(opts.GetCertificate, opts.TLS)
	if err != nil {
		return nil, fmt.Errorf("webhook: Options.TLS: %w", err)
	}
	s := &Server{opts: opts, log: opts.Logger, metrics: newMetrics(), tls: tc, handlers: make(map[string]http.Handler)}
	if opts.Registry != nil {
		for _, c := range s.metrics.collectors() {
			if err := opts.Registry.Register(c); err != nil {
				return nil, fmt.Errorf("webhook: registering the controller_runtime_webhook_* metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Register serves h at path, which must be a clean absolute URL path such
// as "/validate-widgets", the path of the webhook configuration's
// clientConfig. Requests to a path nothing is registered at get 404.
// Register may be called before or while Start runs: h is served from the
// moment Register returns. A path can be registered once; there is no
// unregistering.
func (s *Server) Register(path string, h http.Handler) error {
	if s == nil {
		return fmt.Errorf("webhook: registering %q on a nil Server: set manager.Options.Webhook, or build one with NewServer", path)
	}
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("webhook: path %q does not start with \"/\": register the path of the webhook configuration's clientConfig, such as \"/validate-widgets\"", path)
	}
	if clean := pathpkg.Clean(path); clean != path || strings.ContainsAny(path, "?#") {
		return fmt.Errorf("webhook: path %q is not a clean URL path: use one such as %q, without a query or a trailing \"/\"", path, strings.TrimRight(strings.Split(clean, "?")[0], "/"))
	}
	if isNil(h) {
		return fmt.Errorf("webhook: registering %q: the handler is nil", path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.handlers[path]; ok {
		return fmt.Errorf("webhook: path %q is registered twice: give each webhook a path of its own", path)
	}
	log := s.log.WithValues("webhook", path)
	inner := s.metrics.instrument(path, h)
	s.handlers[path] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r.WithContext(withMetrics(logr.NewContext(r.Context(), log), s.metrics)))
	})
	return nil
}

// Start listens on Options.Addr and serves until ctx is done. Then it
// stops accepting connections, waits up to 10 seconds (the API server's
// default webhook timeout) for requests in flight, closes the connections
// left, and returns nil. It returns an error at once if it cannot listen,
// and if serving fails. A Server starts once.
//
// A handler still running when Start returns (one that ignores its
// request's ctx past the 10 seconds) is left running.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("webhook: Start called twice: a Server starts once")
	}
	s.started = true
	s.mu.Unlock()

	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("webhook: listening on %q: %w", s.opts.Addr, err)
	}
	srv := serve.NewServer(ctx, s.log, http.HandlerFunc(s.serve), s.opts.HTTP2)
	srv.TLSConfig = s.tls.Clone()
	_ = s.opts.Limits.Apply(srv) // validated by NewServer
	s.mu.Lock()
	s.addr = ln.Addr()
	s.mu.Unlock()
	s.log.Info("Serving webhooks", "addr", ln.Addr().String(), "http2", s.opts.HTTP2)

	serving := serve.Start(srv, ln)
	select {
	case <-serving.Done():
		s.setStopping()
		return fmt.Errorf("webhook: serving on %s: %w", ln.Addr(), serving.Err())
	case <-ctx.Done():
	}
	s.setStopping()
	if serving.Stop(drainTimeout) {
		s.log.Info("Webhook requests still in flight after the drain timeout; closed their connections", "timeout", drainTimeout)
	}
	s.log.Info("Stopped serving webhooks")
	return nil
}

func (s *Server) setStopping() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
}

// serve routes a request to the handler registered at its exact path.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	h := s.handlers[r.URL.Path]
	s.mu.RUnlock()
	if h == nil {
		http.Error(w, fmt.Sprintf("webhook: no webhook is registered at %q", r.URL.Path), http.StatusNotFound)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.Limits.MaxBodyBytes)
	h.ServeHTTP(w, r)
}

// Ready returns nil once Start is listening and a serving certificate is
// available (Options.GetCertificate returns one for a client that sends no
// server name, as the API server calling https://<IP> does), until Start's
// ctx is done. Otherwise it says what is missing. A manager's /readyz
// serves it.
func (s *Server) Ready() error {
	if s == nil {
		return errors.New("webhook: nil Server")
	}
	s.mu.RLock()
	addr, stopping := s.addr, s.stopping
	s.mu.RUnlock()
	switch {
	case stopping:
		return errors.New("webhook: the server is stopping")
	case addr == nil:
		return errors.New("webhook: the server is not listening yet")
	}
	cert, err := s.opts.GetCertificate(&tls.ClientHelloInfo{})
	switch {
	case err != nil:
		return fmt.Errorf("webhook: no serving certificate yet: %w", err)
	case cert == nil:
		return errors.New("webhook: no serving certificate yet")
	}
	return nil
}

// Addr is the address Start listens on, or nil before it listens.
func (s *Server) Addr() net.Addr {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.addr
}
