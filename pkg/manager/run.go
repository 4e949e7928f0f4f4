package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// Run starts everything and blocks until ctx is cancelled and everything
// has stopped, or until something fails. See the package doc for the order.
// It returns nil after a clean shutdown. Run may be called once.
func (m *Manager) Run(ctx context.Context) (err error) {
	m.mu.Lock()
	first := m.started.CompareAndSwap(false, true)
	m.mu.Unlock()
	if !first {
		return errors.New("manager: Run called twice: a Manager runs once")
	}
	// Last of all, once the informers, the event broadcaster and
	// everything else that uses the clients stopped.
	if m.conns != nil {
		defer m.conns.closeAll()
	}
	// Each controller's queue owns goroutines from AddController on. A
	// started controller shuts its queue down itself; this also ends the
	// queues of controllers that never started because Run returned before
	// the caches synced.
	defer m.shutDownQueues()
	defer m.stopBroadcaster() // on every return path
	// client-go logs through the context's logger where it is given one
	// (reflectors, leader election): the manager's, not global klog.
	ctx = logr.NewContext(ctx, m.log)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	m.mu.Lock()
	m.cancelRun = cancel
	m.mu.Unlock()

	if m.opts.HTTPAddr != "" {
		stop, err := m.serveHTTP(m.opts.HTTPAddr)
		if err != nil {
			return err
		}
		defer func() { stop(errors.Is(context.Cause(ctx), reconcile.ErrAborted)) }()
	}
	if m.metrics != nil {
		stop, serveErr := m.serveSecureMetrics(ctx, cancel)
		if serveErr != nil {
			return serveErr
		}
		defer func() { err = errors.Join(err, stop(errors.Is(context.Cause(ctx), reconcile.ErrAborted))) }()
	}

	if m.webhooks != nil {
		// Before the informers start: their lists may need this
		// operator's conversion webhook. Deferred before the informers'
		// stop, this stops the webhooks after it.
		stop := m.serveWebhooks(ctx, cancel)
		defer func() { err = errors.Join(err, stop()) }()
	}

	// Before the informers start: the sharding mode decides what the
	// sharded ones list.
	if m.shard != nil {
		if err := m.shard.Resolve(ctx); err != nil {
			return fmt.Errorf("manager: %w", err)
		}
	}

	// The informers outlive Run's ctx: Reconciles still in flight when it
	// ends read from them and wait for their writes to show in them, so
	// the cache stops only once the controllers have (this defer runs
	// after runAll has returned).
	cacheCtx, stopCache := context.WithCancel(context.WithoutCancel(ctx))
	if err := m.cache.Start(cacheCtx); err != nil {
		stopCache()
		return fmt.Errorf("manager: %w", err)
	}
	defer func() {
		cancel(nil)
		stopCache()
		m.cache.Wait()
	}()

	start := time.Now()
	m.log.Info("Waiting for caches to sync", "informers", len(m.cache.Informers()), "timeout", m.opts.CacheSyncTimeout)
	syncCtx, cancelSync := context.WithTimeoutCause(ctx, m.opts.CacheSyncTimeout,
		fmt.Errorf("cache sync timeout of %v exceeded (Options.CacheSyncTimeout)", m.opts.CacheSyncTimeout))
	err = m.cache.WaitForSync(syncCtx, m.log, m.opts.SyncProgressInterval)
	cancelSync()
	if err != nil {
		if ctx.Err() != nil {
			m.log.Info("Shutdown requested before caches synced")
			return nil
		}
		return fmt.Errorf("manager: %w", err)
	}
	m.log.Info("Caches synced", "duration", time.Since(start))
	m.ready.Store(true)
	stopping := make(chan struct{})
	go func() { // joined below: runAll returns after ctx ends
		defer close(stopping)
		<-ctx.Done()
		m.ready.Store(false)
		m.log.Info("Stopping: waiting for controllers and runnables", "cause", context.Cause(ctx).Error())
	}()

	m.mu.Lock()
	var members []member
	for _, c := range m.controllers {
		if !c.leaderOnly() && !c.sharded {
			c.runs.Add(1)
			members = append(members, member{name: "controller " + c.ctrl.Name(), start: c.start, bounded: true})
		}
	}
	for i, r := range m.runnables {
		members = append(members, member{name: runnableName(i, r), start: r.Start})
	}
	m.runCtx = ctx // controllers added from here on start at once
	m.mu.Unlock()
	if m.elector != nil {
		members = append(members, member{name: "leader election", start: m.campaign, bounded: true})
	}
	if m.shard != nil {
		members = append(members, member{name: "sharding member", start: m.memberTerm, bounded: true},
			member{name: "sharder", start: m.shard.RunSharder, bounded: true})
	}
	err = m.runAll(ctx, func(err error) { cancel(m.stopCause(err)) }, members)
	m.mu.Lock()
	m.runCtx = nil
	m.mu.Unlock()
	m.extra.Wait() // controllers added while running; they bound their own shutdown
	<-stopping

	m.mu.Lock()
	lost := m.lost
	m.mu.Unlock()
	m.log.Info("Stopped")
	if lost != nil && !errors.Is(err, leader.ErrLeaseLost) {
		err = errors.Join(lost, err)
	}
	return err
}

// member is one goroutine of a group runAll runs.
type member struct {
	name  string
	start func(ctx context.Context) error
	// bounded members bound their own shutdown (a controller's
	// ShutdownTimeout or AbortTimeout), and are waited for without limit.
	bounded bool
}

// runAll runs members with ctx and returns once ctx has ended and every
// member has returned, with their errors. The first error not caused by
// ctx's end is passed to stop, which must end ctx. Once ctx has ended, a
// member that does not bound its own shutdown gets stopBound to return;
// one that does not is reported in the error and left running.
func (m *Manager) runAll(ctx context.Context, stop func(error), members []member) error {
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(members)) // a member left running can still send
	for i, mb := range members {
		go func() { results <- result{i, mb.start(ctx)} }()
	}
	running := make(map[int]bool, len(members))
	for i := range members {
		running[i] = true
	}
	errs := make([]error, len(members))
	done := ctx.Done()
	var deadline <-chan time.Time
	for len(running) > 0 || done != nil {
		select {
		case r := <-results:
			if !running[r.i] {
				continue // reported stuck; it returned after all
			}
			delete(running, r.i)
			// A member that returns ctx's error on shutdown stopped cleanly.
			if err := r.err; err != nil && (ctx.Err() == nil || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)) {
				errs[r.i] = err
				stop(err)
			}
		case <-done:
			done = nil
			bound := m.stopBound(context.Cause(ctx))
			timer := time.NewTimer(bound)
			defer timer.Stop()
			deadline = timer.C
		case <-deadline:
			deadline = nil
			bound := m.stopBound(context.Cause(ctx))
			for i := range running {
				if !members[i].bounded {
					delete(running, i)
					errs[i] = fmt.Errorf("manager: %s did not return within %v after its ctx was cancelled; Run returns without it: make Start return when ctx is done", members[i].name, bound)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// stopBound is how long Runnables get to return once their ctx ended with
// cause: the abort timeout after a lease loss, else Options.ShutdownTimeout.
func (m *Manager) stopBound(cause error) time.Duration {
	if errors.Is(cause, reconcile.ErrAborted) {
		return m.abortTimeout()
	}
	return m.opts.ShutdownTimeout
}

// stopCause is the cause with which err, returned by a member, ends Run's
// ctx: an abort after a lease loss unless Options.OnLeaseLost asks for a
// graceful shutdown.
func (m *Manager) stopCause(err error) error {
	if m.elector != nil && errors.Is(err, leader.ErrLeaseLost) && m.opts.OnLeaseLost != ShutdownOnLeaseLost {
		return fmt.Errorf("%w: %w", reconcile.ErrAborted, err)
	}
	return err
}

func runnableName(i int, r Runnable) string {
	return fmt.Sprintf("Runnable %d (%T)", i, r)
}

func (m *Manager) shutDownQueues() {
	m.mu.Lock()
	ctrls := slices.Clone(m.controllers)
	m.mu.Unlock()
	for _, c := range ctrls {
		c.ctrl.Queue().ShutDown()
	}
}

func (m *Manager) stopBroadcaster() {
	m.mu.Lock()
	b := m.broadcaster
	m.stopped = true
	m.cancelRun = nil
	m.mu.Unlock()
	if b != nil {
		b.Shutdown()
	}
	m.eventLog.close()
}
