package manager_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/internal/faketest"
	ckfake "github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// waitTimeout bounds every wait on a condition; tests that pass finish far
// sooner.
const waitTimeout = 10 * time.Second

// cluster is a fake API server (pkg/fake), a clientset on it, and the
// reactors its Config's requests meet first.
type cluster = faketest.Cluster

// newCluster returns a fake API server holding objs.
func newCluster(t *testing.T, objs ...runtime.Object) *cluster {
	t.Helper()
	return faketest.NewCluster(t, ckfake.Options{Objects: objs})
}

// isList reports whether req lists resource (a plural such as
// "configmaps").
func isList(req *http.Request, resource string) bool { return faketest.Is(req, resource, false) }

// statusResponse is the API server's answer of err.
var statusResponse = faketest.Status

// newManager returns a Manager over c.
func newManager(t *testing.T, c *cluster, opts manager.Options) *manager.Manager {
	t.Helper()
	m, err := manager.New(c.Config(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// running is a Manager whose Run is in progress on its own goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

// run starts m.Run(ctx) on a new goroutine. The test must call stop or wait;
// if it ends without, cleanup cancels Run and waits for it.
func run(t *testing.T, m *manager.Manager) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(waitTimeout):
			t.Error("Run did not return after its ctx was cancelled")
		}
	})
	return r
}

// wait returns Run's error, failing the test if Run does not return in time.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for cleanup
		return err
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return in time")
		return nil
	}
}

// stop cancels Run's ctx and returns Run's error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// eventually polls cond until it holds, failing the test after waitTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for the condition
	}
}

// get serves path through h and returns the status code and body.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// getURL fetches url over a connection that is not kept alive, so no client
// goroutine outlives the request.
func getURL(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: waitTimeout}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// blockList makes c's ConfigMap lists wait until the returned release
// is called (or the test ends). listing is closed when the first list
// arrives, that is once Run has started the informers.
func blockList(t *testing.T, c *cluster) (listing <-chan struct{}, release func()) {
	started := make(chan struct{})
	released := make(chan struct{})
	var startOnce, releaseOnce sync.Once
	release = func() { releaseOnce.Do(func() { close(released) }) }
	testDone := t.Context().Done()
	c.React(func(req *http.Request) (*http.Response, error) {
		if !isList(req, "configmaps") {
			return nil, nil
		}
		startOnce.Do(func() { close(started) })
		select {
		case <-released:
		case <-testDone:
		}
		return nil, nil // on to the fake
	})
	return started, release
}

// failList makes every ConfigMap list of c fail, so informers for
// ConfigMaps never sync.
func failList(c *cluster) {
	c.React(func(req *http.Request) (*http.Response, error) {
		if !isList(req, "configmaps") {
			return nil, nil
		}
		return statusResponse(apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("configmaps are forbidden"))), nil
	})
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// recorder is a Reconciler that remembers the keys it was called for.
type recorder struct {
	mu   sync.Mutex
	seen map[string]int
}

func newRecorder() *recorder { return &recorder{seen: make(map[string]int)} }

func (r *recorder) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[req.String()]++
	return reconcile.Result{}, nil
}

func (r *recorder) saw(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[key] > 0
}

// runnableFunc adapts a function to manager.Runnable.
type runnableFunc func(ctx context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }
