package e2e

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cgworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// resultsController returns a manager for a new namespace with a
// controller name that watches the namespace's ConfigMaps and calls r, with
// one worker and a per-item exponential backoff starting at base; and the
// namespace and the controller. The caller starts the manager.
func resultsController(t *testing.T, name string, base time.Duration, r reconcile.Func) (string, *manager.Manager, *reconcile.Controller) {
	t.Helper()
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := mgr.AddController(name, r, manager.ControllerOptions{
		RateLimiter: cgworkqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](base, time.Second),
	}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	return ns, mgr, ctrl
}

// TestErrorIsRetriedWithBackoff: a Reconcile that fails is retried through
// the controller's rate limiter, each retry after a longer wait, until it
// succeeds; success resets the backoff.
func TestErrorIsRetriedWithBackoff(t *testing.T) {
	const (
		base     = 20 * time.Millisecond
		failures = 4
	)
	type attempt struct {
		start, end time.Time
		requeues   int // NumRequeues when the attempt began
	}
	var (
		ctrl     *reconcile.Controller // set before Run starts
		calls    atomic.Int32
		attempts = make(chan attempt, 100)
	)
	ns, mgr, ctrl := resultsController(t, "retry", base, func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		a := attempt{start: time.Now(), requeues: ctrl.Queue().NumRequeues(req)}
		n := calls.Add(1)
		a.end = time.Now()
		attempts <- a
		if n <= failures {
			return reconcile.Result{}, errors.New("transient failure")
		}
		return reconcile.Result{}, nil
	})
	r := start(t, mgr)
	createConfigMap(t, ns, "flaky", nil, nil)

	var got []attempt
	eventually(t, waitTimeout, func() bool {
		for len(attempts) > 0 {
			got = append(got, <-attempts)
		}
		return len(got) == failures+1
	}, "%d failing attempts and a successful one", failures)
	req := key(ns, "flaky")
	eventually(t, waitTimeout, func() bool { return ctrl.Queue().NumRequeues(req) == 0 }, "the backoff of %s to be forgotten after success", req)

	for i, a := range got {
		if a.requeues != i {
			t.Errorf("attempt %d began with NumRequeues %d, want %d", i, a.requeues, i)
		}
		if i == 0 {
			continue
		}
		// The limiter's delay before retry i is base*2^(i-1); the retry
		// cannot start earlier than that after the failed attempt ended.
		gap, min := a.start.Sub(got[i-1].end), base<<(i-1)
		t.Logf("retry %d after %v (backoff %v)", i, gap, min)
		if gap < min {
			t.Errorf("retry %d began %v after the failure, want at least the backoff of %v", i, gap, min)
		}
	}

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	m := metricsOf(t, r.mgr)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"controller_runtime_reconcile_total", []string{"controller", "retry", "result", "error"}, failures},
		{"controller_runtime_reconcile_total", []string{"controller", "retry", "result", "success"}, 1},
		{"controller_runtime_reconcile_errors_total", []string{"controller", "retry"}, failures},
		{"workqueue_retries_total", []string{"name", "retry"}, failures},
	} {
		if v, ok := m.get(c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
}

// TestRequeueAfterIsHonoured: Result.RequeueAfter reconciles the key again,
// and not before the requested delay.
func TestRequeueAfterIsHonoured(t *testing.T) {
	const delay = 400 * time.Millisecond
	type attempt struct{ start, end time.Time }
	var calls atomic.Int32
	attempts := make(chan attempt, 100)
	ns, mgr, _ := resultsController(t, "requeue", time.Millisecond, func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		a := attempt{start: time.Now()}
		first := calls.Add(1) == 1
		a.end = time.Now()
		attempts <- a
		if first {
			return reconcile.Result{RequeueAfter: delay}, nil
		}
		return reconcile.Result{}, nil
	})
	r := start(t, mgr)
	createConfigMap(t, ns, "later", nil, nil)

	var got []attempt
	eventually(t, waitTimeout, func() bool {
		for len(attempts) > 0 {
			got = append(got, <-attempts)
		}
		return len(got) >= 2
	}, "the requeued second Reconcile")
	gap := got[1].start.Sub(got[0].end)
	t.Logf("requeued after %v (RequeueAfter %v)", gap, delay)
	if gap < delay {
		t.Errorf("second Reconcile began %v after the first returned RequeueAfter %v; want no earlier than the delay", gap, delay)
	}

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if v, ok := metricsOf(t, r.mgr).get("controller_runtime_reconcile_total", "controller", "requeue", "result", "requeue_after"); v != 1 {
		t.Errorf(`controller_runtime_reconcile_total{result="requeue_after"} = %v (present %v), want 1`, v, ok)
	}
}

// TestTerminalErrorIsNotRetried: a TerminalError ends the key's retries at
// once (the worker moves on to later keys and never calls it again) until
// the object's next event.
func TestTerminalErrorIsNotRetried(t *testing.T) {
	rec := &recorder{}
	var ctrl *reconcile.Controller // set before Run starts
	ns, mgr, ctrl := resultsController(t, "terminal", time.Millisecond, func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		rec.add(req, time.Now(), "")
		if req.Name == "bad" {
			return reconcile.Result{}, reconcile.TerminalError(errors.New("spec is invalid"))
		}
		return reconcile.Result{}, nil
	})
	r := start(t, mgr)
	bad := key(ns, "bad")
	createConfigMap(t, ns, "bad", nil, nil)
	eventually(t, waitTimeout, func() bool { return rec.count(bad) >= 1 }, "the first Reconcile of %s", bad)

	// With a 1ms backoff a retry would come long before a key created
	// after the terminal failure; one worker serves keys in turn. Three
	// later keys are each reconciled while bad stays at one call.
	for _, name := range []string{"after-1", "after-2", "after-3"} {
		createConfigMap(t, ns, name, nil, nil)
		eventually(t, waitTimeout, func() bool { return rec.count(key(ns, name)) == 1 }, "Reconcile of %s/%s", ns, name)
		if n := rec.count(bad); n != 1 {
			t.Fatalf("%s was reconciled %d times by the time %s/%s was; a terminal error must not be retried", bad, n, ns, name)
		}
		if n := ctrl.Queue().NumRequeues(bad); n != 0 {
			t.Fatalf("NumRequeues(%s) = %d after a terminal error, want 0 (no rate-limited retry)", bad, n)
		}
	}

	// The object's next event reconciles it again.
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "bad", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"fixed": "yes"}
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, func() bool { return rec.count(bad) == 2 }, "an update of %s to reconcile it again", bad)

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	m := metricsOf(t, r.mgr)
	if v, ok := m.get("controller_runtime_terminal_reconcile_errors_total", "controller", "terminal"); v != 2 {
		t.Errorf("controller_runtime_terminal_reconcile_errors_total = %v (present %v), want 2", v, ok)
	}
	if v, ok := m.get("workqueue_retries_total", "name", "terminal"); v != 0 {
		t.Errorf("workqueue_retries_total = %v (present %v), want 0", v, ok)
	}
}

// TestPanicIsRecovered: a panicking Reconcile does not take its worker down:
// the panic is counted, the key is retried, and other keys still reconcile.
func TestPanicIsRecovered(t *testing.T) {
	rec := &recorder{}
	ns, mgr, _ := resultsController(t, "panics", time.Millisecond, func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if rec.add(req, time.Now(), "") == 0 && req.Name == "boom" {
			panic("boom")
		}
		return reconcile.Result{}, nil
	})
	r := start(t, mgr)
	boom, next := key(ns, "boom"), key(ns, "next")
	createConfigMap(t, ns, "boom", nil, nil)
	eventually(t, waitTimeout, func() bool { return rec.count(boom) >= 1 }, "the panicking Reconcile of %s", boom)
	createConfigMap(t, ns, "next", nil, nil)
	eventually(t, waitTimeout, func() bool { return rec.count(next) == 1 }, "%s to reconcile on the only worker after the panic", next)
	eventually(t, waitTimeout, func() bool { return rec.count(boom) == 2 }, "%s to be retried after its panic", boom)

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	m := metricsOf(t, r.mgr)
	if v, ok := m.get("controller_runtime_reconcile_panics_total", "controller", "panics"); v != 1 {
		t.Errorf("controller_runtime_reconcile_panics_total = %v (present %v), want 1", v, ok)
	}
	if v, ok := m.get("controller_runtime_reconcile_errors_total", "controller", "panics"); v != 1 {
		t.Errorf("controller_runtime_reconcile_errors_total = %v (present %v), want 1", v, ok)
	}
}

// TestReconcileTimeout: ControllerOptions.Timeout bounds each Reconcile
// through its ctx.
func TestReconcileTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		err     error
		elapsed time.Duration
	}
	done := make(chan outcome, 10)
	_, err = mgr.AddController("timeout", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		start := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(waitTimeout):
		}
		done <- outcome{ctx.Err(), time.Since(start)}
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{Timeout: timeout}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	createConfigMap(t, ns, "slow", nil, nil)
	select {
	case o := <-done:
		t.Logf("Reconcile's ctx ended after %v: %v", o.elapsed, o.err)
		if !errors.Is(o.err, context.DeadlineExceeded) {
			t.Errorf("Reconcile's ctx ended with %v, want context.DeadlineExceeded after Timeout %v", o.err, timeout)
		}
		if o.elapsed < timeout {
			t.Errorf("Reconcile's ctx ended after %v, before Timeout %v", o.elapsed, timeout)
		}
	case <-time.After(2 * waitTimeout):
		t.Fatal("Reconcile did not return")
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
}
