// Package reconcile holds the contract between ctrlkit and an operator's
// code, and the workers that drive it.
//
// An operator implements Reconciler. A Controller runs a fixed number of
// workers that take Requests from a workqueue and call Reconcile for each:
//   - nil error, zero Result: done; the key's backoff is forgotten.
//   - Result.RequeueAfter > 0: reconcile the key again after that delay.
//   - an error: retried with the queue's rate limiter (exponential backoff).
//   - a TerminalError: not retried; logged and counted.
//   - a panic: recovered, turned into an error carrying the stack, counted
//     in controller_runtime_reconcile_panics_total, and retried.
//
// A key is never reconciled by two workers at once. Each Reconcile receives
// a logr.Logger in its context (logr.FromContextOrDiscard) carrying the keys
// controller, namespace, name and reconcileID.
//
// A controller started with a leading context (package leader: the manager
// starts leader-only controllers so) is fenced: a worker tests
// leader.CheckLeading right before each call to Reconcile and calls it
// only if the test passes, and in-flight reconciles have their ctx
// cancelled the moment the lease is lost, even during a graceful stop. A
// worker paused between that test and the call (SIGSTOP) still makes the
// call when it wakes; package leader says what then holds.
//
// Goroutines: Controller.Start runs Options.Workers workers and returns once
// they have stopped (under a leading context, a context.AfterFunc callback
// also cancels in-flight reconciles when the lease is lost); nothing runs
// before Start or after it returns, unless a Reconcile ignored cancellation
// past the shutdown timeout (Start then returns an error saying so, and the
// controller cannot be started again until that Reconcile returns).
package reconcile
