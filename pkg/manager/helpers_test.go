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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// waitTimeout bounds every wait on a condition; tests that pass finish far
// sooner.
const waitTimeout = 10 * time.Second

// newManager returns a Manager over kube, a fake dynamic client and a
// RESTMapper that serves ConfigMaps.
func newManager(t *testing.T, kube *fake.Clientset, opts manager.Options) *manager.Manager {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	m, err := manager.NewWithClients(informer.Clients{
		Kube:    kube,
		Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		Mapper:  mapper,
	}, opts)
	if err != nil {
		t.Fatalf("NewWithClients: %v", err)
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

// blockList makes kube's ConfigMap lists wait until the returned release
// is called (or the test ends). listing is closed when the first list
// arrives, that is once Run has started the informers. The fake clientset
// holds its lock while a reactor runs, so release before anything else
// calls kube, and before stopping Run.
func blockList(t *testing.T, kube *fake.Clientset) (listing <-chan struct{}, release func()) {
	started := make(chan struct{})
	released := make(chan struct{})
	var startOnce, releaseOnce sync.Once
	release = func() { releaseOnce.Do(func() { close(released) }) }
	testDone := t.Context().Done()
	kube.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		startOnce.Do(func() { close(started) })
		select {
		case <-released:
		case <-testDone:
		}
		return false, nil, nil // on to the object tracker
	})
	return started, release
}

// failList makes every ConfigMap list of kube fail, so informers for
// ConfigMaps never sync.
func failList(kube *fake.Clientset) {
	kube.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("configmaps are forbidden")
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
