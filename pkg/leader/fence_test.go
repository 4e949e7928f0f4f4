package leader_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// whenDone records when ctx ends.
func whenDone(ctx context.Context) func() time.Time {
	var (
		mu sync.Mutex
		at time.Time
	)
	context.AfterFunc(ctx, func() { mu.Lock(); at = time.Now(); mu.Unlock() })
	return func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
}

// TestFenceAfterMissedRenewals runs in a synctest bubble: renewals go out
// every RetryPeriod (2s) from the start, then a renewal hangs, as a request
// to an API server that stopped answering does without a timeout. The
// fence closes exactly RenewDeadline + RetryPeriod after the last renewal
// was sent, although client-go, stuck in the request, never gives up: the
// leading context is cancelled, CheckLeading refuses, and no standby could
// have taken the lease yet (LeaseDuration after that renewal).
func TestFenceAfterMissedRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		var l logs
		e := newElector(t, a, options(&l))
		c := start(t, e)
		ctx := <-c.leading
		began := time.Now()
		cancelledAt := whenDone(ctx)
		fence, ok := leader.Fence(ctx)
		if !ok {
			t.Fatal("Fence(leading ctx) found no term")
		}
		if err := leader.CheckLeading(ctx); err != nil || !e.IsLeader() {
			t.Fatalf("just after acquiring: CheckLeading = %v, IsLeader = %v; want nil, true", err, e.IsLeader())
		}

		time.Sleep(5 * time.Second) // renewals sent at 0s, 2s and 4s
		hang := make(chan struct{})
		a.set(func(a *api) { a.hang = hang }) // the renewal at 6s never returns
		lastRenewal := began.Add(4 * time.Second)
		time.Sleep(time.Until(lastRenewal.Add(fenceBound)) - time.Nanosecond)
		synctest.Wait()
		if err := leader.CheckLeading(ctx); err != nil || ctx.Err() != nil || fence.Err() != nil || !e.IsLeader() {
			t.Fatalf("1ns before the fence: CheckLeading = %v, ctx.Err = %v, fence.Err = %v, IsLeader = %v; want the lease still held",
				err, ctx.Err(), fence.Err(), e.IsLeader())
		}

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		err := leader.CheckLeading(ctx)
		if !errors.Is(err, leader.ErrNotLeader) || !errors.Is(err, leader.ErrLeaseLost) {
			t.Errorf("CheckLeading at the fence = %v, want ErrNotLeader and ErrLeaseLost", err)
		}
		if got := cancelledAt(); !got.Equal(lastRenewal.Add(fenceBound)) {
			t.Errorf("leading ctx cancelled at %v after the last renewal, want at the fence, %v", got.Sub(lastRenewal), fenceBound)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, leader.ErrLeaseLost) || !strings.Contains(cause.Error(), "not within RenewDeadline + RetryPeriod (12s)") {
			t.Errorf("leading ctx cause = %v, want ErrLeaseLost naming the fence", cause)
		}
		if !errors.Is(context.Cause(fence), leader.ErrLeaseLost) {
			t.Errorf("fence cause = %v, want ErrLeaseLost", context.Cause(fence))
		}
		if e.IsLeader() {
			t.Error("IsLeader after the fence closed")
		}
		if fenceBound >= leaseDuration {
			t.Errorf("the fence (%v) is not before a standby may take over (%v)", fenceBound, leaseDuration)
		}

		c.ret <- nil
		close(hang) // the stuck request fails at last; client-go gives up
		if err := <-c.done; !errors.Is(err, leader.ErrLeaseLost) {
			t.Errorf("Run = %v, want ErrLeaseLost", err)
		}
	})
}

// TestFenceOnAnotherHolder: once a read of the Lease shows another holder
// (the process was paused past LeaseDuration and a standby took over), the
// leading context is cancelled at that instant, not when client-go gives
// up RenewDeadline later, and Run returns at once.
func TestFenceOnAnotherHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		var l logs
		e := newElector(t, a, options(&l))
		c := start(t, e)
		ctx := <-c.leading
		cancelledAt := whenDone(ctx)
		c.ret <- nil

		time.Sleep(5 * time.Second)
		a.steal(t, "b") // the renewal at 6s conflicts; the read after it shows b
		err := <-c.done
		synctest.Wait() // for whenDone's callback
		seen, ok := a.firstReadOf("b")
		if !ok {
			t.Fatal("the elector never read the Lease held by b")
		}
		if got := cancelledAt(); !got.Equal(seen) {
			t.Errorf("leading ctx cancelled %v after the read that showed another holder, want at once", got.Sub(seen))
		}
		if !errors.Is(err, leader.ErrLeaseLost) || !strings.Contains(err.Error(), `held by "b"`) {
			t.Errorf("Run = %v, want ErrLeaseLost saying b holds the lease", err)
		}
		if d := time.Since(seen); d != 0 {
			t.Errorf("Run returned %v after the loss was seen, want at once", d)
		}
		if err := leader.CheckLeading(ctx); !errors.Is(err, leader.ErrNotLeader) {
			t.Errorf("CheckLeading after the loss = %v, want ErrNotLeader", err)
		}
		if n := l.count("New leader observed", `"leader"="b"`); n != 1 {
			t.Errorf("logged the new leader %d times, want once:\n%s", n, &l)
		}
		if h := a.holder(t); h != "b" {
			t.Errorf("Lease holder = %q, want b", h)
		}
	})
}

// TestCheckLeadingSeesPause: after a pause of the whole process longer than
// the fence (SIGSTOP, then SIGCONT), the first CheckLeading refuses, before
// any timer or the elector has run again.
func TestCheckLeadingSeesPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		var l logs
		e := newElector(t, a, options(&l))
		c := start(t, e)
		ctx := <-c.leading
		c.ret <- nil
		if err := e.Check(); err != nil {
			t.Errorf("Check while leading = %v, want nil", err)
		}

		leader.AgeRenewal(e, fenceBound+leaseDuration) // no goroutine runs meanwhile
		if err := e.Check(); err == nil || !strings.Contains(err.Error(), "the elector is stuck") {
			t.Errorf("Check while leading without renewals = %v, want it to say the elector is stuck", err)
		}
		if err := leader.CheckLeading(ctx); !errors.Is(err, leader.ErrNotLeader) {
			t.Fatalf("CheckLeading on waking = %v, want ErrNotLeader", err)
		}
		if !errors.Is(context.Cause(ctx), leader.ErrLeaseLost) {
			t.Errorf("leading ctx cause after the refused check = %v, want ErrLeaseLost: in-flight work must stop at once", context.Cause(ctx))
		}
		if err := e.Check(); err != nil {
			t.Errorf("Check after the term ended = %v, want nil", err)
		}
		if err := <-c.done; !errors.Is(err, leader.ErrLeaseLost) {
			t.Errorf("Run = %v, want ErrLeaseLost", err)
		}
	})
}

// TestGracefulShutdown: when Run's ctx ends, lead's ctx is cancelled but
// the lease is still renewed, and the fence stays open, until lead
// returns; then Run releases the lease, only if lead returned nil.
func TestGracefulShutdown(t *testing.T) {
	tests := []struct {
		name       string
		release    bool
		leadErr    error
		wantErr    string // "" means nil
		wantHolder string
	}{
		{name: "release after a clean stop", release: true, wantHolder: ""},
		{name: "no release without ReleaseOnCancel", wantHolder: "a"},
		{name: "no release when lead failed", release: true, leadErr: errors.New("a Reconcile is stuck"),
			wantErr: "leader-only work failed; the Lease ns/op is left to expire: a Reconcile is stuck", wantHolder: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newAPI()
				var l logs
				o := options(&l)
				o.ReleaseOnCancel = tt.release
				e := newElector(t, a, o)
				c := start(t, e)
				ctx := <-c.leading
				fence, _ := leader.Fence(ctx)
				c.cancel(errors.New("SIGTERM"))
				synctest.Wait()
				if cause := context.Cause(ctx); cause == nil || cause.Error() != "SIGTERM" {
					t.Fatalf("leading ctx cause on shutdown = %v, want Run's cause", cause)
				}

				// lead winds down for a minute: the lease stays held.
				a.set(func(a *api) { a.updates = 0 })
				time.Sleep(time.Minute)
				a.mu.Lock()
				renewals := a.updates
				a.mu.Unlock()
				if renewals < 25 || !e.IsLeader() || fence.Err() != nil || leader.CheckLeading(ctx) != nil {
					t.Errorf("while lead winds down: %d renewals in a minute, IsLeader %v, fence %v, CheckLeading %v; want the lease held",
						renewals, e.IsLeader(), fence.Err(), leader.CheckLeading(ctx))
				}

				c.ret <- tt.leadErr
				err := <-c.done
				if (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr))) {
					t.Errorf("Run = %v, want %q", err, tt.wantErr)
				}
				if h := a.holder(t); h != tt.wantHolder {
					t.Errorf("Lease holder after Run = %q, want %q", h, tt.wantHolder)
				}
				if err := leader.CheckLeading(ctx); !errors.Is(err, leader.ErrNotLeader) {
					t.Errorf("CheckLeading after Run returned = %v, want ErrNotLeader", err)
				}
				if e.IsLeader() {
					t.Error("IsLeader after Run returned")
				}
			})
		})
	}
}

// TestFenceDuringGracefulShutdown: losing the lease while lead winds down
// after a shutdown still closes the fence at once, so in-flight work that
// watches it stops.
func TestFenceDuringGracefulShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		var l logs
		o := options(&l)
		o.ReleaseOnCancel = true
		e := newElector(t, a, o)
		ctx, cancel := context.WithCancel(t.Context())
		fenced := make(chan time.Time, 1)
		done := make(chan error, 1)
		go func() {
			done <- e.Run(ctx, func(ctx context.Context) error {
				fence, _ := leader.Fence(ctx)
				<-fence.Done() // winds down until the lease is gone
				fenced <- time.Now()
				return nil
			})
		}()
		synctest.Wait()
		began := time.Now()
		time.Sleep(time.Second)
		cancel()
		time.Sleep(2 * time.Second) // renewal at 2s
		hang := make(chan struct{})
		a.set(func(a *api) { a.hang = hang })
		if at := <-fenced; !at.Equal(began.Add(2*time.Second + fenceBound)) {
			t.Errorf("fence closed %v after the last renewal, want %v", at.Sub(began.Add(2*time.Second)), fenceBound)
		}
		close(hang)
		a.set(func(a *api) { a.hang = nil })
		if err := <-done; err != nil {
			t.Errorf("Run after a shutdown = %v, want nil", err)
		}
	})
}

// TestLeadFails: a leading function that fails ends the term: Run returns
// its error without releasing the lease.
func TestLeadFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		var l logs
		o := options(&l)
		o.ReleaseOnCancel = true
		e := newElector(t, a, o)
		errBoom := errors.New("controller failed")
		var leadCtx context.Context
		err := e.Run(t.Context(), func(ctx context.Context) error {
			leadCtx = ctx
			time.Sleep(time.Minute)
			return errBoom
		})
		if !errors.Is(err, errBoom) || errors.Is(err, leader.ErrLeaseLost) {
			t.Errorf("Run = %v, want the leading function's error, not a loss", err)
		}
		if err := leader.CheckLeading(leadCtx); !errors.Is(err, leader.ErrNotLeader) {
			t.Errorf("CheckLeading after lead failed = %v, want ErrNotLeader", err)
		}
		if h := a.holder(t); h != "a" {
			t.Errorf("Lease holder = %q, want a: not released after a failure", h)
		}
	})
}

// TestRecampaign: after a loss, Run can campaign again; the new term is
// new, and the old one stays over.
func TestRecampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		var l logs
		e := newElector(t, a, options(&l))
		c := start(t, e)
		first := <-c.leading
		c.ret <- nil
		a.steal(t, "b")
		if err := <-c.done; !errors.Is(err, leader.ErrLeaseLost) {
			t.Fatalf("Run = %v, want ErrLeaseLost", err)
		}

		a.set(func(a *api) { a.thief = "" }) // b stops renewing
		stopped := time.Now()
		c = start(t, e)
		second := <-c.leading
		if ran, err := concurrentRun(e); ran || err == nil || !strings.Contains(err.Error(), "another Run is in progress") {
			t.Errorf("a second, concurrent Run = %v (lead ran: %v), want an error", err, ran)
		}
		if took := time.Since(stopped); took < leaseDuration {
			t.Errorf("took the lease %v after b stopped renewing, before LeaseDuration (%v)", took, leaseDuration)
		}
		if err := leader.CheckLeading(second); err != nil || !e.IsLeader() {
			t.Errorf("new term: CheckLeading = %v, IsLeader = %v", err, e.IsLeader())
		}
		if err := leader.CheckLeading(first); !errors.Is(err, leader.ErrNotLeader) {
			t.Errorf("old term after a new one began: CheckLeading = %v, want ErrNotLeader", err)
		}
		c.ret <- nil
		c.cancel(nil)
		if err := <-c.done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

func concurrentRun(e *leader.Elector) (bool, error) {
	ran := false
	err := e.Run(context.Background(), func(context.Context) error { ran = true; return nil })
	return ran, err
}

func TestCheckLeadingOutsideATerm(t *testing.T) {
	if err := leader.CheckLeading(context.Background()); err != nil {
		t.Errorf("CheckLeading(Background) = %v, want nil", err)
	}
	if f, ok := leader.Fence(context.Background()); ok || f != nil {
		t.Errorf("Fence(Background) = %v, %v; want nil, false", f, ok)
	}
}
