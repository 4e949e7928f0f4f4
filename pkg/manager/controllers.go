package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// errRemoved is the cause of a controller's ctx when RemoveController
// stops it.
var errRemoved = errors.New("manager: controller removed")

// controller is a controller the manager runs, and what feeds it.
type controller struct {
	ctrl     *reconcile.Controller
	sources  []informer.Source // of its watches and reads, once each
	releases []func()          // of the uses of sources
	replays  []replay
	gate     *gate // nil: not leader-only; events always reach the queue
	// removed ends every Start of the controller (RemoveController).
	removed context.Context
	remove  context.CancelCauseFunc
	// runs counts the Start calls in flight; Add only under the
	// manager's mu, while the controller is listed.
	runs sync.WaitGroup
	// term is the term of leadership a leader-only controller last
	// started in; guarded by the manager's mu.
	term *term
	// sharded controllers run while this replica holds its member Lease
	// (shard.Replica.RunMember).
	sharded bool
}

// start runs the controller until ctx ends or it is removed. The caller
// has counted it in runs.
func (c *controller) start(ctx context.Context) error {
	defer c.runs.Done()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.removed, func() { cancel(errRemoved) })
	defer stop()
	return c.ctrl.Start(ctx)
}

// ready is the sync gate: every informer of the controller that is served
// has synced.
func (c *controller) ready() bool {
	for _, s := range c.sources {
		if s.Served() && !s.HasSynced() {
			return false
		}
	}
	return true
}

// leaderOnly reports whether c runs only on the leader.
func (c *controller) leaderOnly() bool { return c.gate != nil }

// dismantle removes c's handlers, shuts its queue down and releases its
// informers. c no longer runs.
func (c *controller) dismantle() {
	for _, r := range c.replays {
		_ = r.source.RemoveEventHandler(r.registration)
	}
	c.ctrl.Queue().ShutDown()
	for _, release := range c.releases {
		release()
	}
}

// AddController creates a controller named name that reconciles with r and
// is fed by watches, and registers it. Names are unique per manager. It
// fails on a duplicate name, on a watch or read whose informer was not
// declared on this manager's cache, or on invalid options.
//
// Before Run, the controller starts with the others once the caches have
// synced. While Run runs, AddController also waits (up to
// Options.CacheSyncTimeout) until the controller's informers have synced,
// then starts it (a leader-only controller: now if this replica leads,
// else at its next term) and returns; if they do not sync, it removes the
// controller again and returns the error. Informers declared after Run
// started start at their declaration (informer.For). After Run has
// returned, AddController fails.
//
// The manager holds the controller's informers (the sources of its
// watches and opts.Reads) until RemoveController.
func (m *Manager) AddController(name string, r reconcile.Reconciler, opts ControllerOptions, watches ...Watch) (*reconcile.Controller, error) {
	for i, w := range watches {
		if w.Source == nil {
			return nil, fmt.Errorf("manager: controller %q: watch %d has no Source: pass an informer from informer.For", name, i)
		}
	}
	for i, s := range opts.Reads {
		if s == nil {
			return nil, fmt.Errorf("manager: controller %q: ControllerOptions.Reads[%d] is nil: pass an informer from informer.For", name, i)
		}
	}
	var primary informer.Source
	if m.shard != nil && m.shard.Sharded(name) {
		var unmapped []informer.Source
		for _, w := range watches {
			if w.Map == nil {
				unmapped = append(unmapped, w.Source)
			}
		}
		var err error
		if primary, err = m.shard.Primary(name, unmapped); err != nil {
			return nil, fmt.Errorf("manager: %w", err)
		}
	}
	c := &controller{}
	c.removed, c.remove = context.WithCancelCause(context.Background())
	for _, w := range watches {
		if !slices.Contains(c.sources, w.Source) {
			c.sources = append(c.sources, w.Source)
		}
	}
	for _, s := range opts.Reads {
		if !slices.Contains(c.sources, s) {
			c.sources = append(c.sources, s)
		}
	}

	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return nil, fmt.Errorf("manager: AddController(%q) after Run returned: add controllers to a manager that runs", name)
	}
	if slices.ContainsFunc(m.controllers, func(c *controller) bool { return c.ctrl.Name() == name }) {
		m.mu.Unlock()
		return nil, fmt.Errorf("manager: a controller named %q already exists: controller names must be unique per manager", name)
	}
	if primary != nil && m.runCtx != nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("manager: sharded controller %q added while Run runs: add sharded controllers before Run", name)
	}
	var owns func(reconcile.Request) bool
	if primary != nil {
		owns = m.shard.Owns(primary)
	}
	ctrl, err := reconcile.New(name, r, reconcile.Options{
		Workers:         opts.Workers,
		Timeout:         opts.Timeout,
		ShutdownTimeout: m.opts.ShutdownTimeout,
		RateLimiter:     opts.RateLimiter,
		QueueMetrics:    m.qMetrics,
		Metrics:         m.rMetrics,
		Logger:          m.log,
		AbortTimeout:    m.abortTimeout(),
		Ready:           c.ready,
		Owns:            owns,
	})
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	c.ctrl = ctrl
	if m.elector != nil && !opts.EveryReplica && primary == nil {
		c.gate = &gate{}
	}
	err = m.feed(c, watches)
	if err == nil && primary != nil {
		c.sharded = true
		var reg *informer.Registration
		if reg, err = m.shard.Add(ctrl, primary, c.sources); err == nil {
			c.replays = append(c.replays, replay{source: primary, registration: reg})
		}
	}
	if err != nil {
		m.mu.Unlock()
		c.dismantle()
		return nil, fmt.Errorf("manager: controller %q: %w", name, err)
	}
	m.controllers = append(m.controllers, c)
	runCtx := m.runCtx
	m.mu.Unlock()

	if runCtx == nil {
		return ctrl, nil // Run starts it
	}
	syncCtx, cancel := context.WithTimeoutCause(runCtx, m.opts.CacheSyncTimeout,
		fmt.Errorf("cache sync timeout of %v exceeded (Options.CacheSyncTimeout)", m.opts.CacheSyncTimeout))
	err = informer.WaitForSources(syncCtx, m.log.WithValues("controller", name), m.opts.SyncProgressInterval, c.sources...)
	cancel()
	if err != nil {
		_ = m.RemoveController(name)
		return nil, fmt.Errorf("manager: controller %q: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !slices.Contains(m.controllers, c):
		return nil, fmt.Errorf("manager: controller %q was removed while it was being added", name)
	case c.leaderOnly() && m.term != nil && c.term != m.term:
		// Not yet started in this term (a term that began while it
		// waited for its informers starts it itself).
		m.term.join(c)
	case !c.leaderOnly() && m.runCtx != nil:
		c.runs.Add(1)
		runCtx := m.runCtx
		m.extra.Go(func() {
			if err := c.start(runCtx); err != nil {
				m.fail(fmt.Errorf("manager: controller %q: %w", name, err))
			}
		})
	}
	// Otherwise Run is stopping (the controller is dismantled with the
	// rest), or a leader-only controller waits for the next term.
	return ctrl, nil
}

// feed uses c's informers and adds its watches' handlers. Called under
// m.mu; on error the caller dismantles c.
func (m *Manager) feed(c *controller, watches []Watch) error {
	for _, s := range c.sources {
		release, err := m.cache.Use(s)
		if err != nil {
			return err
		}
		c.releases = append(c.releases, release)
	}
	for _, w := range watches {
		h := informer.Handler{Map: w.Map, Predicates: w.Predicates}
		enqueue := func(key types.NamespacedName, ev informer.Event) {
			c.gate.do(func() { c.ctrl.EnqueuePriority(reconcile.Request{NamespacedName: key}, priorityOf(ev)) })
		}
		reh := h.ResourceEventHandler(enqueue)
		reg, err := w.Source.AddEventHandler(reh)
		if err != nil {
			return fmt.Errorf("watching %s: %w", w.Source.Name(), err)
		}
		c.replays = append(c.replays, replay{source: w.Source, handler: reh, registration: reg})
	}
	return nil
}

// RemoveController stops the controller named name and removes it: it
// stops taking keys, waits for its in-flight reconciles as a shutdown
// does (up to Options.ShutdownTimeout), removes its event handlers, shuts
// its queue down and releases its informers, so that an informer no other
// controller uses stops and frees its objects, and deletes its metric
// series. It may be called before, during or after Run, and blocks until
// all of that is done; it must not be called from the controller's own
// Reconcile, which it would wait for.
// The name may then be used again. It fails if no controller has that
// name, and for a sharded controller while Run runs (sharded controllers
// are fixed at Run, see Options.Sharding).
func (m *Manager) RemoveController(name string) error {
	m.mu.Lock()
	i := slices.IndexFunc(m.controllers, func(c *controller) bool { return c.ctrl.Name() == name })
	if i < 0 {
		m.mu.Unlock()
		return fmt.Errorf("manager: RemoveController(%q): no controller has that name", name)
	}
	c := m.controllers[i]
	if c.sharded && m.runCtx != nil {
		m.mu.Unlock()
		return fmt.Errorf("manager: RemoveController(%q): a sharded controller cannot be removed while Run runs: the sharder would go on giving this replica its keys, which no replica would then reconcile; stop the replica instead", name)
	}
	m.controllers = slices.Delete(m.controllers, i, i+1)
	m.mu.Unlock()
	c.remove(errRemoved)
	c.runs.Wait()
	c.dismantle()
	if c.sharded {
		m.shard.Remove(c.ctrl)
	}
	m.mu.Lock()
	if !slices.ContainsFunc(m.controllers, func(c *controller) bool { return c.ctrl.Name() == name }) {
		// Its series go with it, unless a controller of the same name was
		// added meanwhile, which carries them on.
		m.rMetrics.Forget(name)
		m.qMetrics.Forget(name)
	}
	m.mu.Unlock()
	m.log.Info("Controller removed", "controller", name)
	return nil
}

// fail stops Run with err, as a failing member does.
func (m *Manager) fail(err error) {
	m.mu.Lock()
	cancel := m.cancelRun
	m.mu.Unlock()
	if cancel != nil {
		m.log.Error(err, "Stopping")
		cancel(m.stopCause(err))
	}
}

// term is one term of leadership, for leader-only controllers added while
// it lasts.
type term struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	errs []error // of the controllers that joined
}

// join starts c, leader-only, in t: opens its gate, replays its watches'
// objects and runs it until the term ends. Called under the manager's mu.
func (t *term) join(c *controller) {
	c.term = t
	c.runs.Add(1)
	t.wg.Go(func() {
		c.gate.set(true)
		c.replay()
		if err := c.start(t.ctx); err != nil {
			t.mu.Lock()
			t.errs = append(t.errs, fmt.Errorf("controller %s: %w", c.ctrl.Name(), err))
			t.mu.Unlock()
			t.cancel(err)
		}
	})
}

// replay enqueues every cached object of c's watches, as a new term does.
func (c *controller) replay() {
	for _, r := range c.replays {
		for _, obj := range r.source.List() {
			r.handler.OnAdd(obj, true)
		}
	}
}
