package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection"
)

// run is the state of one Run call.
type run struct {
	lead        func(context.Context) error
	lock        *fencedLock
	stopElector context.CancelFunc
	wg          sync.WaitGroup // onStarted, while it leads
	exited      chan struct{}  // closed when client-go's OnStartedLeading returns
	over        chan struct{}  // closed when a term ended and its leading function returned

	// Guarded by Elector.mu.
	stopping bool // start no term
	term     *term
	leadErr  error
}

// Run campaigns for the lease until ctx ends, the lease is lost, or lead
// fails. While this replica leads, lead runs in its own goroutine with a
// leading context (see CheckLeading and Fence) that is cancelled when
// leadership ends: with a cause wrapping ErrLeaseLost the moment the lease
// can no longer be proven held, or with ctx's cause on shutdown. lead must
// return only once all the work it started has stopped, and must bound how
// long that takes: Run waits for it. lead may return nil before its context
// ends (it has nothing to do); the lease is still held until then.
//
// On shutdown Run cancels lead's context and keeps renewing until lead has
// returned; only then does it stop renewing and, with ReleaseOnCancel and if
// lead returned nil, release the lease. It returns nil after a clean
// shutdown; lead's error if lead failed (the lease is then not released but
// left to expire); and, after a loss, an error wrapping ErrLeaseLost (and
// lead's error, if any) once lead has returned. Run may be called again
// after it returned, to campaign again, but not concurrently.
func (e *Elector) Run(ctx context.Context, lead func(context.Context) error) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return errors.New("leader: Run called while another Run is in progress")
	}
	e.running = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
	}()

	r := &run{lead: lead, lock: &fencedLock{Interface: e.lock, e: e}, exited: make(chan struct{}), over: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          r.lock,
		Name:          e.opts.Name,
		LeaseDuration: e.opts.LeaseDuration,
		RenewDeadline: e.opts.RenewDeadline,
		RetryPeriod:   e.opts.RetryPeriod,
		// Run releases the lease itself, and only once lead returned nil.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(clientCtx context.Context) {
				defer close(r.exited)
				e.onStarted(r, clientCtx)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil { // options were validated in New
		return fmt.Errorf("leader: %w", err)
	}

	// The elector outlives ctx until lead has stopped, so the lease is held
	// (and renewed) while leader-only work winds down. client-go logs
	// through the logger in its context.
	elCtx, cancelEl := context.WithCancel(logr.NewContext(context.WithoutCancel(ctx), e.opts.Logger))
	defer cancelEl()
	r.stopElector = cancelEl
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(elCtx)
	}()
	e.opts.Logger.Info("Campaigning for leadership", "lease", e.lease(), "identity", e.opts.Identity)

	shutdown := false
	select {
	case <-ctx.Done():
		shutdown = true
		e.stopLeading(r, context.Cause(ctx))
	case <-done: // renewing failed, or the term was lost
		e.stopLeading(r, fmt.Errorf("%w: the Lease %s could not be renewed within RenewDeadline (%v)", ErrLeaseLost, e.lease(), e.opts.RenewDeadline))
	case <-r.over: // lost, or lead failed
		e.stopLeading(r, nil)
	}
	// Nothing leader-only runs any more, unless lead returned an error
	// saying it could not stop it: refuse its writes from now on.
	e.endTerm(r, fmt.Errorf("stopped leading the Lease %s: Run is returning", e.lease()))
	cancelEl()
	<-done
	if r.lock.acquired.Load() {
		<-r.exited // client-go started OnStartedLeading: wait until it returns
	}

	e.mu.Lock()
	leadErr := r.leadErr
	var lost error
	if r.term != nil {
		lost = r.term.lostCause()
	}
	e.mu.Unlock()
	switch {
	case shutdown && leadErr == nil:
		if e.opts.ReleaseOnCancel && r.lock.acquired.Load() {
			e.release(r.lock)
		}
		return nil
	case leadErr != nil && (shutdown || !errors.Is(lost, ErrLeaseLost)):
		return fmt.Errorf("leader: leader-only work failed; the Lease %s is left to expire: %w", e.lease(), leadErr)
	case lost == nil || !errors.Is(lost, ErrLeaseLost): // client-go gave up before a term began
		lost = fmt.Errorf("%w: the Lease %s could not be renewed within RenewDeadline (%v)", ErrLeaseLost, e.lease(), e.opts.RenewDeadline)
	}
	return fmt.Errorf("leader: %w", errors.Join(lost, leadErr))
}

// stopLeading makes sure no term starts, ends the current one with cause
// (cancelling lead's context; nil leaves it as it is) and waits for lead to
// return.
func (e *Elector) stopLeading(r *run, cause error) {
	e.mu.Lock()
	r.stopping = true
	t := r.term
	e.mu.Unlock()
	if t != nil && cause != nil {
		if errors.Is(cause, ErrLeaseLost) {
			t.lose(cause)
		} else {
			t.cancelLead(cause) // graceful: the lease is still held
		}
	}
	r.wg.Wait()
}

// endTerm closes the fence of r's term, if any, and forgets it.
func (e *Elector) endTerm(r *run, cause error) {
	e.mu.Lock()
	t := r.term
	if e.term == t {
		e.term = nil
	}
	e.mu.Unlock()
	if t != nil {
		t.lose(cause)
	}
}

// onStarted is client-go's OnStartedLeading; clientCtx ends when client-go
// stops renewing. It runs lead for one term and closes the term's fence
// when it is lost: at once when a timer finds the last renewal older than
// the fence, when client-go stops renewing, or when lead fails. It returns
// once lead has returned and the term is over.
func (e *Elector) onStarted(r *run, clientCtx context.Context) {
	e.mu.Lock()
	if r.stopping {
		e.mu.Unlock()
		return
	}
	t := &term{e: e, stopElector: r.stopElector}
	t.fence, t.closeFence = context.WithCancelCause(context.Background())
	leadCtx, cancelLead := context.WithCancelCause(context.WithValue(context.WithoutCancel(clientCtx), termKey{}, t))
	t.cancelLead = cancelLead
	r.term, e.term = t, t
	r.wg.Add(1)
	e.mu.Unlock()
	defer r.wg.Done()
	defer cancelLead(nil)
	e.opts.Logger.Info("Acquired leadership", "lease", e.lease(), "identity", e.opts.Identity)

	leadDone := make(chan error, 1)
	go func() { leadDone <- r.lead(leadCtx) }()
	timer := time.NewTimer(e.untilFence(time.Now()))
	defer timer.Stop()
	clientDone, ended := clientCtx.Done(), leadCtx.Done()
	returned := false
	var leadErr error
	for !returned || (leadErr == nil && leadCtx.Err() == nil) {
		select {
		case leadErr = <-leadDone:
			returned, leadDone = true, nil
			if leadErr != nil {
				t.lose(fmt.Errorf("leader-only work failed: %w", leadErr))
			}
		case <-clientDone:
			clientDone = nil
			t.lose(fmt.Errorf("%w: the Lease %s could not be renewed within RenewDeadline (%v)", ErrLeaseLost, e.lease(), e.opts.RenewDeadline))
		case <-timer.C:
			now := time.Now()
			if err := e.fenced(now); err != nil {
				t.lose(err)
			} else if t.lostCause() == nil {
				timer.Reset(e.untilFence(now))
			}
		case <-ended:
			// Lost, or Run is shutting down: then the lease is still held
			// while lead winds down, and the timer still guards it.
			ended = nil
		}
	}
	e.mu.Lock()
	r.leadErr = leadErr
	e.mu.Unlock()
	close(r.over)
}
