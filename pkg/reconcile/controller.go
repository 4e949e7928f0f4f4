package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/clock"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// DefaultShutdownTimeout is how long Start waits for in-flight reconciles
// after its context is cancelled, unless Options.ShutdownTimeout says
// otherwise.
const DefaultShutdownTimeout = 30 * time.Second

// DefaultAbortTimeout is how long Start waits for in-flight reconciles after
// an abort, unless Options.AbortTimeout says otherwise.
const DefaultAbortTimeout = 5 * time.Second

// ErrAborted, as the cause of Start's context (context.WithCancelCause),
// makes Start stop at once instead of gracefully: no Reconcile starts after
// the cancellation is observed, in-flight reconciles have their ctx
// cancelled immediately, and Start waits for them only up to AbortTimeout.
// The manager aborts leader-only controllers this way when the lease is
// lost, and, failing fast, every other controller too.
var ErrAborted = errors.New("reconcile: aborted")

// Options configures a Controller. The zero value is valid: one worker, no
// per-reconcile timeout, client-go's default rate limiter, no metrics, logs
// discarded.
type Options struct {
	// Workers is the number of concurrent Reconcile calls. 0 means 1.
	Workers int
	// Timeout bounds each Reconcile through its ctx. 0 means no bound.
	Timeout time.Duration
	// ShutdownTimeout bounds how long Start waits for in-flight reconciles
	// once its ctx is cancelled; their ctx is cancelled when it expires.
	// 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// RateLimiter paces retries after errors. Nil means
	// workqueue.DefaultRateLimiter. Ignored when Queue is set.
	RateLimiter workqueue.RateLimiter[Request]
	// AbortTimeout bounds how long Start waits for in-flight reconciles after
	// an abort (see ErrAborted). 0 means DefaultAbortTimeout.
	AbortTimeout time.Duration
	// Queue replaces the controller's own queue. Nil means a new
	// workqueue.Queue named after the controller, whose fairness groups are
	// namespaces.
	Queue workqueue.Interface[Request]
	// QueueMetrics receives the metrics of the controller's own queue.
	QueueMetrics *workqueue.Metrics
	// Metrics receives the reconcile metrics. Nil disables them.
	Metrics *Metrics
	// Logger is the base logger; the controller adds the key "controller".
	Logger logr.Logger
	// Clock is used for metrics timestamps. Nil means the real clock.
	Clock clock.PassiveClock
	// Ready, when set, is asked before each Reconcile: while it returns
	// false, a worker holds the key it took, asks again every 50ms, and
	// reconciles once it returns true (or leaves the key, as any other,
	// when Start stops). A manager sets it to "every informer the
	// controller reads has synced", the sync gate. It must be fast and
	// must not block. Nil means always ready.
	Ready func() bool
	// Owns, when set, is asked before each Reconcile whether this
	// controller may reconcile the key now: a key it does not own is
	// dropped (Forget, no retry), as an Exclude'd key is. It is called
	// under the controller's mutex, atomically with counting the Reconcile
	// as running (see Exclude), so it must be fast, must not block and
	// must not call the Controller's methods. A sharded manager sets it to
	// "this replica holds the key's object". Nil means every key.
	Owns func(Request) bool
}

// Controller runs workers that drain a workqueue of Requests into a
// Reconciler. Create it with New; its methods are safe for concurrent use.
type Controller struct {
	name            string
	do              Reconciler
	workers         int
	timeout         time.Duration
	shutdownTimeout time.Duration
	abortTimeout    time.Duration
	log             logr.Logger
	clock           clock.PassiveClock
	ready           func() bool
	metrics         controllerMetrics
	running         atomic.Bool
	// newQueue makes a fresh queue for a restart; nil when the user passed
	// Options.Queue, which cannot be replaced.
	newQueue func() (workqueue.Interface[Request], error)

	mu         sync.Mutex
	queue      workqueue.Interface[Request]
	eventTimes map[Request]time.Time // first unhandled event per waiting key
	eventPeak  int                   // most entries since eventTimes was last rebuilt
	owns       func(Request) bool    // Options.Owns; called under mu
	inFlight   map[Request]int       // Reconciles running, per key
	excluded   map[Request]struct{}  // Exclude'd keys
	idle       map[Request][]chan struct{}
}

// New returns a Controller named name (used in logs and metric labels)
// that calls r. It fails on a nil Reconciler, an empty name or a negative
// option, saying which.
func New(name string, r Reconciler, opts Options) (*Controller, error) {
	switch {
	case name == "":
		return nil, errors.New("reconcile: controller name is empty: give every controller a unique name, it labels logs and metrics")
	case isNil(r):
		return nil, fmt.Errorf("reconcile: controller %q: Reconciler is nil: pass a value implementing Reconcile, or wrap a function in reconcile.Func", name)
	case opts.Workers < 0:
		return nil, fmt.Errorf("reconcile: controller %q: Options.Workers is %d: use 0 for the default of 1, or a positive count", name, opts.Workers)
	case opts.Timeout < 0:
		return nil, fmt.Errorf("reconcile: controller %q: Options.Timeout is %v: use 0 for no timeout, or a positive duration", name, opts.Timeout)
	case opts.AbortTimeout < 0:
		return nil, fmt.Errorf("reconcile: controller %q: Options.AbortTimeout is %v: use 0 for the default of %v, or a positive duration", name, opts.AbortTimeout, DefaultAbortTimeout)
	case opts.ShutdownTimeout < 0:
		return nil, fmt.Errorf("reconcile: controller %q: Options.ShutdownTimeout is %v: use 0 for the default of %v, or a positive duration", name, opts.ShutdownTimeout, DefaultShutdownTimeout)
	}
	c := &Controller{
		name:            name,
		do:              r,
		queue:           opts.Queue,
		workers:         max(opts.Workers, 1),
		timeout:         opts.Timeout,
		shutdownTimeout: opts.ShutdownTimeout,
		abortTimeout:    opts.AbortTimeout,
		log:             opts.Logger.WithValues("controller", name),
		clock:           opts.Clock,
		ready:           opts.Ready,
		owns:            opts.Owns,
		eventTimes:      make(map[Request]time.Time),
	}
	if c.shutdownTimeout == 0 {
		c.shutdownTimeout = DefaultShutdownTimeout
	}
	if c.abortTimeout == 0 {
		c.abortTimeout = DefaultAbortTimeout
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.log.GetSink() == nil {
		c.log = logr.Discard()
	}
	if c.queue == nil {
		c.newQueue = func() (workqueue.Interface[Request], error) {
			return workqueue.New(workqueue.Options[Request]{
				Name:        name,
				RateLimiter: opts.RateLimiter,
				Metrics:     opts.QueueMetrics,
				Group:       func(r Request) string { return r.Namespace }, // namespaces take turns
			})
		}
		q, err := c.newQueue()
		if err != nil {
			return nil, fmt.Errorf("reconcile: controller %q: %w", name, err)
		}
		c.queue = q
	}
	c.metrics = opts.Metrics.forController(name, c.workers)
	return c, nil
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// Queue returns the queue the workers drain, for callers that need delays
// or rate limiting directly. Prefer Enqueue for event-driven keys. A
// restarted controller has a new queue.
func (c *Controller) Queue() workqueue.Interface[Request] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queue
}

// Enqueue queues req at workqueue.PriorityNormal because an event touched
// it, and remembers when, for ctrlkit_event_to_reconcile_seconds. It never
// blocks.
func (c *Controller) Enqueue(req Request) {
	c.EnqueuePriority(req, workqueue.PriorityNormal)
}

// EnqueuePriority is Enqueue at priority p. With a queue that has no
// priorities (see workqueue.PriorityInterface), p is ignored.
func (c *Controller) EnqueuePriority(req Request, p workqueue.Priority) {
	c.mu.Lock()
	q := c.queue
	if q.ShuttingDown() {
		c.mu.Unlock()
		return
	}
	if _, ok := c.eventTimes[req]; !ok {
		c.eventTimes[req] = c.clock.Now()
		c.eventPeak = max(c.eventPeak, len(c.eventTimes))
	}
	c.mu.Unlock()
	if pq, ok := q.(workqueue.PriorityInterface[Request]); ok {
		pq.AddWithPriority(req, p)
		return
	}
	q.Add(req)
}

// Start runs the workers until ctx is cancelled. It then stops handing out
// keys, waits up to the shutdown timeout for in-flight reconciles, cancels
// their ctx if they are still running, and returns. If ctx's cause is
// ErrAborted it cancels in-flight reconciles at once and waits only up to
// the abort timeout. It returns an error if the controller is already
// running, or if reconciles were still running when it gave up.
//
// If ctx descends from a leading context (package leader), a worker calls
// Reconcile only if leader.CheckLeading(ctx) passes right before the call,
// and in-flight reconciles have their ctx cancelled the moment the lease
// is lost (leader.Fence), even during a graceful stop.
//
// Start may be called again after it returned: a controller that owns its
// queue gets a fresh one when it stops, which collects keys until the next
// Start. Keys enqueued while it was stopping are lost, so a caller that
// restarts it re-enqueues what it needs. If Start gave up on reconciles
// that ignored their cancelled ctx, the controller counts as running until
// they return, so that no key is ever reconciled twice at once.
func (c *Controller) Start(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return fmt.Errorf("reconcile: controller %q is already running", c.name)
	}
	q := c.Queue()
	if q.ShuttingDown() {
		c.running.Store(false)
		return fmt.Errorf("reconcile: controller %q cannot restart: its Options.Queue is shut down", c.name)
	}
	var stuck <-chan struct{} // set if Start gives up on its workers: closed when they end
	defer func() {
		c.renewQueue()
		if stuck == nil {
			c.running.Store(false)
			return
		}
		go func() { <-stuck; c.running.Store(false) }()
	}()
	// In-flight reconciles outlive ctx by up to the shutdown timeout, but
	// not the lease they run under.
	workCtx, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelWork(nil)
	if fence, ok := leader.Fence(ctx); ok {
		stop := context.AfterFunc(fence, func() { cancelWork(context.Cause(fence)) })
		defer stop()
	}

	var stopping atomic.Bool // take no new keys
	c.log.Info("Starting workers", "workers", c.workers)
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for c.processNext(workCtx, q, &stopping) {
			}
		})
	}
	<-ctx.Done()
	wait, abort := c.shutdownTimeout, errors.Is(context.Cause(ctx), ErrAborted)
	// A shut-down queue still hands out the keys that were waiting (as
	// client-go's does); stopping makes the workers leave them.
	stopping.Store(true)
	q.ShutDown()
	if abort {
		wait = c.abortTimeout
		cancelWork(context.Cause(ctx))
		c.log.Info("Aborting workers: in-flight reconciles cancelled", "cause", context.Cause(ctx).Error(), "timeout", wait)
	} else {
		c.log.Info("Stopping workers: waiting for in-flight reconciles", "timeout", wait)
	}

	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-stopped:
		c.log.Info("All workers stopped")
		return nil
	case <-timer.C:
		cancelWork(fmt.Errorf("reconcile: shutdown timeout of %v exceeded", wait))
		stuck = stopped
		return fmt.Errorf("reconcile: controller %q: reconciles still running %v after stopping began; their ctx is now cancelled: make Reconcile return when ctx is done", c.name, wait)
	}
}

// renewQueue gives a stopped controller that owns its queue a fresh one,
// so keys enqueued while it is stopped wait for the next Start. The event
// times of keys left in the old queue are dropped: if those keys are
// enqueued again, their latency counts from then.
func (c *Controller) renewQueue() {
	var q workqueue.Interface[Request]
	if c.newQueue != nil {
		var err error
		if q, err = c.newQueue(); err != nil { // New only fails on options already validated
			c.log.Error(err, "Cannot renew the queue; the controller cannot restart")
			q = nil // not the typed nil newQueue returned
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.eventTimes)
	if q != nil {
		c.queue = q
	}
}

// processNext handles one key; it returns false once the queue shuts down.
// Once stopping, or once ctx's lease is gone, it takes the keys still
// waiting without reconciling them, so the old queue empties: its depth
// series is the next run's too. (The next leader reconciles every object
// when it takes over.)
func (c *Controller) processNext(ctx context.Context, q workqueue.Interface[Request], stopping *atomic.Bool) bool {
	req, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(req)
	if stopping.Load() {
		return true
	}
	if !c.awaitReady(ctx, stopping) {
		return true
	}
	if !c.begin(req) {
		q.Forget(req)
		c.log.V(4).Info("Not reconciling: the key is excluded or not owned here", "namespace", req.Namespace, "name", req.Name)
		return true
	}
	defer c.end(req)
	c.metrics.activeWorkers.Inc()
	defer c.metrics.activeWorkers.Dec()
	c.handle(ctx, q, req)
	return true
}

// awaitReady blocks while Options.Ready returns false, and reports whether
// to reconcile: false once stopping or once ctx has ended.
func (c *Controller) awaitReady(ctx context.Context, stopping *atomic.Bool) bool {
	if c.ready == nil || c.ready() {
		return true
	}
	c.log.V(4).Info("Holding reconciles until the controller's informers have synced")
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !c.ready() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if stopping.Load() {
			return false
		}
	}
	return true
}

func (c *Controller) handle(ctx context.Context, q workqueue.Interface[Request], req Request) {
	start := c.clock.Now()
	c.mu.Lock()
	evt, ok := c.eventTimes[req]
	delete(c.eventTimes, req)
	if c.eventPeak > 4096 && len(c.eventTimes) < c.eventPeak/4 {
		// Go maps never shrink: give back what a drained backlog (the
		// initial list of a large cluster) held, as the queue does.
		m := make(map[Request]time.Time, len(c.eventTimes))
		maps.Copy(m, c.eventTimes)
		c.eventTimes, c.eventPeak = m, len(m)
	}
	c.mu.Unlock()

	id := uuid.NewUUID()
	log := c.log.WithValues("namespace", req.Namespace, "name", req.Name, "reconcileID", id)
	ctx = context.WithValue(logr.NewContext(ctx, log), reconcileIDKey{}, id)
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.timeout, errReconcileTimeout)
		defer cancel()
	}

	// The last test of the lease, after everything else the worker does:
	// the window in which the lease can be lost, or a SIGSTOP can land,
	// and the Reconcile still start is this one call wide.
	if err := leader.CheckLeading(ctx); err != nil {
		log.V(4).Info("Not reconciling: this replica no longer leads", "reason", err.Error())
		return
	}
	if ok {
		c.metrics.eventToStart.Observe(start.Sub(evt).Seconds())
	}
	res, err := c.call(ctx, req)
	c.metrics.duration.Observe(c.clock.Since(start).Seconds())
	if c.timeout > 0 && errors.Is(context.Cause(ctx), errReconcileTimeout) {
		c.metrics.timeouts.Inc()
	}

	switch {
	case err != nil && IsTerminal(err):
		q.Forget(req)
		c.metrics.failed.Inc()
		c.metrics.errors.Inc()
		c.metrics.terminalErrors.Inc()
		log.Error(err, "Reconciler error is terminal; not retrying until the object changes")
	case err != nil && apierrors.IsConflict(err):
		// The cache was behind the server: routine for a controller that
		// reads from listers. Retried and counted like any error, but not
		// worth an error line.
		q.AddRateLimited(req)
		c.metrics.failed.Inc()
		c.metrics.errors.Inc()
		log.V(1).Info("Conflict: the object changed since the cache was read; retrying with backoff", "error", err.Error(), "retries", q.NumRequeues(req))
	case err != nil:
		q.AddRateLimited(req)
		c.metrics.failed.Inc()
		c.metrics.errors.Inc()
		log.Error(err, "Reconciler error; retrying with backoff", "retries", q.NumRequeues(req))
	case res.RequeueAfter > 0:
		q.Forget(req)
		q.AddAfter(req, res.RequeueAfter)
		c.metrics.requeueAfter.Inc()
		log.V(4).Info("Reconcile done; requeue requested", "after", res.RequeueAfter)
	default:
		q.Forget(req)
		c.metrics.success.Inc()
		log.V(4).Info("Reconcile done")
	}
}

// call runs Reconcile and turns a panic into an error carrying its stack.
func (c *Controller) call(ctx context.Context, req Request) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.metrics.panics.Inc()
			err = fmt.Errorf("panic in Reconcile: %v [recovered]\n%s", r, debug.Stack())
		}
	}()
	return c.do.Reconcile(ctx, req)
}

// errReconcileTimeout is the cause of a Reconcile's ctx cancelled by
// Options.Timeout, told apart from shutdown and leadership loss.
var errReconcileTimeout = errors.New("reconcile: Options.Timeout exceeded")

type reconcileIDKey struct{}

// IDFromContext returns the reconcileID that ctrlkit gave the Reconcile
// running with ctx, or "" outside a Reconcile.
func IDFromContext(ctx context.Context) types.UID {
	id, _ := ctx.Value(reconcileIDKey{}).(types.UID)
	return id
}

// isNil reports whether r is nil or a nil func, pointer or map behind the
// interface (reconcile.Func(nil), say), which would panic on every call.
func isNil(r Reconciler) bool {
	if r == nil {
		return true
	}
	switch v := reflect.ValueOf(r); v.Kind() {
	case reflect.Func, reflect.Pointer, reflect.Map, reflect.Chan, reflect.Slice, reflect.Interface:
		return v.IsNil()
	}
	return false
}
