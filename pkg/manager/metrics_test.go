package manager_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/certs"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/webhook"
)

// reviewer makes kube answer TokenReviews and SubjectAccessReviews as an
// API server would with the tokens of users (token → username) and their
// accesses (username → "verb path").
func reviewer(kube *cluster, users map[string]string, accesses map[string][]string) {
	kube.React(func(req *http.Request) (*http.Response, error) {
		review := strings.HasSuffix(req.URL.Path, "/tokenreviews") || strings.HasSuffix(req.URL.Path, "/subjectaccessreviews")
		if req.Method != http.MethodPost || !review {
			return nil, nil
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		obj, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding a review: %w", err)
		}
		switch r := obj.(type) {
		case *authenticationv1.TokenReview:
			if u, ok := users[r.Spec.Token]; ok {
				r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: u}}
			}
		case *authorizationv1.SubjectAccessReview:
			na := r.Spec.NonResourceAttributes
			r.Status.Allowed = na != nil && slices.Contains(accesses[r.Spec.User], na.Verb+" "+na.Path)
		}
		out, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(out))}, nil
	})
}

// httpsClient is an HTTPS client that speaks HTTP/2 when the server offers it
// and trusts roots (nil: it verifies nothing).
func httpsClient(roots *x509.CertPool) (*http.Client, func()) {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, InsecureSkipVerify: roots == nil},
		ForceAttemptHTTP2: true,
		DisableKeepAlives: true,
	}
	return &http.Client{Transport: tr, Timeout: waitTimeout}, tr.CloseIdleConnections
}

// fetch GETs url with token (none when empty) and returns the response
// with its body read.
func fetch(t *testing.T, c *http.Client, url, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp, string(body)
}

// TestSecureMetrics: with Options.SecureMetrics, /metrics is served over
// HTTPS (a self-signed certificate for localhost by default, HTTP/1.1
// only) to authorized tokens alone, pprof beside it, and the plain server
// keeps the probes but not /metrics and speaks no HTTP/2 either.
func TestSecureMetrics(t *testing.T) {
	kube := newCluster(t)
	reviewer(kube, map[string]string{"reader-token": "reader", "nobody-token": "nobody"}, map[string][]string{
		"reader": {"get /metrics", "get /debug/pprof/", "get /debug/pprof/heap", "get /debug/pprof/profile", "get /debug/pprof/trace"},
	})
	m := newManager(t, kube, manager.Options{
		HTTPAddr:      "127.0.0.1:0",
		SecureMetrics: &manager.SecureMetricsOptions{Addr: "127.0.0.1:0", Pprof: true},
	})
	r := run(t, m)
	eventually(t, "the servers to listen", func() bool { return m.Addr() != nil && m.SecureMetricsAddr() != nil })
	base := "https://" + m.SecureMetricsAddr().String()
	c, closeIdle := httpsClient(nil)
	defer closeIdle()

	resp, body := fetch(t, c, base+"/metrics", "reader-token")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("GET /metrics with an authorized token: %d, body has go_goroutines: %v", resp.StatusCode, strings.Contains(body, "go_goroutines"))
	}
	if resp.Proto != "HTTP/1.1" || resp.TLS.NegotiatedProtocol == "h2" {
		t.Errorf("a client that offers HTTP/2 got %s (ALPN %q), want HTTP/1.1", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
	if leaf := resp.TLS.PeerCertificates[0]; !slices.Contains(leaf.DNSNames, "localhost") || leaf.Issuer.String() != leaf.Subject.String() {
		t.Errorf("served certificate for %v issued by %q, want a self-signed one for localhost", leaf.DNSNames, leaf.Issuer)
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "forged", http.StatusUnauthorized},
		{"/metrics", "nobody-token", http.StatusForbidden},
		{"/debug/pprof/heap", "nobody-token", http.StatusForbidden},
		{"/debug/pprof/", "reader-token", http.StatusOK},
		{"/debug/pprof/heap", "reader-token", http.StatusOK},
		{"/debug/pprof/profile?seconds=0.05", "reader-token", http.StatusOK},
		{"/debug/pprof/trace?seconds=0.05", "reader-token", http.StatusOK},
		{"/debug/pprof/profile?seconds=forever", "reader-token", http.StatusBadRequest},
	} {
		resp, body := fetch(t, c, base+tc.path, tc.token)
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s with token %q: %d %q, want %d", tc.path, tc.token, resp.StatusCode, body, tc.want)
		}
		if tc.want == http.StatusOK && len(body) == 0 {
			t.Errorf("GET %s: empty body", tc.path)
		}
	}
	if _, body := fetch(t, c, base+"/debug/pprof/heap?debug=1", "reader-token"); !strings.Contains(body, "heap profile") {
		t.Errorf("GET /debug/pprof/heap?debug=1: %.100q, want a heap profile in text", body)
	}

	plain := "http://" + m.Addr().String()
	if code, _ := getURL(t, plain+"/metrics"); code != http.StatusNotFound {
		t.Errorf("plain GET /metrics = %d, want 404: secure metrics take it off HTTPAddr", code)
	}
	eventually(t, "/readyz", func() bool { code, _ := getURL(t, plain+"/readyz"); return code == http.StatusOK })
	if code, _ := getURL(t, plain+"/healthz"); code != http.StatusOK {
		t.Errorf("plain GET /healthz = %d, want 200", code)
	}
	// HTTP/2 without TLS, with prior knowledge (h2c): the server does not
	// speak it.
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	defer h2c.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, plain+"/healthz", nil)
	if resp, err := h2c.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Errorf("an h2c request to HTTPAddr got %s %d, want it refused", resp.Proto, resp.StatusCode)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// source is a CertificateSource that counts its handshakes and tells
// whether Start runs.
type source struct {
	*certs.SelfSigned
	handshakes atomic.Int64
	running    atomic.Bool
	stopped    chan struct{}
}

func (s *source) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.handshakes.Add(1)
	return s.SelfSigned.GetCertificate(hello)
}

func (s *source) Start(ctx context.Context) error {
	s.running.Store(true)
	defer close(s.stopped)
	return s.SelfSigned.Start(ctx)
}

// TestSecureMetricsOptions: a given Certificate is served and run for as
// long as the server; HTTP2 lets clients speak HTTP/2; without Pprof there
// is no /debug/pprof/.
func TestSecureMetricsOptions(t *testing.T) {
	ss, err := certs.NewSelfSigned(certs.SelfSignedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := &source{SelfSigned: ss, stopped: make(chan struct{})}
	kube := newCluster(t)
	reviewer(kube, map[string]string{"t": "u"}, map[string][]string{"u": {"get /metrics", "get /debug/pprof/", "get /debug/pprof/heap"}})
	m := newManager(t, kube, manager.Options{SecureMetrics: &manager.SecureMetricsOptions{Addr: "127.0.0.1:0", Certificate: src, HTTP2: true}})
	r := run(t, m)
	eventually(t, "the server to listen", func() bool { return m.SecureMetricsAddr() != nil })
	if m.Addr() != nil {
		t.Errorf("Addr() = %v without HTTPAddr, want nil", m.Addr())
	}
	eventually(t, "the certificate source to start", src.running.Load)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(src.CABundle()) {
		t.Fatal("the source's CABundle holds no certificate")
	}
	c, closeIdle := httpsClient(roots) // verifies the certificate against the source's
	defer closeIdle()
	base := "https://" + m.SecureMetricsAddr().String()
	resp, _ := fetch(t, c, base+"/metrics", "t")
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/2.0" {
		t.Errorf("GET /metrics: %d over %s, want 200 over HTTP/2.0", resp.StatusCode, resp.Proto)
	}
	if src.handshakes.Load() == 0 {
		t.Error("the source served no handshake")
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap"} {
		if resp, _ := fetch(t, c, base+path, "t"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s without Pprof: %d, want 404", path, resp.StatusCode)
		}
	}
	closeIdle()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-src.stopped:
	default:
		t.Error("Run returned with the certificate source's Start still running")
	}
}

func TestSecureMetricsValidation(t *testing.T) {
	tests := []struct {
		name     string
		httpAddr string
		sm       manager.SecureMetricsOptions
		want     []string // substrings of the error; none means success
	}{
		{name: "zero value"},
		{name: "zero value beside HTTPAddr", httpAddr: ":8081"},
		{name: "random ports", httpAddr: "127.0.0.1:0", sm: manager.SecureMetricsOptions{Addr: "127.0.0.1:0"}},
		{name: "same port, other hosts", httpAddr: "127.0.0.1:9000", sm: manager.SecureMetricsOptions{Addr: "127.0.0.2:9000"}},
		{name: "bad Addr", sm: manager.SecureMetricsOptions{Addr: "8443"}, want: []string{`Options.SecureMetrics.Addr is "8443"`, "host:port"}},
		{
			name: "HTTPAddr's address", httpAddr: ":8080", sm: manager.SecureMetricsOptions{Addr: ":8080"},
			want: []string{`Options.SecureMetrics.Addr ":8080" and Options.HTTPAddr ":8080" share a port`, `":8443"`},
		},
		{name: "default Addr on HTTPAddr's port", httpAddr: "127.0.0.1:8443", want: []string{"share a port"}},
		{name: "every interface and one", httpAddr: "0.0.0.0:9000", sm: manager.SecureMetricsOptions{Addr: "127.0.0.1:9000"}, want: []string{"share a port"}},
		{
			name: "nil certificate pointer", sm: manager.SecureMetricsOptions{Certificate: (*certs.Files)(nil)},
			want: []string{"Options.SecureMetrics.Certificate is a nil *certs.Files", "leave it nil"},
		},
		{
			name: "TLS lowered to 1.1", sm: manager.SecureMetricsOptions{TLS: func(c *tls.Config) { c.MinVersion = tls.VersionTLS11 }},
			want: []string{"Options.SecureMetrics.TLS", "TLS 1.0 and 1.1 are refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sm := tt.sm
			_, err := manager.New(cfg, manager.Options{HTTPAddr: tt.httpAddr, SecureMetrics: &sm})
			if sm.Addr != tt.sm.Addr || sm.Certificate != tt.sm.Certificate || sm.HTTP2 != tt.sm.HTTP2 || sm.Pprof != tt.sm.Pprof {
				t.Errorf("New changed the caller's SecureMetricsOptions to %+v", sm)
			}
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New succeeded, want an error containing %q", tt.want)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// failingSource serves a certificate but fails to keep it current.
type failingSource struct{ *certs.SelfSigned }

func (failingSource) Start(context.Context) error { return errors.New("cannot watch the files") }

// TestSecureMetricsSourceFails: a certificate source that fails stops Run
// with its error.
func TestSecureMetricsSourceFails(t *testing.T) {
	ss, err := certs.NewSelfSigned(certs.SelfSignedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t, newCluster(t), manager.Options{SecureMetrics: &manager.SecureMetricsOptions{Addr: "127.0.0.1:0", Certificate: failingSource{ss}}})
	err = run(t, m).wait(t)
	if err == nil || !strings.Contains(err.Error(), "secure metrics server's certificate source: cannot watch the files") {
		t.Fatalf("Run returned %v, want the source's error", err)
	}
}

// TestServerLimitsReachEveryServer: Options.ServerLimits bound the probe
// server and the secure metrics server: a kept-alive connection left idle
// past IdleTimeout is closed (before, the manager's servers had no idle or
// read timeout, and 200 idle connections stayed open).
func TestServerLimitsReachEveryServer(t *testing.T) {
	kube := newCluster(t)
	m := newManager(t, kube, manager.Options{
		HTTPAddr:      "127.0.0.1:0",
		SecureMetrics: &manager.SecureMetricsOptions{Addr: "127.0.0.1:0"},
		ServerLimits:  webhook.Limits{IdleTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond},
	})
	r := run(t, m)
	eventually(t, "the servers to listen", func() bool { return m.Addr() != nil && m.SecureMetricsAddr() != nil })
	for name, dial := range map[string]func() (net.Conn, error){
		"probes": func() (net.Conn, error) { return net.Dial("tcp", m.Addr().String()) },
		"secure metrics": func() (net.Conn, error) {
			return tls.Dial("tcp", m.SecureMetricsAddr().String(), &tls.Config{InsecureSkipVerify: true})
		},
	} {
		conn, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, conn)
		if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: a kept-alive connection stayed open 10s after its request, want it closed after IdleTimeout", name)
		}
		conn.Close()
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := manager.New(kube.Config(), manager.Options{ServerLimits: webhook.Limits{IdleTimeout: -1}}); err == nil || !strings.Contains(err.Error(), "Options.ServerLimits") {
		t.Errorf("a negative IdleTimeout: %v, want an error naming Options.ServerLimits", err)
	}
}
