package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrNotLeader is wrapped by CheckLeading's error: the work asking may no
// longer act as the leader. A write refused with it was not sent.
var ErrNotLeader = errors.New("leader: not the leader")

// termKey is the context key of the term a leading context belongs to.
type termKey struct{}

// term is one period of leadership: from acquiring the lease until it is
// lost or Run ends. Its fence is cancelled once this replica can no longer
// prove it holds the lease; a term never resumes after that.
type term struct {
	e           *Elector
	fence       context.Context
	closeFence  context.CancelCauseFunc
	cancelLead  context.CancelCauseFunc // the leading function's context
	stopElector context.CancelFunc      // client-go's elector of this Run

	mu   sync.Mutex
	lost error
}

// CheckLeading reports whether work running under ctx may still act as the
// leader. If ctx descends from a leading context (the one Elector.Run
// passes to its leading function, which a manager passes on to leader-only
// controllers and their Reconciles), it returns an error wrapping
// ErrNotLeader once that term of leadership is over: the lease was seen
// held by another replica, or its last renewal is older than the fence
// (see the package doc), or Run returned. Otherwise, and for contexts that
// belong to no term, it returns nil. It never blocks and is safe for
// concurrent use. ctrlkit's workers call it before each Reconcile and its
// write helpers (package objects) before each write.
func CheckLeading(ctx context.Context) error {
	t, ok := ctx.Value(termKey{}).(*term)
	if !ok {
		return nil
	}
	return t.check(time.Now())
}

// Fence returns a context that is cancelled the moment the term of
// leadership ctx belongs to is over, with a cause wrapping ErrLeaseLost if
// the lease was lost; ok is false when ctx belongs to no term. Unlike the
// leading context, the fence is not cancelled by a graceful shutdown,
// during which this replica still holds the lease. Cancellation comes from
// a timer or from the elector's goroutine: CheckLeading is the synchronous
// test.
func Fence(ctx context.Context) (fence context.Context, ok bool) {
	t, ok := ctx.Value(termKey{}).(*term)
	if !ok {
		return nil, false
	}
	return t.fence, true
}

// check is CheckLeading for t at now: it closes the fence if the elector's
// records show the lease can no longer be proven held.
func (t *term) check(now time.Time) error {
	if err := t.lostCause(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	if err := t.e.fenced(now); err != nil {
		t.lose(err)
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return nil
}

// lose ends the term with cause: it closes the fence, cancels the leading
// context, and stops client-go's elector, which must not renew, or take the
// lease again, while the leader-only work may still be winding down. Only
// the first cause counts.
func (t *term) lose(cause error) {
	t.mu.Lock()
	first := t.lost == nil
	if first {
		t.lost = cause
	}
	t.mu.Unlock()
	if first {
		t.closeFence(cause)
		t.cancelLead(cause) // a no-op if shutdown cancelled it first
		t.stopElector()
		t.e.opts.Logger.Info("Stopped leading", "lease", t.e.lease(), "identity", t.e.opts.Identity, "reason", cause.Error())
	}
}

// lostCause is why the term ended, or nil while it lasts.
func (t *term) lostCause() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lost
}

// fenced returns an error wrapping ErrLeaseLost if, at now, this replica
// cannot prove it holds the lease: another holder was seen after its last
// successful write, or that write was sent bound (RenewDeadline +
// RetryPeriod) or more ago. Times carry Go's monotonic clock reading, so a
// process that was paused (SIGSTOP) sees the pause as elapsed time.
func (e *Elector) fenced(now time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lost != nil {
		return e.lost
	}
	if age := now.Sub(e.renewedAt); age >= e.bound {
		return fmt.Errorf("%w: the Lease %s was last renewed %v ago, not within RenewDeadline + RetryPeriod (%v)",
			ErrLeaseLost, e.lease(), age.Round(time.Millisecond), e.bound)
	}
	return nil
}

// untilFence is how long after now the fence closes unless a renewal
// comes first.
func (e *Elector) untilFence(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(0, e.bound-now.Sub(e.renewedAt))
}
