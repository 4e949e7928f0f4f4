package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// calls counts Reconcile calls per Request.
type calls struct {
	mu sync.Mutex
	n  map[reconcile.Request]int
}

func (c *calls) inc(r reconcile.Request) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[reconcile.Request]int)
	}
	c.n[r]++
	return c.n[r]
}

func (c *calls) get(r reconcile.Request) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[r]
}

// zeroDelay is a rate limiter that retries at once, so that a retry, if
// there is one, is queued before the worker calls Done.
type zeroDelay struct{ failures calls }

var _ workqueue.RateLimiter[reconcile.Request] = (*zeroDelay)(nil)

func (z *zeroDelay) When(r reconcile.Request) time.Duration { z.failures.inc(r); return 0 }

func (z *zeroDelay) NumRequeues(r reconcile.Request) int { return z.failures.get(r) }

func (z *zeroDelay) Forget(r reconcile.Request) {
	z.failures.mu.Lock()
	defer z.failures.mu.Unlock()
	delete(z.failures.n, r)
}

func TestErrorRetriedWithBackoffAndSuccessForgets(t *testing.T) {
	const failures = 3
	key := req("ns", "flaky")
	var (
		n    calls
		c    *reconcile.Controller
		mu   sync.Mutex
		seen []int // NumRequeues seen by each call
	)
	c, err := reconcile.New("flaky", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		seen = append(seen, c.Queue().NumRequeues(r))
		mu.Unlock()
		if n.inc(r) <= failures {
			return reconcile.Result{}, errBoom
		}
		return reconcile.Result{}, nil
	}), reconcile.Options{RateLimiter: fastLimiter()})
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	c.Enqueue(key)
	eventually(t, waitTimeout, func() bool { return n.get(key) == failures+1 }, "the key is reconciled until it succeeds")
	eventually(t, waitTimeout, func() bool { return c.Queue().NumRequeues(key) == 0 }, "success forgets the key's backoff")

	mu.Lock()
	defer mu.Unlock()
	want := []int{0, 1, 2, 3}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("NumRequeues seen by successive calls = %v, want %v", seen, want)
	}
}

// TestTerminalErrorNotRetried retries at once (zeroDelay), so a wrongly
// retried key would be queued again before the worker takes the next key;
// with one worker and a FIFO queue, reconciling a key enqueued by a later
// key's Reconcile proves the terminal key had its chance to come back.
func TestTerminalErrorNotRetried(t *testing.T) {
	terminal, later, last := req("ns", "terminal"), req("ns", "later"), req("ns", "last")
	var (
		n calls
		c *reconcile.Controller
	)
	c, err := reconcile.New("terminal", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		n.inc(r)
		switch r {
		case terminal:
			return reconcile.Result{}, reconcile.TerminalError(errBoom)
		case later:
			c.Enqueue(last)
		}
		return reconcile.Result{}, nil
	}), reconcile.Options{Workers: 1, RateLimiter: &zeroDelay{}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	c.Enqueue(terminal)
	eventually(t, waitTimeout, func() bool { return n.get(terminal) > 0 }, "the terminal key is reconciled")
	c.Enqueue(later)
	eventually(t, waitTimeout, func() bool { return n.get(last) > 0 }, "a key enqueued afterwards is reconciled")
	if got := n.get(terminal); got != 1 {
		t.Errorf("key with a terminal error reconciled %d times, want 1", got)
	}
	if got := c.Queue().NumRequeues(terminal); got != 0 {
		t.Errorf("NumRequeues after a terminal error = %d, want 0", got)
	}
}

// TestRequeueAfter runs in a synctest bubble: the hour passes at once, and
// exactly.
func TestRequeueAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := req("ns", "periodic")
		var n calls
		times := make(chan time.Time, 3)
		c, err := reconcile.New("periodic", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
			times <- time.Now()
			if n.inc(r) == 1 {
				return reconcile.Result{RequeueAfter: time.Hour}, nil
			}
			return reconcile.Result{}, nil
		}), reconcile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- c.Start(ctx) }()
		c.Enqueue(key)
		first := <-times
		select {
		case second := <-times:
			if got := second.Sub(first); got != time.Hour {
				t.Errorf("second reconcile came %v after the first, want 1h", got)
			}
		case <-time.After(24 * time.Hour): // fake time: returns at once if nothing is due
			t.Errorf("no second reconcile within a day of a RequeueAfter of 1h")
		}
		synctest.Wait()
		if len(times) != 0 {
			t.Errorf("reconciled again after a zero Result")
		}
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

func TestPanicRecoveredAndRetried(t *testing.T) {
	boom, next := req("ns", "boom"), req("ns", "next")
	var (
		n    calls
		mu   sync.Mutex
		logs []string
	)
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, args)
	}, funcr.Options{})
	reg, opts := newMetrics(t)
	opts.Workers = 1
	opts.RateLimiter = fastLimiter()
	opts.Logger = log
	c, err := reconcile.New("panicky", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		if n.inc(r) == 1 && r == boom {
			panic("kaboom")
		}
		return reconcile.Result{}, nil
	}), opts)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	c.Enqueue(boom)
	c.Enqueue(next)
	eventually(t, waitTimeout, func() bool { return n.get(next) == 1 }, "the worker survives the panic and reconciles the next key")
	eventually(t, waitTimeout, func() bool { return n.get(boom) == 2 }, "the panicking key is retried")

	if got := value(t, reg, "controller_runtime_reconcile_panics_total", map[string]string{"controller": "panicky"}); got != 1 {
		t.Errorf("controller_runtime_reconcile_panics_total = %v, want 1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	var found bool
	for _, l := range logs {
		if strings.Contains(l, "panic in Reconcile: kaboom") && strings.Contains(l, "goroutine") {
			found = true
		}
	}
	if !found {
		t.Errorf("no log line carries the panic and its stack; logs:\n%s", strings.Join(logs, "\n"))
	}
}

func TestLoggerAndReconcileID(t *testing.T) {
	type entry = map[string]any
	lines, log := newJSONLines(t, funcr.Options{})

	ids := make(chan types.UID, 2)
	c, err := reconcile.New("logged", reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
		logr.FromContextOrDiscard(ctx).Info("inside")
		ids <- reconcile.IDFromContext(ctx)
		return reconcile.Result{}, nil
	}), reconcile.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	keys := []reconcile.Request{req("ns-a", "obj-a"), req("ns-b", "obj-b")}
	var got []types.UID
	for _, k := range keys {
		c.Enqueue(k)
		got = append(got, receive(t, ids, "a reconcile"))
	}
	for i, id := range got {
		if id == "" {
			t.Errorf("reconcile %d: IDFromContext is empty", i)
		}
	}
	if got[0] == got[1] {
		t.Errorf("two reconciles share the reconcileID %q", got[0])
	}

	entries := lines.all()
	var inside []entry
	for _, e := range entries {
		if e["msg"] == "inside" {
			inside = append(inside, e)
		}
	}
	if len(inside) != len(keys) {
		t.Fatalf("got %d log lines from Reconcile, want %d: %v", len(inside), len(keys), entries)
	}
	for i, k := range keys {
		want := entry{"controller": "logged", "namespace": k.Namespace, "name": k.Name, "reconcileID": string(got[i])}
		for key, v := range want {
			if inside[i][key] != v {
				t.Errorf("reconcile of %v: log key %q = %v, want %v (line %v)", k, key, inside[i][key], v, inside[i])
			}
		}
	}
}

// TestTimeout runs in a synctest bubble so the deadline can be checked
// exactly and the minute passes at once.
func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seen struct {
			left    time.Duration // deadline minus start
			hasDl   bool
			err     error // ctx.Err() once ctx is done
			elapsed time.Duration
		}
		out := make(chan seen, 1)
		c, err := reconcile.New("bounded", reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			begin := time.Now()
			dl, ok := ctx.Deadline()
			select {
			case <-ctx.Done():
			case <-time.After(time.Hour): // fake time: fails fast if ctx never ends
			}
			out <- seen{left: dl.Sub(begin), hasDl: ok, err: ctx.Err(), elapsed: time.Since(begin)}
			return reconcile.Result{}, nil
		}), reconcile.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- c.Start(ctx) }()
		c.Enqueue(req("ns", "slow"))
		s := <-out
		if !s.hasDl || s.left != time.Minute {
			t.Errorf("Reconcile ctx deadline = (%v after start, %v), want (1m, true)", s.left, s.hasDl)
		}
		if !errors.Is(s.err, context.DeadlineExceeded) || s.elapsed != time.Minute {
			t.Errorf("Reconcile ctx done after %v with %v, want after 1m with %v", s.elapsed, s.err, context.DeadlineExceeded)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

// TestConcurrentEnqueue hammers a small key set from many producers. It
// checks the two promises that matter: a key is never reconciled by two
// workers at once, and every key is reconciled after its last Enqueue.
func TestConcurrentEnqueue(t *testing.T) {
	const (
		workers   = 8
		producers = 8
		perProd   = 300
		numKeys   = 5
	)
	keys := make([]reconcile.Request, numKeys)
	for i := range keys {
		keys[i] = req("ns", fmt.Sprintf("key-%d", i))
	}
	var (
		mu        sync.Mutex
		seq       int64
		lastEnq   = make(map[reconcile.Request]int64)
		lastStart = make(map[reconcile.Request]int64)
		inFlight  = make(map[reconcile.Request]bool)
		active    int
		maxActive int
		overlaps  atomic.Int64
	)
	c, err := reconcile.New("stress", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		seq++
		lastStart[r] = seq
		if inFlight[r] {
			overlaps.Add(1)
		}
		inFlight[r] = true
		active++
		maxActive = max(maxActive, active)
		mu.Unlock()

		runtime.Gosched() // widen the window in which an overlap would show

		mu.Lock()
		inFlight[r] = false
		active--
		mu.Unlock()
		if rand.IntN(10) == 0 {
			return reconcile.Result{}, errBoom // exercise the rate-limited path too
		}
		return reconcile.Result{}, nil
	}), reconcile.Options{Workers: workers, RateLimiter: fastLimiter()})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, c)

	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for range perProd {
				k := keys[rand.IntN(numKeys)]
				mu.Lock()
				seq++
				lastEnq[k] = seq
				mu.Unlock()
				c.Enqueue(k)
				runtime.Gosched() // let workers run between enqueues
			}
		})
	}
	wg.Wait()

	eventually(t, waitTimeout, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if e, ok := lastEnq[k]; ok && lastStart[k] <= e {
				return false
			}
		}
		return true
	}, "every key is reconciled after its last Enqueue")
	if err := s.stop(t); err != nil {
		t.Errorf("Start: %v", err)
	}
	if n := overlaps.Load(); n > 0 {
		t.Errorf("a key was reconciled by two workers at once %d times", n)
	}
	t.Logf("up to %d reconciles ran at once", maxActive)
}

func TestShutdownWaitsForInFlightReconcile(t *testing.T) {
	blocked, waiting := req("ns", "blocked"), req("ns", "waiting")
	var n calls
	entered := make(chan struct{})
	release := make(chan struct{})
	ctxErr := make(chan error, 1)
	reg, opts := newMetrics(t)
	opts.Workers = 1
	c, err := reconcile.New("graceful", reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
		n.inc(r)
		if r == blocked {
			close(entered)
			<-release
			ctxErr <- ctx.Err()
		}
		return reconcile.Result{}, nil
	}), opts)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, c)
	c.Enqueue(blocked)
	receive(t, entered, "the reconcile to start")
	c.Enqueue(waiting) // queued behind the in-flight key; must not run once shutdown begins
	ctl := map[string]string{"controller": "graceful"}
	if got := value(t, reg, "controller_runtime_active_workers", ctl); got != 1 {
		t.Errorf("controller_runtime_active_workers during a reconcile = %v, want 1", got)
	}

	s.cancel()
	eventually(t, waitTimeout, c.Queue().ShuttingDown, "shutdown begins")
	select {
	case err := <-s.errc:
		t.Fatalf("Start returned %v while a reconcile was in flight", err)
	default:
	}
	close(release)
	if err := s.stop(t); err != nil {
		t.Errorf("Start = %v, want nil after the in-flight reconcile finished", err)
	}
	if err := receive(t, ctxErr, "the reconcile's ctx error"); err != nil {
		t.Errorf("in-flight reconcile's ctx was cancelled (%v) within the shutdown timeout", err)
	}
	if got := n.get(waiting); got != 0 {
		t.Errorf("a key still waiting at shutdown was reconciled %d times, want 0", got)
	}
	if got := value(t, reg, "controller_runtime_active_workers", ctl); got != 0 {
		t.Errorf("controller_runtime_active_workers after Start returned = %v, want 0", got)
	}
}

// TestStopTimeout runs in a synctest bubble: the timeouts pass at once and
// exactly, and the bubble fails the test if a worker outlives it.
func TestStopTimeout(t *testing.T) {
	tests := []struct {
		name  string
		cause error // of Start's ctx
		opts  reconcile.Options
		// wantWait is how long Start waits for the stuck reconcile.
		wantWait time.Duration
		// wantCancelAt is when the stuck reconcile's ctx is cancelled,
		// after Start's ctx.
		wantCancelAt time.Duration
		// wantCause is in the stuck reconcile's context.Cause.
		wantCause string
	}{
		{
			name:     "shutdown",
			cause:    context.Canceled,
			opts:     reconcile.Options{ShutdownTimeout: 5 * time.Second, AbortTimeout: time.Hour},
			wantWait: 5 * time.Second, wantCancelAt: 5 * time.Second,
			wantCause: "shutdown timeout of 5s exceeded",
		},
		{
			name:     "abort",
			cause:    fmt.Errorf("%w: lease lost", reconcile.ErrAborted),
			opts:     reconcile.Options{ShutdownTimeout: time.Hour, AbortTimeout: 2 * time.Second},
			wantWait: 2 * time.Second, wantCancelAt: 0,
			wantCause: reconcile.ErrAborted.Error() + ": lease lost",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stuckKey, waitingKey := req("ns", "stuck"), req("ns", "waiting")
				var n calls
				entered := make(chan context.Context, 1)
				cancelledAt := make(chan time.Time, 1)
				release := make(chan struct{})
				c, err := reconcile.New("stubborn", reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
					if n.inc(r) == 1 && r == stuckKey {
						entered <- ctx
						go func() { <-ctx.Done(); cancelledAt <- time.Now() }()
						<-release // ignores ctx
					}
					return reconcile.Result{}, nil
				}), tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancelCause(t.Context())
				errc := make(chan error, 1)
				go func() { errc <- c.Start(ctx) }()
				c.Enqueue(stuckKey)
				rctx := <-entered
				c.Enqueue(waitingKey)

				begin := time.Now()
				cancel(tt.cause)
				err = <-errc
				if err == nil || !strings.Contains(err.Error(), "still running") {
					t.Errorf("Start = %v, want an error saying reconciles are still running", err)
				}
				if got := time.Since(begin); got != tt.wantWait {
					t.Errorf("Start returned %v after cancellation, want %v", got, tt.wantWait)
				}
				if at := (<-cancelledAt).Sub(begin); at != tt.wantCancelAt {
					t.Errorf("the stuck reconcile's ctx was cancelled %v after Start's, want %v", at, tt.wantCancelAt)
				}
				if cause := context.Cause(rctx); cause == nil || !strings.Contains(cause.Error(), tt.wantCause) {
					t.Errorf("the stuck reconcile's ctx cause = %v, want it to say %q", cause, tt.wantCause)
				}

				// Until the stuck reconcile returns, the controller is still
				// running: a new Start would reconcile its key twice at once.
				if err := c.Start(ctx); err == nil || !strings.Contains(err.Error(), "already running") {
					t.Errorf("Start while a reconcile is still stuck = %v, want an error saying it is already running", err)
				}
				close(release)
				synctest.Wait() // the stuck worker ends

				if got := n.get(waitingKey); got != 0 {
					t.Errorf("a key waiting when Start's ctx was cancelled was reconciled %d times, want 0", got)
				}
				ctx2, cancel2 := context.WithCancel(t.Context())
				go func() { errc <- c.Start(ctx2) }()
				c.Enqueue(stuckKey)
				synctest.Wait()
				if got := n.get(stuckKey); got != 2 {
					t.Errorf("after the stuck reconcile returned, a restart reconciled its key %d times in all, want 2", got)
				}
				cancel2()
				if err := <-errc; err != nil {
					t.Errorf("restarted Start: %v", err)
				}
			})
		})
	}
}

func TestStartWhileRunning(t *testing.T) {
	var n calls
	c, err := reconcile.New("once", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		n.inc(r)
		return reconcile.Result{}, nil
	}), reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	key := req("ns", "obj")
	c.Enqueue(key)
	eventually(t, waitTimeout, func() bool { return n.get(key) == 1 }, "the controller runs")

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // so that a wrongly accepted Start returns at once
	if err := c.Start(ctx); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("Start while running = %v, want an error saying it is already running", err)
	}
	c.Enqueue(key)
	eventually(t, waitTimeout, func() bool { return n.get(key) == 2 }, "the first Start still runs")
}

func TestRestart(t *testing.T) {
	var n calls
	c, err := reconcile.New("restartable", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		n.inc(r)
		return reconcile.Result{}, nil
	}), reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first, between, second := req("ns", "first"), req("ns", "between"), req("ns", "second")

	s := start(t, c)
	c.Enqueue(first)
	eventually(t, waitTimeout, func() bool { return n.get(first) == 1 }, "the first run reconciles")
	if err := s.stop(t); err != nil {
		t.Fatalf("first Start: %v", err)
	}
	c.Enqueue(between) // kept for the next run

	s = start(t, c)
	c.Enqueue(second)
	eventually(t, waitTimeout, func() bool { return n.get(between) == 1 && n.get(second) == 1 }, "the second run reconciles keys enqueued before and during it")
	if err := s.stop(t); err != nil {
		t.Errorf("second Start: %v", err)
	}
}

func TestRestartWithOwnQueueFails(t *testing.T) {
	q, err := workqueue.New(workqueue.Options[reconcile.Request]{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := reconcile.New("borrowed", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), reconcile.Options{Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	if c.Queue() != workqueue.Interface[reconcile.Request](q) {
		t.Errorf("Queue() is not Options.Queue")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("first Start: %v", err)
	}
	if err := c.Start(ctx); err == nil || !strings.Contains(err.Error(), "cannot restart") {
		t.Errorf("Start again with a shut-down Options.Queue = %v, want an error saying it cannot restart", err)
	}
}

// TestStopLeavesNoStaleState stops a controller with keys still waiting,
// then starts it again: the new run's queue depth and event latencies must
// not carry the old run's leftovers.
func TestStopLeavesNoStaleState(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
	reg, opts := newMetrics(t)
	opts.Workers = 1
	opts.Clock = clk
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	blocked := req("ns", "blocked")
	var n calls
	c, err := reconcile.New("restarted", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		if n.inc(r) == 1 && r == blocked {
			entered <- struct{}{}
			<-release
		}
		return reconcile.Result{}, nil
	}), opts)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, c)
	c.Enqueue(blocked)
	receive(t, entered, "the reconcile to start")
	waiting := []reconcile.Request{req("ns", "w1"), req("ns", "w2"), req("ns", "w3")}
	for _, r := range waiting {
		c.Enqueue(r)
	}
	s.cancel()
	eventually(t, waitTimeout, c.Queue().ShuttingDown, "shutdown begins")
	close(release)
	if err := s.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	queue := map[string]string{"name": "restarted"}
	if got := value(t, reg, "workqueue_depth", queue); got != 0 {
		t.Errorf("workqueue_depth once stopped = %v, want 0: the fresh queue is empty", got)
	}

	clk.SetTime(clk.Now().Add(time.Hour)) // the keys left behind are an hour old
	s = start(t, c)
	for _, r := range waiting {
		c.Enqueue(r)
	}
	eventually(t, waitTimeout, func() bool {
		for _, r := range waiting {
			if n.get(r) != 1 {
				return false
			}
		}
		return true
	}, "the re-enqueued keys are reconciled")
	if err := s.stop(t); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	ctl := map[string]string{"controller": "restarted"}
	if m := series(t, reg, "ctrlkit_event_to_reconcile_seconds", ctl); m.GetHistogram().GetSampleSum() != 0 {
		t.Errorf("ctrlkit_event_to_reconcile_seconds sums %vs, want 0: the clock did not move after the keys were re-enqueued", m.GetHistogram().GetSampleSum())
	}
	if got := value(t, reg, "workqueue_depth", queue); got != 0 {
		t.Errorf("workqueue_depth after the second run = %v, want 0", got)
	}
}

func TestNoGoroutinesAfterStart(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	_, opts := newMetrics(t) // queue metrics start the unfinished-work goroutine too
	opts.Workers = 4
	opts.RateLimiter = fastLimiter()
	var n calls
	done := make(chan struct{})
	c, err := reconcile.New("leakless", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		switch n.inc(r) {
		case 1:
			return reconcile.Result{}, errBoom // a rate-limited retry
		case 2:
			close(done)
			return reconcile.Result{RequeueAfter: time.Hour}, nil // a delayed key still pending at shutdown
		}
		return reconcile.Result{}, nil
	}), opts)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, c)
	c.Enqueue(req("ns", "obj"))
	receive(t, done, "the retry")
	if err := s.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	goleak.VerifyNone(t, ignore)
}

// TestOrder holds the only worker on a first key while the others are
// enqueued, then checks the order in which they are reconciled.
func TestOrder(t *testing.T) {
	type add struct {
		key reconcile.Request
		p   workqueue.Priority
	}
	tests := []struct {
		name string
		adds []add
		want []reconcile.Request
	}{
		{
			name: "namespaces take turns",
			adds: []add{
				{req("busy", "1"), workqueue.PriorityNormal},
				{req("busy", "2"), workqueue.PriorityNormal},
				{req("busy", "3"), workqueue.PriorityNormal},
				{req("quiet", "1"), workqueue.PriorityNormal},
			},
			want: []reconcile.Request{req("busy", "1"), req("quiet", "1"), req("busy", "2"), req("busy", "3")},
		},
		{
			name: "higher priorities first",
			adds: []add{
				{req("ns", "resync"), workqueue.PriorityLow},
				{req("ns", "event"), workqueue.PriorityNormal},
				{req("ns", "urgent"), workqueue.PriorityHigh},
			},
			want: []reconcile.Request{req("ns", "urgent"), req("ns", "event"), req("ns", "resync")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocker := req("blocker", "0")
			entered := make(chan struct{})
			release := make(chan struct{})
			var (
				mu  sync.Mutex
				got []reconcile.Request
			)
			c, err := reconcile.New("ordered", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
				if r == blocker {
					close(entered)
					<-release
					return reconcile.Result{}, nil
				}
				mu.Lock()
				defer mu.Unlock()
				got = append(got, r)
				return reconcile.Result{}, nil
			}), reconcile.Options{Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			s := start(t, c)
			c.Enqueue(blocker)
			receive(t, entered, "the blocking reconcile")
			for _, a := range tt.adds {
				c.EnqueuePriority(a.key, a.p)
			}
			close(release)
			eventually(t, waitTimeout, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) == len(tt.want)
			}, "every key is reconciled")
			if err := s.stop(t); err != nil {
				t.Fatalf("Start: %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("reconciled in order %v, want %v", got, tt.want)
			}
		})
	}
}

// TestConflictIsRetriedQuietly: a conflict (the cache was behind the
// server) is retried and counted as an error, but logged at V(1), not as
// an error line.
func TestConflictIsRetriedQuietly(t *testing.T) {
	var (
		n    calls
		mu   sync.Mutex
		logs []string
	)
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, prefix+" "+args)
	}, funcr.Options{Verbosity: 0})
	reg, opts := newMetrics(t)
	opts.RateLimiter = fastLimiter()
	opts.Logger = log
	k := req("ns", "contested")
	c, err := reconcile.New("conflicted", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		if n.inc(r) == 1 {
			return reconcile.Result{}, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, r.Name, errors.New("the object has been modified"))
		}
		return reconcile.Result{}, nil
	}), opts)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	c.Enqueue(k)
	eventually(t, waitTimeout, func() bool { return n.get(k) == 2 }, "the conflicted key is retried")
	if got := value(t, reg, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "conflicted"}); got != 1 {
		t.Errorf("controller_runtime_reconcile_errors_total = %v, want 1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range logs {
		if strings.Contains(l, "contested") && (strings.Contains(l, "Reconciler error") || strings.Contains(l, "Conflict")) {
			t.Errorf("a conflict was logged at the default verbosity: %s", l)
		}
	}
}
