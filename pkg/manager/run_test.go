package manager_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestRunLifecycle runs a manager with one ConfigMap informer and one
// controller over a fake clientset, from before the caches sync to
// shutdown, and checks that Run leaves no goroutine behind.
func TestRunLifecycle(t *testing.T) {
	leaks := goleak.IgnoreCurrent() // before the manager exists
	const preexisting = 5

	var objs []runtime.Object
	for i := range preexisting {
		objs = append(objs, configMap("default", fmt.Sprintf("cm-%d", i)))
	}
	kube := newCluster(t, objs...)
	listing, release := blockList(t, kube)
	m := newManager(t, kube, manager.Options{HTTPAddr: "127.0.0.1:0"})
	cms, err := informer.For[*corev1.ConfigMap](m.Cache())
	if err != nil {
		t.Fatal(err)
	}

	// The gate: the first Reconcile must see every pre-existing object.
	var (
		mu         sync.Mutex
		firstCount = -1
		seen       = map[string]bool{}
	)
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if firstCount < 0 {
			all, err := cms.Lister().List(nil)
			if err != nil {
				return reconcile.Result{}, err
			}
			firstCount = len(all)
		}
		seen[req.String()] = true
		return reconcile.Result{}, nil
	})
	if _, err := m.AddController("configmaps", r, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	started := make(chan bool, 1) // whether the caches had synced when the Runnable started
	err = m.Add(runnableFunc(func(ctx context.Context) error {
		started <- cms.HasSynced() && m.Ready()
		<-ctx.Done()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler()
	if code, _ := get(t, h, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before Run = %d, want 503", code)
	}
	if m.Addr() != nil {
		t.Errorf("Addr before Run = %v, want nil", m.Addr())
	}

	running := run(t, m)
	select {
	case <-listing:
	case <-time.After(waitTimeout):
		t.Fatal("the informer never listed")
	}
	// Run is now waiting for the caches to sync.
	if m.Ready() {
		t.Error("Ready before the caches synced")
	}
	if code, body := get(t, h, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready") {
		t.Errorf("/readyz before sync = %d %q, want 503 not ready", code, body)
	}
	addr := m.Addr()
	if addr == nil {
		t.Fatal("Addr during Run is nil")
	}
	base := "http://" + addr.String()
	if code, _ := getURL(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("GET %s/readyz before sync = %d, want 503", base, code)
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Errorf("reconciled %v before the caches synced", seen)
	}
	mu.Unlock()

	release()
	eventually(t, "every pre-existing ConfigMap to be reconciled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == preexisting
	})
	mu.Lock()
	if firstCount != preexisting {
		t.Errorf("the first Reconcile listed %d ConfigMaps, want all %d", firstCount, preexisting)
	}
	mu.Unlock()
	select {
	case synced := <-started:
		if !synced {
			t.Error("a Runnable started before the caches synced")
		}
	case <-time.After(waitTimeout):
		t.Fatal("the Runnable did not start")
	}

	// Events after the initial list reach the controller too.
	if _, err := m.Kubernetes().CoreV1().ConfigMaps("default").Create(t.Context(), configMap("default", "new"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new ConfigMap to be reconciled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["default/new"]
	})

	for _, path := range []string{"/readyz", "/healthz"} {
		if code, body := get(t, h, path); code != http.StatusOK || body != "ok\n" {
			t.Errorf("%s after sync = %d %q, want 200 ok", path, code, body)
		}
		if code, _ := getURL(t, base+path); code != http.StatusOK {
			t.Errorf("GET %s%s after sync = %d, want 200", base, path, code)
		}
	}
	// The success counter moves just after Reconcile returns.
	reconciled := `controller_runtime_reconcile_total{controller="configmaps",result="success"} 6`
	eventually(t, "6 successful reconciles in /metrics", func() bool {
		_, metrics := get(t, h, "/metrics")
		return strings.Contains(metrics, reconciled)
	})
	code, metrics := getURL(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{reconciled, `workqueue_adds_total{controller="configmaps",name="configmaps"} `} {
		if !strings.Contains(metrics, want) {
			t.Errorf("GET /metrics has no line starting %s", want)
		}
	}

	if err := running.stop(t); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	if m.Ready() {
		t.Error("Ready after Run returned")
	}
	if code, _ := get(t, h, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after Run = %d, want 503", code)
	}
	goleak.VerifyNone(t, leaks)
}

func TestHealthz(t *testing.T) {
	m := newManager(t, newCluster(t), manager.Options{})
	h := m.Handler()
	if code, body := get(t, h, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz without checks = %d %q, want 200 ok", code, body)
	}
	var dbErr error
	var mu sync.Mutex
	if err := m.AddHealthCheck("db", func() error { mu.Lock(); defer mu.Unlock(); return dbErr }); err != nil {
		t.Fatal(err)
	}
	if err := m.AddHealthCheck("cache", func() error { return errors.New("cache is stale") }); err != nil {
		t.Fatal(err)
	}

	code, body := get(t, h, "/healthz")
	if code != http.StatusInternalServerError {
		t.Errorf("/healthz with a failing check = %d, want 500", code)
	}
	if !strings.Contains(body, "cache: cache is stale") || strings.Contains(body, "db") {
		t.Errorf("/healthz body %q should name the failing check only", body)
	}

	mu.Lock()
	dbErr = errors.New("connection refused")
	mu.Unlock()
	if _, body := get(t, h, "/healthz"); !strings.Contains(body, "cache: cache is stale; db: connection refused") {
		t.Errorf("/healthz body %q should list every failing check, sorted", body)
	}
}

// TestRunCacheSyncTimeout checks that informers that cannot sync fail Run
// within Options.CacheSyncTimeout, with an error naming them, and that the
// controllers that never started leave no goroutine behind.
func TestRunCacheSyncTimeout(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	kube := newCluster(t)
	failList(kube)
	m := newManager(t, kube, manager.Options{CacheSyncTimeout: 300 * time.Millisecond})
	cms, err := informer.For[*corev1.ConfigMap](m.Cache())
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if _, err := m.AddController("configmaps", rec, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = run(t, m).wait(t)
	if err == nil {
		t.Fatal("Run = nil, want a sync timeout error")
	}
	for _, want := range []string{"configmaps.v1 (*v1.ConfigMap)", "CacheSyncTimeout", "300ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if d := time.Since(began); d < 300*time.Millisecond {
		t.Errorf("Run failed after %v, before the 300ms timeout", d)
	}
	if m.Ready() {
		t.Error("Ready after a failed sync")
	}
	goleak.VerifyNone(t, leaks)
}

// TestRunStoppedBeforeSync checks that cancelling Run while the caches are
// still syncing is a clean shutdown.
func TestRunStoppedBeforeSync(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	kube := newCluster(t)
	var lists atomic.Int32
	kube.React(func(req *http.Request) (*http.Response, error) {
		if isList(req, "configmaps") {
			lists.Add(1)
		}
		return nil, nil
	})
	failList(kube)
	m := newManager(t, kube, manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](m.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddController("configmaps", newRecorder(), manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	running := run(t, m)
	eventually(t, "the informer to list", func() bool { return lists.Load() > 0 })
	if err := running.stop(t); err != nil {
		t.Errorf("Run cancelled before sync = %v, want nil", err)
	}
	goleak.VerifyNone(t, leaks)
}

func TestRunnableErrorStopsRun(t *testing.T) {
	errBoom := errors.New("boom")
	m := newManager(t, newCluster(t), manager.Options{})
	stopped := make(chan struct{})
	healthy := runnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		close(stopped)
		return nil
	})
	failing := runnableFunc(func(context.Context) error { return errBoom })
	for _, r := range []manager.Runnable{healthy, failing} {
		if err := m.Add(r); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	err := run(t, m).wait(t) // returns without its ctx being cancelled
	if !errors.Is(err, errBoom) {
		t.Fatalf("Run = %v, want the Runnable's error", err)
	}
	select {
	case <-stopped:
	default:
		t.Error("Run returned before the other Runnable stopped")
	}
}
