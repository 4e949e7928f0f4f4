package reconcile

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Request names the object to reconcile. Namespace is empty for
// cluster-scoped objects.
type Request struct {
	types.NamespacedName
}

// Result tells the worker what to do after a successful Reconcile. The zero
// value means the object is in its desired state.
type Result struct {
	// RequeueAfter, when positive, reconciles the same Request again after
	// this long, without backoff. It is ignored when Reconcile returns an
	// error: the error's backoff wins.
	RequeueAfter time.Duration
}

// IsZero reports whether r asks for nothing.
func (r Result) IsZero() bool { return r == Result{} }

// Reconciler moves the object named by a Request towards its desired state.
//
// Reconcile must be safe for concurrent use on different Requests; ctrlkit
// never calls it concurrently for the same Request. Objects read from a
// lister belong to the cache and must not be mutated: DeepCopy them first.
// ctx is cancelled on shutdown (after the grace period) or when the
// per-reconcile timeout expires; a Reconcile that ignores it delays shutdown.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// Func adapts a function to a Reconciler.
type Func func(ctx context.Context, req Request) (Result, error)

var _ Reconciler = Func(nil)

// Reconcile calls f(ctx, req).
func (f Func) Reconcile(ctx context.Context, req Request) (Result, error) {
	return f(ctx, req)
}

// TerminalError wraps err so that the worker does not retry the Request: use
// it for failures that only a change to the object can fix (an invalid spec,
// say). The Request is reconciled again on the object's next event. The
// result unwraps to err and satisfies IsTerminal.
func TerminalError(err error) error {
	return &terminalError{err: err}
}

// IsTerminal reports whether err, or any error it wraps, came from
// TerminalError.
func IsTerminal(err error) bool {
	var te *terminalError
	return errors.As(err, &te)
}

type terminalError struct{ err error }

func (e *terminalError) Unwrap() error { return e.err }

func (e *terminalError) Error() string {
	if e.err == nil {
		return "terminal error"
	}
	return "terminal error: " + e.err.Error()
}
