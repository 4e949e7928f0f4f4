package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// waitTimeout bounds every wait on a condition; tests that pass finish far
// sooner.
const waitTimeout = 10 * time.Second

// startServer builds a Server on 127.0.0.1:0 with opts, starts it, waits
// until it is Ready, and stops it when the test ends. stop stops it at
// once and returns Start's result.
func startServer(t *testing.T, opts webhook.Options) (s *webhook.Server, stop func() error) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	s, err := webhook.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	stopped := false
	stop = func() error {
		cancel()
		if stopped {
			return nil
		}
		stopped = true
		select {
		case err := <-done:
			return err
		case <-time.After(waitTimeout):
			t.Fatal("Start did not return after its ctx was cancelled")
			return nil
		}
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
	waitFor(t, func() bool { return s.Ready() == nil }, "the server to be ready")
	return s, stop
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		<-tick.C
	}
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.URL.Path) })

func get(t *testing.T, c *http.Client, s *webhook.Server, path string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get("https://" + s.Addr().String() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, strings.TrimSpace(string(body))
}

func TestServerServes(t *testing.T) {
	certs := newTestCerts(t)
	reg := prometheus.NewRegistry()
	s, err := webhook.NewServer(webhook.Options{Addr: "127.0.0.1:0", GetCertificate: certs.get, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err == nil || err.Error() != "webhook: the server is not listening yet" {
		t.Errorf("Ready before Start = %v", err)
	}
	if s.Addr() != nil {
		t.Errorf("Addr before Start = %v, want nil", s.Addr())
	}
	if err := s.Register("/a", hello); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	waitFor(t, func() bool { return s.Ready() == nil }, "the server to be ready")

	c := certs.client(t, nil)
	if resp, body := get(t, c, s, "/a"); resp.StatusCode != 200 || body != "hello /a" {
		t.Errorf("GET /a = %d %q", resp.StatusCode, body)
	}
	if resp, body := get(t, c, s, "/b"); resp.StatusCode != 404 || body != `webhook: no webhook is registered at "/b"` {
		t.Errorf("GET /b before Register = %d %q", resp.StatusCode, body)
	}
	if err := s.Register("/b", hello); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, c, s, "/b"); resp.StatusCode != 200 || body != "hello /b" {
		t.Errorf("GET /b after Register = %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, c, s, "/a/"); resp.StatusCode != 404 {
		t.Errorf("GET /a/ = %d, want 404: paths match exactly", resp.StatusCode)
	}

	for _, m := range []struct {
		name   string
		labels string
		want   float64
	}{
		{"controller_runtime_webhook_requests_total", `code="200",webhook="/a"`, 1},
		{"controller_runtime_webhook_requests_total", `code="500",webhook="/a"`, 0},
		{"controller_runtime_webhook_requests_total", `code="200",webhook="/b"`, 1},
		{"controller_runtime_webhook_requests_in_flight", `webhook="/a"`, 0},
		{"controller_runtime_webhook_latency_seconds", `webhook="/a"`, 1}, // the count
	} {
		if got, ok := metricValue(t, reg, m.name, m.labels); !ok || got != m.want {
			t.Errorf("%s{%s} = %v (found %v), want %v", m.name, m.labels, got, ok, m.want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start = %v, want nil", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Start did not return after its ctx was cancelled")
	}
	if err := s.Ready(); err == nil || err.Error() != "webhook: the server is stopping" {
		t.Errorf("Ready after Start returned = %v", err)
	}
	if err := s.Start(t.Context()); err == nil || err.Error() != "webhook: Start called twice: a Server starts once" {
		t.Errorf("second Start = %v", err)
	}
}

// metricValue finds a series in reg by its labels written as
// name="value" pairs sorted by name; a histogram's value is its count.
func metricValue(t *testing.T, reg *prometheus.Registry, name, labels string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if strings.Join(ls, ",") != labels {
				continue
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// TestServerHTTP2 checks that a client offering h2 gets HTTP/1.1 unless
// HTTP2 is set.
func TestServerHTTP2(t *testing.T) {
	for _, enable := range []bool{false, true} {
		t.Run(fmt.Sprint("HTTP2=", enable), func(t *testing.T) {
			certs := newTestCerts(t)
			s, _ := startServer(t, webhook.Options{GetCertificate: certs.get, HTTP2: enable})
			if err := s.Register("/a", hello); err != nil {
				t.Fatal(err)
			}
			c := certs.client(t, nil)
			resp, _ := get(t, c, s, "/a")
			wantProto, wantALPN := "HTTP/1.1", "http/1.1"
			if enable {
				wantProto, wantALPN = "HTTP/2.0", "h2"
			}
			if resp.Proto != wantProto || resp.TLS == nil || resp.TLS.NegotiatedProtocol != wantALPN {
				t.Errorf("proto %s, ALPN %q; want %s, %q", resp.Proto, resp.TLS.NegotiatedProtocol, wantProto, wantALPN)
			}
		})
	}
}

// TestServerTLSVersion checks that TLS 1.1 is refused, and the failed
// handshake logged at V(1).
func TestServerTLSVersion(t *testing.T) {
	certs := newTestCerts(t)
	var mu sync.Mutex
	var logs []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, args)
	}, funcr.Options{Verbosity: 1})
	s, stop := startServer(t, webhook.Options{GetCertificate: certs.get, Logger: logger})
	c := certs.client(t, func(cfg *tls.Config) { cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tls.VersionTLS11 })
	_, err := c.Get("https://" + s.Addr().String() + "/a")
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("a TLS 1.1 client: %v, want a protocol version error", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if all := strings.Join(logs, "\n"); !strings.Contains(all, `"level"=1 "msg"="TLS handshake failed" "err"="http: TLS handshake error from 127.0.0.1:`) {
		t.Errorf("no V(1) log of the failed handshake in:\n%s", all)
	}
}

func TestServerReadyNeedsCertificate(t *testing.T) {
	certs := newTestCerts(t)
	var have atomic.Bool
	get := func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if !have.Load() {
			return nil, errors.New("the Secret is not read yet")
		}
		return certs.get(h)
	}
	s, err := webhook.NewServer(webhook.Options{Addr: "127.0.0.1:0", GetCertificate: get})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, func() bool { return s.Addr() != nil }, "the server to listen")
	if err := s.Ready(); err == nil || err.Error() != "webhook: no serving certificate yet: the Secret is not read yet" {
		t.Errorf("Ready without a certificate = %v", err)
	}
	have.Store(true)
	if err := s.Ready(); err != nil {
		t.Errorf("Ready with a certificate = %v", err)
	}
}

// TestServerDrains checks that a request in flight when Start's ctx ends
// is answered, and that Ready fails from then on.
func TestServerDrains(t *testing.T) {
	certs := newTestCerts(t)
	s, stop := startServer(t, webhook.Options{GetCertificate: certs.get})
	entered, release := make(chan struct{}), make(chan struct{})
	if err := s.Register("/slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		fmt.Fprint(w, "done")
	})); err != nil {
		t.Fatal(err)
	}
	c := certs.client(t, nil)
	type result struct {
		code int
		body string
	}
	got := make(chan result, 1)
	go func() {
		resp, err := c.Get("https://" + s.Addr().String() + "/slow")
		if err != nil {
			got <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- result{resp.StatusCode, string(b)}
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	waitFor(t, func() bool { return s.Ready() != nil }, "Ready to fail once stopping")
	select {
	case err := <-stopped:
		t.Fatalf("Start returned (%v) with a request in flight", err)
	default:
	}
	close(release)
	if r := <-got; r.code != 200 || r.body != "done" {
		t.Errorf("the request in flight got %d %q, want 200 done", r.code, r.body)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Start = %v", err)
	}
}

func TestServerRegisterErrors(t *testing.T) {
	s, err := webhook.NewServer(webhook.Options{GetCertificate: newTestCerts(t).get})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register("/validate", hello); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		h    http.Handler
		want string
	}{
		{"/validate", hello, `webhook: path "/validate" is registered twice: give each webhook a path of its own`},
		{"validate", hello, `webhook: path "validate" does not start with "/": register the path of the webhook configuration's clientConfig, such as "/validate-widgets"`},
		{"", hello, `webhook: path "" does not start with "/"`},
		{"/validate/", hello, `webhook: path "/validate/" is not a clean URL path: use one such as "/validate", without a query or a trailing "/"`},
		{"/a//b", hello, `webhook: path "/a//b" is not a clean URL path: use one such as "/a/b"`},
		{"/a?b=c", hello, `webhook: path "/a?b=c" is not a clean URL path: use one such as "/a"`},
		{"/nil", nil, `webhook: registering "/nil": the handler is nil`},
		{"/nil-func", http.HandlerFunc(nil), `webhook: registering "/nil-func": the handler is nil`},
	} {
		if err := s.Register(tc.path, tc.h); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Register(%q) = %v,\nwant an error starting %q", tc.path, err, tc.want)
		}
	}
	var none *webhook.Server
	if err := none.Register("/a", hello); err == nil || !strings.Contains(err.Error(), "set manager.Options.Webhook") {
		t.Errorf("Register on a nil Server = %v", err)
	}
}

func TestNewServerErrors(t *testing.T) {
	get := newTestCerts(t).get
	reg := prometheus.NewRegistry()
	if _, err := webhook.NewServer(webhook.Options{GetCertificate: get, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts webhook.Options
		want string
	}{
		{"bad Addr", webhook.Options{Addr: "9443", GetCertificate: get},
			`webhook: Options.Addr is "9443": use host:port such as ":9443" or "127.0.0.1:0"`},
		{"no certificate", webhook.Options{},
			"webhook: Options.GetCertificate is nil: pass a certificate source's GetCertificate"},
		{"metrics registered twice", webhook.Options{GetCertificate: get, Registry: reg},
			"webhook: registering the controller_runtime_webhook_* metrics: duplicate metrics collector registration attempted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := webhook.NewServer(tc.opts); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("NewServer = %v,\nwant an error starting %q", err, tc.want)
			}
		})
	}
}

func TestServerListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, err := webhook.NewServer(webhook.Options{Addr: ln.Addr().String(), GetCertificate: newTestCerts(t).get})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start(t.Context())
	if want := fmt.Sprintf("webhook: listening on %q: ", ln.Addr()); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Start on a busy port = %v, want an error starting %q", err, want)
	}
}

// TestServerCountsPanics checks the panic counters of admission and
// conversion handlers served by a Server.
func TestServerCountsPanics(t *testing.T) {
	certs := newTestCerts(t)
	reg := prometheus.NewRegistry()
	s, _ := startServer(t, webhook.Options{GetCertificate: certs.get, Registry: reg})
	for _, name := range []string{"controller_runtime_webhook_panics_total", "controller_runtime_conversion_webhook_panics_total"} {
		if v, ok := metricValue(t, reg, name, ""); !ok || v != 0 {
			t.Errorf("%s before any request = %v (found %v), want 0", name, v, ok)
		}
	}
	validate, err := webhook.NewValidating[*Gadget](newScheme(), &validator{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register("/validate", validate); err != nil {
		t.Fatal(err)
	}
	if err := s.Register("/convert", newConversion(t)); err != nil {
		t.Fatal(err)
	}
	c := certs.client(t, nil)
	for path, body := range map[string][]byte{
		"/validate": review(admissionv1.Create, gadgetJSON(groupV1, "g", `{"color":"panic"}`), ""),
		"/convert":  conversionBody(groupV1, gadgetJSON(groupV1alpha1, "g", `{"colour":"panic"}`)),
	} {
		resp, err := c.Post("https://"+s.Addr().String()+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s = %d, want 200 with the failure in the review", path, resp.StatusCode)
		}
	}
	for _, name := range []string{"controller_runtime_webhook_panics_total", "controller_runtime_conversion_webhook_panics_total"} {
		if v, _ := metricValue(t, reg, name, ""); v != 1 {
			t.Errorf("%s = %v, want 1", name, v)
		}
	}
}

// TestServerLimits: a body over MaxBodyBytes (a ConversionReview's
// included) is answered 413 without being read whole, a body sent slower
// than ReadTimeout allows has its connection closed, and a kept-alive
// connection left idle past IdleTimeout is closed. Before the limits, a
// ConversionReview had no size bound and connections no read or idle
// bound.
func TestServerLimits(t *testing.T) {
	certs := newTestCerts(t)
	s, _ := startServer(t, webhook.Options{GetCertificate: certs.get, Limits: webhook.Limits{MaxBodyBytes: 1 << 20,
		ReadTimeout: 500 * time.Millisecond, IdleTimeout: 500 * time.Millisecond}})
	if err := s.Register("/convert", newConversion(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.Register("/a", hello); err != nil {
		t.Fatal(err)
	}
	url := "https://" + s.Addr().String()

	t.Run("oversized conversion review", func(t *testing.T) {
		obj := gadgetJSON(groupV1alpha1, "g", `{"note":"`+strings.Repeat("x", 2<<20)+`"}`)
		resp, err := certs.client(t, nil).Post(url+"/convert", "application/json", bytes.NewReader(conversionBody(groupV1, obj)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			body, _ := io.ReadAll(resp.Body)
			t.Errorf("a 2 MiB ConversionReview with MaxBodyBytes 1 MiB: status %d %s, want 413", resp.StatusCode, body)
		}
	})

	dial := func(t *testing.T) *tls.Conn {
		t.Helper()
		conn, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{RootCAs: certs.pool})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	// closed reports whether the server closed conn within waitTimeout.
	closed := func(conn *tls.Conn) bool {
		_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))
		_, err := io.Copy(io.Discard, conn)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}

	t.Run("slow body", func(t *testing.T) {
		conn := dial(t)
		fmt.Fprintf(conn, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
		stop := make(chan struct{})
		defer close(stop)
		go func() { // a byte every 100ms: the body would take 10s
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		if !closed(conn) {
			t.Errorf("a body sent a byte every 100ms kept its connection open %v, want it closed after ReadTimeout", waitTimeout)
		}
	})

	t.Run("idle connection", func(t *testing.T) {
		conn := dial(t)
		fmt.Fprintf(conn, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
		if !closed(conn) {
			t.Errorf("a kept-alive connection stayed open %v after its request, want it closed after IdleTimeout", waitTimeout)
		}
	})

	if _, err := webhook.NewServer(webhook.Options{GetCertificate: certs.get, Limits: webhook.Limits{MaxBodyBytes: -1}}); err == nil || !strings.Contains(err.Error(), "Options.Limits.MaxBodyBytes is negative") {
		t.Errorf("NewServer with a negative MaxBodyBytes = %v, want an error naming it", err)
	}
}

// TestServerTLSOption: Options.TLS edits the server's TLS configuration:
// with TLS 1.3 required, a client that speaks at most TLS 1.2 is refused;
// with client certificates required, a client without one is refused; a
// TLS option that lowers the version is refused by NewServer.
func TestServerTLSOption(t *testing.T) {
	certs := newTestCerts(t)
	tls13, _ := startServer(t, webhook.Options{GetCertificate: certs.get, TLS: func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 }})
	mtls, _ := startServer(t, webhook.Options{GetCertificate: certs.get, TLS: func(c *tls.Config) {
		c.ClientCAs, c.ClientAuth = certs.pool, tls.RequireAndVerifyClientCert
	}})
	for _, s := range []*webhook.Server{tls13, mtls} {
		if err := s.Register("/a", hello); err != nil {
			t.Fatal(err)
		}
	}
	if resp, body := get(t, certs.client(t, nil), tls13, "/a"); resp.StatusCode != http.StatusOK || resp.TLS.Version != tls.VersionTLS13 {
		t.Errorf("TLS 1.3 server: %d %q over %s, want 200 over TLS 1.3", resp.StatusCode, body, tls.VersionName(resp.TLS.Version))
	}
	if _, err := certs.client(t, func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }).Get("https://" + tls13.Addr().String() + "/a"); err == nil {
		t.Error("a TLS 1.2 client got an answer from a server that requires TLS 1.3")
	}
	if _, err := certs.client(t, nil).Get("https://" + mtls.Addr().String() + "/a"); err == nil {
		t.Error("a client without a certificate got an answer from a server that requires one")
	}
	if _, err := webhook.NewServer(webhook.Options{GetCertificate: certs.get, TLS: func(c *tls.Config) { c.MinVersion = tls.VersionTLS10 }}); err == nil ||
		!strings.Contains(err.Error(), "Options.TLS") {
		t.Errorf("NewServer with TLS lowered to 1.0 = %v, want an error naming Options.TLS", err)
	}
}
