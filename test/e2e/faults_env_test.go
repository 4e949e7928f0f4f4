package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Helpers for the fault tests: a control plane a test may break, a TCP
// proxy that cuts connections, a counter of API requests, and direct etcd
// compaction.

// startFaultEnv starts a control plane for t alone, with extra
// kube-apiserver flags, and stops it when t ends. The API server's cert
// directory is fixed (not envtest's self-cleaning temporary one), so that
// APIServer.Stop and Start restart it on the same port, with the same
// serving certificate and the same client CA: the returned config keeps
// working across a restart. With E2E_FAULT_APISERVER_LOG set to a
// directory, the API server's output goes to <test name>.log there.
func startFaultEnv(t *testing.T, apiserverFlags map[string]string) (*envtest.Environment, *rest.Config) {
	t.Helper()
	// envtest logs through controller-runtime's global logger, which,
	// never set, prints a warning with a stack trace once the process is
	// 30s old: these control planes start later than the shared one.
	crlogOnce.Do(func() { crlog.SetLogger(logr.Discard()) })
	api := &envtest.APIServer{CertDir: t.TempDir()}
	for k, v := range apiserverFlags {
		api.Configure().Set(k, v)
	}
	if os.Getenv("E2E_FAULT_APISERVER_LOG") != "" {
		f, err := os.Create(filepath.Join(os.Getenv("E2E_FAULT_APISERVER_LOG"), t.Name()+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		api.Out, api.Err = f, f
	}
	e := &envtest.Environment{
		ControlPlane: envtest.ControlPlane{APIServer: api},
		// kube-apiserver drains open watches for up to a minute on SIGTERM
		// (unless --shutdown-watch-termination-grace-period is set); a test
		// that stops it waits this long and then kills it.
		ControlPlaneStopTimeout: 5 * time.Second,
	}
	c, err := e.Start()
	if err != nil {
		t.Fatalf("starting a control plane of the test's own: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Logf("stopping the test's control plane: %v", err)
		}
	})
	return e, c
}

var crlogOnce sync.Once

// fastClient returns a clientset for c without client-side throttling, for
// tests that write many objects.
func fastClient(t testing.TB, c *rest.Config) kubernetes.Interface {
	t.Helper()
	c = rest.CopyConfig(c)
	c.QPS, c.Burst = 1000, 1000
	k, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// requestCounter counts the HTTP requests sent through configs it wrapped.
type requestCounter struct {
	mu      sync.Mutex
	lists   int // GETs that are not watches, plus watches that send initial events (a WatchList)
	watches int // GETs with watch=true
	writes  int // everything else
	gone    int // responses with status 410
	log     []request
}

// request is one GET a requestCounter saw.
type request struct {
	at      time.Time
	watch   bool   // a watch from a resourceVersion on
	list    bool   // a list, or a watch that streams the state first (a WatchList)
	rv      string // the resourceVersion it asked for
	path    string // the URL path
	initial bool   // a watch that streams the state first (a WatchList)
	limit   string // the page size it asked for, "" for none
	cont    string // the continue token it sent, "" for none
}

// config returns a copy of c whose requests rc counts.
func (rc *requestCounter) config(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			rc.mu.Lock()
			switch {
			case req.Method != http.MethodGet:
				rc.writes++
			case q.Get("watch") == "true" || q.Get("watch") == "1":
				rc.watches++
				initial := q.Get("sendInitialEvents") == "true"
				if initial {
					rc.lists++
				}
				rc.log = append(rc.log, request{at: time.Now(), watch: !initial, list: initial, initial: initial, rv: q.Get("resourceVersion"), path: req.URL.Path, limit: q.Get("limit")})
			default:
				rc.lists++
				rc.log = append(rc.log, request{at: time.Now(), list: true, rv: q.Get("resourceVersion"), path: req.URL.Path, limit: q.Get("limit"), cont: q.Get("continue")})
			}
			rc.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusGone {
				rc.mu.Lock()
				rc.gone++
				rc.mu.Unlock()
			}
			return resp, err
		})
	})
	return c
}

// requests returns the GETs rc saw, oldest first.
func (rc *requestCounter) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.log...)
}

// counts is a snapshot of a requestCounter.
type counts struct{ lists, watches, writes, gone int }

func (c counts) total() int { return c.lists + c.watches + c.writes }

func (c counts) sub(d counts) counts {
	return counts{c.lists - d.lists, c.watches - d.watches, c.writes - d.writes, c.gone - d.gone}
}

func (rc *requestCounter) snapshot() counts {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return counts{rc.lists, rc.watches, rc.writes, rc.gone}
}

// proxy is a TCP proxy in front of an API server whose connections a test
// can cut: cut closes every open connection and stops listening, so that
// new connections are refused (as from a server that is down), until
// restore listens again on the same address.
type proxy struct {
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startProxy listens on a free local port and forwards to target
// (host:port); it stops when t ends.
func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Go(func() { p.serve(ln) })
	t.Cleanup(func() {
		p.cut()
		p.wg.Wait()
	})
	return p
}

// config returns a copy of c that reaches the API server through p. The
// serving certificate covers 127.0.0.1 whatever the port.
func (p *proxy) config(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.Host = "https://" + p.addr
	return c
}

func (p *proxy) serve(ln net.Listener) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[in] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(in) })
	}
}

func (p *proxy) pipe(in net.Conn) {
	defer p.drop(in)
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.ln == nil {
		p.mu.Unlock()
		out.Close()
		return
	}
	p.conns[out] = struct{}{}
	p.mu.Unlock()
	defer p.drop(out)
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(out, in); out.Close() })
	wg.Go(func() { io.Copy(in, out); in.Close() })
	wg.Wait()
}

func (p *proxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// cut stops listening and closes every connection through p.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// restore listens again on p's address.
func (p *proxy) restore(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy: listening again on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() { p.serve(ln) })
}

// etcdRevision returns the current revision of the etcd at base (its
// client URL), through etcd's JSON gateway.
func etcdRevision(t testing.TB, base string) int64 {
	t.Helper()
	var out struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	etcdPost(t, base, "/v3/kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/")), "limit": 1}, &out)
	rev, err := strconv.ParseInt(out.Header.Revision, 10, 64)
	if err != nil {
		t.Fatalf("etcd range: revision %q: %v", out.Header.Revision, err)
	}
	return rev
}

// compactEtcd compacts the etcd at base up to rev, physically, so that no
// watch can start from an older revision.
func compactEtcd(t testing.TB, base string, rev int64) {
	t.Helper()
	etcdPost(t, base, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil)
}

func etcdPost(t testing.TB, base, path string, in, out any) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpc.Post(base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("etcd %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd %s: status %d: %s", path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("etcd %s: %v: %s", path, err, b)
		}
	}
}
