package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestFaultPanicOnOneObject: a Reconcile that panics on one object, again
// and again, while 30 others change twice. The others are reconciled at
// their last write while the panics go on; every panic is counted; the
// panicking object is retried with the per-item backoff (each gap at least
// 5ms·2^i, the default limiter's floor), and once it stops panicking the
// cache equals the server with nothing lost.
func TestFaultPanicOnOneObject(t *testing.T) {
	const (
		n      = 30
		panics = 8 // backoff 5ms·(1+2+...+128) ≈ 1.3s of retries
	)
	ns := newNamespace(t)
	fast := fastClient(t, cfg)
	names := createMany(t, fast, ns, "flow", n)
	if _, err := fast.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "boom", Namespace: ns},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Each panic logs its stack: keep eight of them out of the test log.
	mgr := newManager(t, cfg, ns, manager.Options{Logger: quietLogger()})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var (
		tr    seen
		mu    sync.Mutex
		booms []time.Time // start of each Reconcile of boom
	)
	boomCalls := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(booms)
	}
	_, err = mgr.AddController("panicky", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		now := time.Now()
		tr.reconciled(cms.Lister(), req)
		if req.Name != "boom" {
			return reconcile.Result{}, nil
		}
		mu.Lock()
		booms = append(booms, now)
		k := len(booms)
		mu.Unlock()
		if k <= panics {
			panic("injected: boom")
		}
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{Workers: 2}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)

	// Change the others while boom is still panicking.
	eventually(t, waitTimeout, func() bool { return len(boomCalls()) >= 2 }, "boom's first retry")
	updateAll(t, fast, ns, names, 1)
	updateAll(t, fast, ns, names, 2)
	othersDone := func() bool {
		for _, name := range names {
			if !tr.has(name, cmRV(t, fast, ns, name)) {
				return false
			}
		}
		return true
	}
	eventually(t, waitTimeout, othersDone, "the other %d objects to be reconciled at their last write", n)
	during := len(boomCalls())
	t.Logf("the others converged while boom had been tried %d times", during)
	if during > panics {
		t.Errorf("the others converged only after boom stopped panicking (%d calls): a panic held them up", during)
	}

	eventually(t, waitTimeout, func() bool { return len(boomCalls()) == panics+1 }, "boom's %d panics and a successful retry", panics)
	converged(t, waitTimeout, fast, ns, cms.Lister(), nil, &tr)

	calls := boomCalls()
	for i := 1; i < len(calls); i++ {
		gap, floor := calls[i].Sub(calls[i-1]), 5*time.Millisecond<<(i-1)
		t.Logf("retry %d after %v (backoff floor %v)", i, gap.Round(time.Millisecond), floor)
		if gap < floor {
			t.Errorf("retry %d came %v after the panic before it, want at least the backoff of %v", i, gap, floor)
		}
	}
	never(t, 300*time.Millisecond, func() bool { return len(boomCalls()) > panics+1 }, "boom to be tried again after it succeeded")

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	m := metricsOf(t, mgr)
	if v, _ := m.get("controller_runtime_reconcile_panics_total", "controller", "panicky"); v != panics {
		t.Errorf("controller_runtime_reconcile_panics_total = %v, want %d", v, panics)
	}
	if v, _ := m.get("controller_runtime_reconcile_errors_total", "controller", "panicky"); v != panics {
		t.Errorf("controller_runtime_reconcile_errors_total = %v, want %d", v, panics)
	}
}

// quietLogger drops every line. newManager replaces a zero Logger (which
// logr.Discard() is) with the test's logger, so tests that expect a flood
// of error lines use this instead.
func quietLogger() logr.Logger {
	return funcr.New(func(prefix, args string) {}, funcr.Options{})
}

// TestFaultShutdownMidBacklog: Run's ctx is cancelled while two workers are
// in 100ms Reconciles and 40 keys wait. The in-flight Reconciles finish
// (their ctx still live), no Reconcile starts once the controller has
// begun stopping (its "Stopping workers" log line, written after it stops
// handing out keys), Run returns nil well within ShutdownTimeout, and no
// goroutine of the manager is left.
func TestFaultShutdownMidBacklog(t *testing.T) {
	const (
		n        = 40
		cost     = 100 * time.Millisecond
		shutdown = 5 * time.Second
	)
	ns := newNamespace(t)
	fast := fastClient(t, cfg)
	createMany(t, fast, ns, "backlog", n)
	baseline := goleak.IgnoreCurrent()

	var (
		mu       sync.Mutex
		starts   []time.Time
		ends     []time.Time
		ctxDone  int
		stopping time.Time // when the controller logged that it stopped taking keys
	)
	log := funcr.New(func(prefix, args string) {
		if strings.Contains(args, `"Stopping workers`) {
			mu.Lock()
			if stopping.IsZero() {
				stopping = time.Now()
			}
			mu.Unlock()
		}
	}, funcr.Options{})
	mgr := newManager(t, cfg, ns, manager.Options{Logger: log, ShutdownTimeout: shutdown})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	_, err = mgr.AddController("backlog", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		time.Sleep(cost) // simulated work: a cost, not a wait for a condition
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			ctxDone++
		}
		ends = append(ends, time.Now())
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{Workers: 2}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	startedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(starts)
	}
	eventually(t, waitTimeout, func() bool { return startedCount() >= 4 }, "four Reconciles to start")
	cancelled, atCancel := time.Now(), startedCount()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil: the in-flight Reconciles fit in ShutdownTimeout", err)
	}
	took := r.at.Sub(cancelled)

	mu.Lock()
	defer mu.Unlock()
	t.Logf("cancelled after %d Reconciles had started; Run returned %v later; %d started, %d finished", atCancel, took.Round(time.Millisecond), len(starts), len(ends))
	if stopping.IsZero() {
		t.Fatal(`no "Stopping workers" log line`)
	}
	for i, s := range starts {
		if s.After(stopping) {
			t.Errorf("Reconcile %d started %v after the controller began stopping", i, s.Sub(stopping))
		}
	}
	if len(ends) != len(starts) {
		t.Errorf("%d Reconciles started but %d finished: Run returned with work in flight", len(starts), len(ends))
	}
	if len(starts) >= n {
		t.Errorf("all %d keys were reconciled: the backlog was worked off instead of left", len(starts))
	}
	if ctxDone != 0 {
		t.Errorf("%d in-flight Reconciles saw their ctx cancelled within ShutdownTimeout, want 0", ctxDone)
	}
	if took > shutdown {
		t.Errorf("Run returned %v after cancel, past ShutdownTimeout %v", took, shutdown)
	}
	goleak.VerifyNone(t, baseline)
}
