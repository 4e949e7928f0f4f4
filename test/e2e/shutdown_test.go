package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestShutdownWaitsForInFlightReconcile: cancelling Run's ctx stops new
// work, but Run returns only after the Reconcile in progress has finished
// (its ctx still live within the shutdown timeout), then returns nil, and
// leaves no goroutine behind: informers, workers, queue and HTTP server are
// all joined.
func TestShutdownWaitsForInFlightReconcile(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "slow", nil, nil)
	// Everything running now (the envtest control plane's helpers, the
	// admin clients' connection to the API server, earlier tests' leftovers
	// still winding down) is not this manager's.
	baseline := goleak.IgnoreCurrent()

	mgr := newManager(t, cfg, ns, manager.Options{ShutdownTimeout: stopTimeout, HTTPAddr: "127.0.0.1:0"})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var (
		calls      atomic.Int32
		entered    = make(chan struct{})
		release    = make(chan struct{})
		ctxErr     atomic.Value // error of the Reconcile's ctx when released
		returnedAt atomic.Int64 // UnixNano when Reconcile returned
	)
	_, err = mgr.AddController("shutdown", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if calls.Add(1) > 1 {
			return reconcile.Result{}, nil // one object, one call: checked at the end
		}
		close(entered)
		<-release
		ctxErr.Store(errOrNil{ctx.Err()})
		returnedAt.Store(time.Now().UnixNano())
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // before Run is stopped, should the test fail early
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatalf("Reconcile of %s/slow did not start within %v", ns, waitTimeout)
	}
	if code, _, err := get(mgr.Addr().String(), "/readyz"); err != nil || code != http.StatusOK {
		t.Fatalf("GET /readyz while a Reconcile runs: %d %v, want 200", code, err)
	}

	r.cancel()
	// Ready turns false when Run begins to shut down; from then on nothing
	// but the blocked Reconcile keeps it from returning.
	eventually(t, waitTimeout, func() bool { return !mgr.Ready() }, "Run to begin shutting down (Ready false)")
	if code, _, err := get(mgr.Addr().String(), "/readyz"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz while shutting down: %d %v, want 503", code, err)
	}
	never(t, 500*time.Millisecond, r.returned, "Run returning while a Reconcile is in flight")
	unblock()
	if err := r.wait(t, stopTimeout); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}

	if at := returnedAt.Load(); at == 0 || r.at.UnixNano() < at {
		t.Errorf("Run returned at %v, before the in-flight Reconcile returned (%v)", r.at, time.Unix(0, at))
	}
	if v, _ := ctxErr.Load().(errOrNil); v.err != nil {
		t.Errorf("the in-flight Reconcile's ctx was done (%v) within the shutdown timeout; it should stay live", v.err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("Reconcile called %d times for one unchanged object, want 1", n)
	}
	goleak.VerifyNone(t, baseline)
}

// errOrNil lets an atomic.Value hold a nil error.
type errOrNil struct{ err error }

// TestShutdownTimeoutCancelsStuckReconcile: a Reconcile that outlives
// Options.ShutdownTimeout gets its ctx cancelled, and Run returns an error
// that says so instead of hanging.
func TestShutdownTimeoutCancelsStuckReconcile(t *testing.T) {
	const grace = 300 * time.Millisecond
	ns := newNamespace(t)
	createConfigMap(t, ns, "stuck", nil, nil)
	mgr := newManager(t, cfg, ns, manager.Options{ShutdownTimeout: grace})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	entered := make(chan struct{})
	cancelled := make(chan error, 1)
	_, err = mgr.AddController("stuck", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if calls.Add(1) > 1 {
			return reconcile.Result{}, nil
		}
		close(entered)
		<-ctx.Done() // ignores shutdown until its own ctx ends
		cancelled <- ctx.Err()
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatalf("Reconcile of %s/stuck did not start within %v", ns, waitTimeout)
	}
	stopped := time.Now()
	err = r.stop(t)
	t.Logf("Run returned after %v: %v", time.Since(stopped), err)
	if err == nil || !strings.Contains(err.Error(), "stuck") || !strings.Contains(err.Error(), "still running") {
		t.Errorf("Run returned %v, want an error naming controller \"stuck\" and saying reconciles were still running", err)
	}
	if d := time.Since(stopped); d < grace {
		t.Errorf("Run returned %v after cancel, before the shutdown timeout of %v", d, grace)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("stuck Reconcile's ctx ended with %v, want context.Canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the stuck Reconcile's ctx was not cancelled after the shutdown timeout")
	}
}

// TestCancelBeforeSync: cancelling Run while the caches are still syncing
// (a list held back by a gate) is a clean stop: Run returns nil without
// having started a worker, and leaves no goroutine behind.
func TestCancelBeforeSync(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "pre", nil, nil)
	baseline := goleak.IgnoreCurrent()
	g := newGate("/api/v1/namespaces/" + ns + "/configmaps")
	mgr := newManager(t, g.config(cfg), ns, manager.Options{HTTPAddr: "127.0.0.1:0"})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	_, err = mgr.AddController("never-synced", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		calls.Add(1)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	select {
	case <-g.hit:
	case <-time.After(waitTimeout):
		t.Fatal("the ConfigMap informer never listed")
	}
	if err := r.stop(t); err != nil {
		t.Errorf("Run cancelled before sync returned %v, want nil", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d Reconcile calls although the cache never synced", n)
	}
	goleak.VerifyNone(t, baseline)
}

// runnableFunc adapts a function to manager.Runnable.
type runnableFunc func(ctx context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }

// TestRunnables: Runnables start once the caches have synced; one that
// returns ctx.Err() on shutdown stops cleanly; one that fails stops the
// whole manager, whose Run returns its error, leaving nothing running.
func TestRunnables(t *testing.T) {
	t.Run("ctx.Err on shutdown is a clean stop", func(t *testing.T) {
		ns := newNamespace(t)
		mgr := newManager(t, cfg, ns, manager.Options{})
		if _, err := informer.For[*corev1.ConfigMap](mgr.Cache()); err != nil {
			t.Fatal(err)
		}
		started := make(chan bool, 1)
		if err := mgr.Add(runnableFunc(func(ctx context.Context) error {
			started <- mgr.Ready()
			<-ctx.Done()
			return ctx.Err()
		})); err != nil {
			t.Fatal(err)
		}
		r := start(t, mgr)
		select {
		case ready := <-started:
			if !ready {
				t.Errorf("Runnable started before the caches synced")
			}
		case <-time.After(waitTimeout):
			t.Fatal("Runnable did not start")
		}
		if err := r.stop(t); err != nil {
			t.Errorf("Run returned %v, want nil: the Runnable returned ctx.Err() on shutdown", err)
		}
	})

	t.Run("an error stops the manager", func(t *testing.T) {
		ns := newNamespace(t)
		baseline := goleak.IgnoreCurrent()
		mgr := newManager(t, cfg, ns, manager.Options{})
		cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mgr.AddController("bystander", nop, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
			t.Fatal(err)
		}
		failure := errors.New("runnable failed")
		if err := mgr.Add(runnableFunc(func(ctx context.Context) error { return failure })); err != nil {
			t.Fatal(err)
		}
		r := start(t, mgr)
		err = r.wait(t, waitTimeout)
		if !errors.Is(err, failure) {
			t.Errorf("Run returned %v, want the Runnable's error", err)
		}
		goleak.VerifyNone(t, baseline)
	})
}
