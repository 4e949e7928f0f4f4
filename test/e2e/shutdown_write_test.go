package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestShutdownInFlightWrite: a Reconcile in flight when Run's ctx is
// cancelled finishes (TestShutdownWaitsForInFlightReconcile), and a write
// it makes through the manager's client returns once the API server has
// answered and the cache reflects it, as at any other time: the cache
// must keep running until the controllers have stopped.
//
// Found by test/ha's graceful-exit sharding scenario: the cache stopped
// with Run's ctx, before the controllers, so such a write waited out the
// read-your-own-writes timeout (10s) and failed with a CacheLagError
// although the server had accepted it.
func TestShutdownInFlightWrite(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "slow", map[string]string{"gen": "1"}, nil)
	mgr := newManager(t, cfg, ns, manager.Options{ShutdownTimeout: stopTimeout})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	lister := cms.Lister()
	type result struct {
		err  error
		took time.Duration
	}
	var (
		calls   atomic.Int32
		entered = make(chan struct{})
		release = make(chan struct{})
		results = make(chan result, 1)
	)
	_, err = mgr.AddController("shutdown-write", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if calls.Add(1) > 1 {
			return reconcile.Result{}, nil
		}
		close(entered)
		<-release
		cached, err := lister.Get(req.Namespace, req.Name)
		if err != nil {
			results <- result{err: err}
			return reconcile.Result{}, nil
		}
		cm := cached.DeepCopy()
		cm.Data["written"] = "while shutting down"
		began := time.Now()
		err = mgr.Client().Update(ctx, cm)
		results <- result{err: err, took: time.Since(began)}
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatalf("Reconcile of %s/slow did not start within %v", ns, waitTimeout)
	}
	r.cancel()
	eventually(t, waitTimeout, func() bool { return !mgr.Ready() }, "Run to begin shutting down (Ready false)")
	unblock()
	select {
	case res := <-results:
		// A write answered at once, and reflected by a running cache,
		// takes milliseconds; the bug makes it 10s.
		if res.err != nil || res.took > 2*time.Second {
			t.Errorf("the in-flight Reconcile's write during shutdown returned %v after %v, want nil within 2s", res.err, res.took)
		}
	case <-time.After(stopTimeout):
		t.Fatalf("the in-flight Reconcile's write did not return within %v", stopTimeout)
	}
	if err := r.wait(t, stopTimeout); err != nil {
		t.Errorf("Run returned %v, want nil", err)
	}
}
