package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// replay re-delivers a watch's cached objects to its handler.
type replay struct {
	source       informer.Source
	handler      cache.ResourceEventHandler
	registration *informer.Registration
}

// gate lets a leader-only controller's events reach its queue only while
// this replica leads: a standby's queues stay empty (workqueue_depth 0),
// and no key waits through a standby period to be counted in
// ctrlkit_event_to_reconcile_seconds. A nil gate is always open.
type gate struct {
	mu   sync.RWMutex
	open bool
}

// do calls enqueue if g is open. Holding the read lock across the call
// means that once set(false) has returned, nothing more is enqueued.
func (g *gate) do(enqueue func()) {
	if g == nil {
		enqueue()
		return
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.open {
		enqueue()
	}
}

func (g *gate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = open
}

// Elector is the manager's leader elector, or nil without leader election.
func (m *Manager) Elector() *leader.Elector { return m.elector }

// campaign runs the leader-only work while this replica leads, until ctx
// ends (nil) or the lease is lost (an error). With RecampaignOnLeaseLost it campaigns
// again after a loss, but only once the leader-only work has stopped: if
// it did not stop within the abort timeout, or failed, campaign returns
// the error, so a replica never holds the lease while its leader-only
// controllers cannot run.
func (m *Manager) campaign(ctx context.Context) error {
	for {
		var leadErr error
		err := m.elector.Run(ctx, func(leadCtx context.Context) error {
			leadErr = m.lead(leadCtx)
			return leadErr
		})
		switch {
		case err == nil, ctx.Err() != nil && leadErr == nil: // shutting down: a loss no longer matters
			return nil
		case ctx.Err() != nil || leadErr != nil || !errors.Is(err, leader.ErrLeaseLost) || m.opts.OnLeaseLost != RecampaignOnLeaseLost:
			return fmt.Errorf("manager: %w", err)
		}
		m.log.Info("Lost leadership; leader-only work has stopped; campaigning again with warm caches", "identity", m.elector.Identity(), "reason", err.Error())
	}
}

// lead runs the leader-only controllers and Runnables for one term of
// leadership, until leadCtx ends: gracefully on shutdown, at once
// (reconcile.ErrAborted) when the lease was lost. It opens their event
// gates and enqueues every cached object of their watches first, at low
// priority, so nothing that changed while another replica led, or while
// this one stood by, is missed. It returns once all of them have returned,
// or were left running past the abort or shutdown timeout (an error).
func (m *Manager) lead(leadCtx context.Context) error {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(leadCtx)) // keeps the term
	defer cancel(nil)
	t := &term{ctx: ctx, cancel: cancel}
	m.mu.Lock()
	var work []*controller
	for _, c := range m.controllers {
		if c.leaderOnly() {
			work = append(work, c)
			c.term = t
			c.runs.Add(1)
		}
	}
	runnables := slices.Clone(m.leaderRunnables)
	m.term = t // leader-only controllers added from here on join t
	m.mu.Unlock()

	// Events first, then the replay: an object changed in between is in
	// the cache when it is replayed, or its event passes the open gate.
	for _, c := range work {
		c.gate.set(true)
	}
	closeGates := func() {
		m.mu.Lock()
		all := slices.Clone(m.controllers)
		m.mu.Unlock()
		for _, c := range append(all, work...) {
			if c.leaderOnly() {
				c.gate.set(false)
			}
		}
	}
	defer closeGates()
	stop := context.AfterFunc(leadCtx, func() {
		closeGates() // before the controllers stop and renew their queues
		cause := context.Cause(leadCtx)
		if errors.Is(cause, leader.ErrLeaseLost) {
			if m.opts.OnLeaseLost == ExitOnLeaseLost {
				m.abortRun(cause) // Run will return: stop the rest at the same time
			}
			cause = fmt.Errorf("%w: %w", reconcile.ErrAborted, cause)
		}
		cancel(cause)
	})
	defer stop()

	var members []member
	for _, c := range work {
		c.replay()
		members = append(members, member{name: "controller " + c.ctrl.Name(), start: c.start, bounded: true})
	}
	for i, r := range runnables {
		members = append(members, member{name: "leader-only " + runnableName(i, r), start: r.Start})
	}
	err := m.runAll(ctx, cancel, members)
	m.mu.Lock()
	m.term = nil
	m.mu.Unlock()
	t.wg.Wait() // the controllers that joined; they bound their own shutdown
	return errors.Join(append([]error{err}, t.errs...)...)
}

// abortRun ends Run's ctx at once (reconcile.ErrAborted) because of loss,
// a lost lease, which Run then returns.
func (m *Manager) abortRun(loss error) {
	m.mu.Lock()
	cancelRun := m.cancelRun
	if m.lost == nil {
		m.lost = fmt.Errorf("manager: %w", loss)
	}
	m.mu.Unlock()
	if cancelRun != nil {
		cancelRun(fmt.Errorf("%w: %w", reconcile.ErrAborted, loss))
	}
}

// abortTimeout bounds how long a lost lease waits for leader-only work to
// stop (and, failing fast, for everything else) before Run reports it
// stuck. The fence closes RenewDeadline + RetryPeriod after the last
// renewal and a standby may take over LeaseDuration (whole seconds) after
// it, so leader-only work that stops within
// LeaseDuration - (RenewDeadline + RetryPeriod) of a loss found by the
// fence has stopped before any other replica can lead. That is not so
// when the loss is found by seeing another holder (this process was
// paused): then the other replica already leads, and fencing, not this
// timeout, keeps the two apart. At most reconcile.DefaultAbortTimeout.
func (m *Manager) abortTimeout() time.Duration {
	if m.elector == nil {
		return reconcile.DefaultAbortTimeout
	}
	o := m.elector.Options()
	return min(reconcile.DefaultAbortTimeout, o.LeaseDuration.Truncate(time.Second)-(o.RenewDeadline+o.RetryPeriod))
}
