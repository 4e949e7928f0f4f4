package leader

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// run is the state of one Run call.
type run struct {
	lead      func(context.Context)
	wg        sync.WaitGroup
	finishing bool
	cancel    context.CancelCauseFunc // of the current leading ctx
}

// Run campaigns for the lease until ctx ends or leadership is lost. While
// this replica leads, lead runs in its own goroutine with a context that is
// cancelled when leadership ends: with cause ErrLeaseLost when the lease
// could not be renewed, or with ctx's cause on shutdown.
//
// On shutdown Run cancels lead's context, waits for lead to return, and only
// then stops renewing (and, with ReleaseOnCancel, releases the lease), so
// nothing leader-only runs once a standby can take over. It returns nil
// after a shutdown, or an error wrapping ErrLeaseLost after lead returned
// following a loss. Run may be called again after it returned (to campaign
// again), but not concurrently.
func (e *Elector) Run(ctx context.Context, lead func(context.Context)) error {
	r := &run{lead: lead}
	e.mu.Lock()
	e.run = r
	e.mu.Unlock()

	// The elector outlives ctx until lead has stopped, so the lease is
	// held (and renewed) while leader-only work winds down.
	elCtx, cancelEl := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelEl()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.le.Run(elCtx)
	}()
	e.opts.Logger.Info("Campaigning for leadership", "lease", e.opts.Namespace+"/"+e.opts.Name, "identity", e.opts.Identity)

	select {
	case <-ctx.Done():
		e.stopLeading(r, context.Cause(ctx))
		cancelEl()
		<-done
		if e.opts.ReleaseOnCancel {
			e.opts.Logger.Info("Released leadership on shutdown", "identity", e.opts.Identity)
		}
		return nil
	case <-done:
		// client-go's elector returns on its own only when renewing failed.
		e.stopLeading(r, ErrLeaseLost)
		return fmt.Errorf("leader: lease %s/%s: %w: could not renew within RenewDeadline (%v)", e.opts.Namespace, e.opts.Name, ErrLeaseLost, e.opts.RenewDeadline)
	}
}

// stopLeading makes sure lead will not start, cancels it if it runs, and
// waits for it to return.
func (e *Elector) stopLeading(r *run, cause error) {
	e.mu.Lock()
	r.finishing = true
	if r.cancel != nil {
		r.cancel(cause)
	}
	e.mu.Unlock()
	r.wg.Wait()
}

// onStarted is client-go's OnStartedLeading; clientCtx ends when client-go
// stops renewing.
func (e *Elector) onStarted(clientCtx context.Context) {
	e.mu.Lock()
	r := e.run
	if r == nil || r.finishing {
		e.mu.Unlock()
		return
	}
	leadCtx, cancel := context.WithCancelCause(context.WithoutCancel(clientCtx))
	r.cancel = cancel
	r.wg.Add(1)
	e.leader = true
	e.mu.Unlock()
	e.opts.Logger.Info("Acquired leadership", "lease", e.opts.Namespace+"/"+e.opts.Name, "identity", e.opts.Identity)

	stopWatch := make(chan struct{})
	go func() {
		select {
		case <-clientCtx.Done():
			cancel(ErrLeaseLost) // no-op if Run cancelled it first
		case <-stopWatch:
		}
	}()
	defer func() {
		close(stopWatch)
		cancel(nil)
		r.wg.Done()
	}()
	r.lead(leadCtx)
}

// onStopped is client-go's OnStoppedLeading.
func (e *Elector) onStopped() {
	e.mu.Lock()
	was := e.leader
	e.leader = false
	e.mu.Unlock()
	if was {
		e.opts.Logger.Info("Stopped leading", "lease", e.opts.Namespace+"/"+e.opts.Name, "identity", e.opts.Identity)
	}
}

// onNewLeader is client-go's OnNewLeader: it logs handovers.
func (e *Elector) onNewLeader(identity string) {
	e.mu.Lock()
	prev := e.holder
	e.holder = identity
	e.mu.Unlock()
	if identity != e.opts.Identity {
		e.opts.Logger.Info("New leader observed", "lease", e.opts.Namespace+"/"+e.opts.Name, "leader", identity, "previous", prev, "identity", e.opts.Identity)
	}
}

func metaFor(o Options) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace}
}
