package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// Deadlines. Generous, because the machine is shared; a passing test never
// waits for them, it returns as soon as its condition holds.
const (
	// waitTimeout bounds waits for something that normally takes
	// milliseconds: an event reaching Reconcile, a cache syncing.
	waitTimeout = 15 * time.Second
	// stopTimeout bounds Run's return after its ctx is cancelled.
	stopTimeout = 30 * time.Second
)

// eventually polls cond until it returns true, and fails the test if it has
// not within timeout. what names the condition in the failure.
func eventually(t testing.TB, timeout time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, fmt.Sprintf(what, args...))
		}
		<-tick.C
	}
}

// never fails the test if cond becomes true within d. It asserts that
// something does not happen, so it must wait out d; use it only after a
// positive signal that the thing could have happened by now.
func never(t testing.TB, d time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if cond() {
			t.Fatalf("%s happened within %v, but must not", fmt.Sprintf(what, args...), d)
		}
		<-tick.C
	}
}

// testLogger returns a logger that writes to t.Log until the test ends
// (later lines are dropped rather than panicking t.Log). E2E_LOG_V sets the
// verbosity; 4 shows per-reconcile lines.
func testLogger(t testing.TB) logr.Logger {
	v, _ := strconv.Atoi(os.Getenv("E2E_LOG_V"))
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
	})
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		if prefix != "" {
			args = prefix + ": " + args
		}
		t.Log(args)
	}, funcr.Options{Verbosity: v})
}

// newNamespace creates a namespace for t alone and deletes it when t ends
// (envtest has no namespace controller, so it stays Terminating; nothing
// watches it by then).
func newNamespace(t testing.TB) string {
	t.Helper()
	slug := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, strings.TrimPrefix(t.Name(), "Test"))
	slug = strings.Trim(slug[:min(len(slug), 40)], "-")
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-" + slug + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// newManager returns a manager for the cluster at c that logs to t and,
// unless opts says otherwise, caches only namespace ns.
func newManager(t testing.TB, c *rest.Config, ns string, opts manager.Options) *manager.Manager {
	t.Helper()
	if len(opts.Informers.Namespaces) == 0 {
		opts.Informers.Namespaces = []string{ns}
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = testLogger(t)
	}
	mgr, err := manager.New(c, opts)
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	return mgr
}

// running is a Manager whose Run is in progress on its own goroutine.
type running struct {
	mgr    *manager.Manager
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // Run's result, once done is closed
	at     time.Time     // when Run returned, once done is closed

	mu      sync.Mutex
	checked bool // the test has looked at Run's result
}

// start runs mgr.Run on a new goroutine. If the test does not call stop or
// wait itself, a cleanup cancels Run and requires it to return nil.
func start(t testing.TB, mgr *manager.Manager) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{mgr: mgr, cancel: cancel, done: make(chan struct{})}
	go func() {
		err := mgr.Run(ctx)
		r.err, r.at = err, time.Now()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.mu.Lock()
		checked := r.checked
		r.mu.Unlock()
		if checked {
			return
		}
		if err := r.stop(t); err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	})
	return r
}

// stop cancels Run's ctx and returns Run's result; it fails the test if Run
// does not return within stopTimeout.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	return r.wait(t, stopTimeout)
}

// wait returns Run's result, failing the test if Run has not returned
// within timeout.
func (r *running) wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	r.mu.Lock()
	r.checked = true
	r.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		t.Fatalf("Run did not return within %v", timeout)
		return nil
	}
}

// returned reports whether Run has returned.
func (r *running) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// call is one Reconcile as a recorder saw it.
type call struct {
	req  reconcile.Request
	at   time.Time // when Reconcile was entered
	note string    // what the reconciler observed, if it says
}

// recorder records Reconcile calls; safe for concurrent use.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

// add records a call to req at time at with note, and returns how many
// calls req had before it.
func (r *recorder) add(req reconcile.Request, at time.Time, note string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if c.req == req {
			n++
		}
	}
	r.calls = append(r.calls, call{req: req, at: at, note: note})
	return n
}

// of returns the calls for req, oldest first.
func (r *recorder) of(req reconcile.Request) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.req == req {
			out = append(out, c)
		}
	}
	return out
}

// count returns how many calls req had.
func (r *recorder) count(req reconcile.Request) int { return len(r.of(req)) }

// all returns every call, oldest first.
func (r *recorder) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// sawNote reports whether some call for req recorded note.
func (r *recorder) sawNote(req reconcile.Request, note string) bool {
	for _, c := range r.of(req) {
		if c.note == note {
			return true
		}
	}
	return false
}

// notes returns the notes recorded for req.
func (r *recorder) notes(req reconcile.Request) []string {
	var out []string
	for _, c := range r.of(req) {
		out = append(out, c.note)
	}
	return out
}

// later prints the value of a function when a failure message is
// formatted (with %v), not when the message's arguments are evaluated.
type later func() any

func (l later) String() string { return fmt.Sprintf("%#v", l()) }

// notesLater is notes for a failure message: see later.
func (r *recorder) notesLater(req reconcile.Request) later {
	return func() any { return r.notes(req) }
}

// key builds the Request for namespace/name.
func key(namespace, name string) reconcile.Request {
	var r reconcile.Request
	r.Namespace, r.Name = namespace, name
	return r
}

// createConfigMap creates namespace/name with data and labels through the
// admin client.
func createConfigMap(t testing.TB, namespace, name string, data, labels map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(namespace).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Data:       data,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ConfigMap %s/%s: %v", namespace, name, err)
	}
	return cm
}

// httpc talks to the manager's endpoints. Keep-alives are off so that no
// client connection outlives a request (and shows up as a leaked goroutine).
var httpc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// get fetches path from the manager's HTTP endpoints and returns the status
// code and body; err is set when the request itself failed.
func get(addr, path string) (int, string, error) {
	resp, err := httpc.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metricsOf renders the manager's /metrics through its Handler, without a
// listener, and parses it.
func metricsOf(t testing.TB, mgr *manager.Manager) metrics {
	t.Helper()
	rec := httptest.NewRecorder()
	mgr.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d: %s", rec.Code, rec.Body)
	}
	m, err := parseMetrics(rec.Body.String())
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return m
}

// sample is one series of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// metrics is a parsed /metrics page.
type metrics []sample

// get returns the value of the first series called name whose labels
// include labels (given as name, value pairs).
func (m metrics) get(name string, labels ...string) (float64, bool) {
	for _, s := range m {
		if s.name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if v, has := s.labels[labels[i]]; !has || v != labels[i+1] {
				ok = false
				break
			}
		}
		if ok {
			return s.value, true
		}
	}
	return 0, false
}

// parseMetrics parses the Prometheus text exposition format: enough of it
// for the series promhttp writes (no timestamps needed, escapes honoured).
func parseMetrics(text string) (metrics, error) {
	var out metrics
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			return nil, fmt.Errorf("line %d: no value: %q", n+1, line)
		}
		s.name, line = line[:i], line[i:]
		if line[0] == '{' {
			rest, err := parseLabels(line[1:], s.labels)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			line = rest
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return nil, fmt.Errorf("line %d: no value", n+1)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: value: %w", n+1, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, nil
}

// parseLabels parses `a="x",b="y"}` into into and returns what follows '}'.
func parseLabels(s string, into map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.Index(s, "=\"")
		if eq < 0 {
			return "", fmt.Errorf("bad labels at %q", s)
		}
		name := s[:eq]
		s = s[eq+2:]
		var val strings.Builder
		for {
			if s == "" {
				return "", fmt.Errorf("unterminated value of label %s", name)
			}
			c := s[0]
			s = s[1:]
			if c == '"' {
				break
			}
			if c == '\\' && s != "" {
				switch s[0] {
				case 'n':
					c = '\n'
				default:
					c = s[0]
				}
				s = s[1:]
			}
			val.WriteByte(c)
		}
		into[name] = val.String()
	}
}

// gate holds back the GET requests (lists and watches) a manager sends for
// one path until it is opened, so a test can look at the manager while its
// cache cannot sync.
type gate struct {
	path    string
	open    chan struct{}
	hit     chan struct{} // closed on the first held request
	hitOnce sync.Once
}

func newGate(path string) *gate {
	return &gate{path: path, open: make(chan struct{}), hit: make(chan struct{})}
}

// config returns a copy of c whose requests pass through g.
func (g *gate) config(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && req.URL.Path == g.path {
				g.hitOnce.Do(func() { close(g.hit) })
				select {
				case <-g.open:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	return c
}

// slowGets returns a copy of c whose GET requests (lists and watches) for
// path each take d longer, like a slow link.
func slowGets(c *rest.Config, path string, d time.Duration) *rest.Config {
	c = rest.CopyConfig(c)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && req.URL.Path == path {
				delay := time.NewTimer(d)
				defer delay.Stop()
				select {
				case <-delay.C:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	return c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
