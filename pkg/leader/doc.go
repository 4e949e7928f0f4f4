// Package leader decides which replica of an operator may reconcile, with a
// coordination.k8s.io Lease and client-go's leaderelection, and fences a
// replica that can no longer prove it holds the lease.
//
// An Elector campaigns for one Lease. While it holds the lease it runs its
// leading function with a leading context; a manager (package manager)
// uses it to run leader-only controllers and Runnables, keeping every
// replica's caches synced so a standby takes over warm. NewForConfig gives
// the Lease a client of its own (own rate limiter, a request timeout of
// max(RenewDeadline/2, 1s), user agent ".../leader-election"), so the
// workload's requests never delay a renewal.
//
// # Timing
//
// The leader renews every RetryPeriod. A standby takes the lease once it
// has seen no renewal for LeaseDuration, counted in whole seconds as the
// Lease stores it. The leader fences itself (below) RenewDeadline +
// RetryPeriod after the moment it sent its last successful renewal, about
// when client-go gives up too. A standby cannot take the lease sooner than
// LeaseDuration after that renewal reached the API server, so New requires
// LeaseDuration (whole seconds) ≥ 1.1 × (RenewDeadline + RetryPeriod); the
// difference (3s at the defaults of 15s/10s/2s) absorbs clocks that run at
// rates up to about 10% apart and writes already on the wire. It also
// requires client-go's LeaseDuration > RenewDeadline > 1.2 × RetryPeriod.
//
// # Fencing: what is guaranteed
//
// A term of leadership lasts from acquiring the lease until this replica can
// no longer prove it holds it: when a read of the Lease shows another
// holder, when the last successful renewal was sent RenewDeadline +
// RetryPeriod ago or more (on Go's monotonic clock, so a process stopped
// with SIGSTOP sees its pause as soon as it runs again), when client-go
// gives up, or when Run returns. A term never resumes: leading again is a
// new term. When a term ends, its leading context and its Fence are
// cancelled at once (a timer and the elector's goroutine do it), and
// CheckLeading, which tests the same conditions synchronously, returns an
// error wrapping ErrNotLeader for every context derived from it. ctrlkit
// calls CheckLeading before each Reconcile of a leader-only controller,
// and in the transport of the manager's writing clients (Manager.Client,
// Kubernetes, Dynamic; see FenceConfig) for every request but a read,
// after client-go's client-side rate limiter: a write that waited there,
// or in a paused process, while the term ended is refused, not sent. A
// write that passed that check is tied to its connection, which writes
// nothing more once the term is over, so a process paused between the
// check and the socket does not send it on waking either. The caches'
// lists and watches have connections of their own, which the end of a
// term leaves open. It cancels the ctx of in-flight
// leader-only reconciles when the Fence closes. So, with timings New
// accepts:
//
//   - no worker decides to start a leader-only Reconcile, and no write
//     through ctrlkit's clients is sent, after this replica saw another
//     holder or after its last renewal is older than the fence, not even
//     right after a pause;
//   - no other replica can have taken the lease when such a check passed,
//     unless clocks ran more than about 10% apart.
//
// # What is not guaranteed
//
//   - The last check and the system call that writes to the socket are
//     not atomic. A pause right between the two (a few instructions), or
//     a request already in the kernel's socket buffers, or delayed on the
//     network, for longer than the margin between the fence and a
//     standby's takeover (LeaseDuration - RenewDeadline - RetryPeriod),
//     can still reach the API server after another replica took over.
//     Through a client not built from FenceConfig (an Options.HTTPClient
//     of package client built otherwise), writes are not fenced at all.
//   - A Reconcile that was running when the process was paused runs on
//     when it wakes, until it sees its ctx cancelled: no Go code can
//     preempt it. Its writes through ctrlkit's clients are refused.
//   - Nor are the check and the call to Reconcile. A worker paused (or
//     descheduled) right between its last check and the call starts that
//     one Reconcile when it runs again, at most one per worker. It starts
//     with CheckLeading already failing, its ctx is cancelled as soon as
//     the process runs its timers again, and its writes through
//     ctrlkit's clients are refused. A Reconcile that must not even read
//     after the lease is lost calls CheckLeading first.
//   - Writes that bypass the check are not fenced: through a client the
//     operator built itself, or with a context that does not descend from
//     the Reconcile's (context.Background() in a Reconcile). Make Reconcile
//     return when its ctx is done and pass that ctx to every call, call
//     CheckLeading before other writes, and use optimistic concurrency
//     (resourceVersion on Update) for writes that must not race.
//   - A suspend of the whole machine that stops the monotonic clock (a VM
//     paused by its hypervisor, suspend to RAM) is not seen as elapsed time.
//   - Reads from the caches are not fenced; they are local.
//
// # Losing the lease
//
// By default a manager whose replica loses the lease aborts everything (the
// contexts of all controllers, Runnables and reconciles are cancelled at
// once) and Run returns an error wrapping ErrLeaseLost within the abort
// timeout, so that a process supervisor restarts the replica. This is the
// default because a loss is not a planned shutdown: another replica leads
// already or soon, everything this one was doing is level-triggered and is
// redone after the restart, and exiting quickly ends any Reconcile that
// ignores its ctx (the one case fencing cannot stop from writing through a
// raw client) within the abort timeout rather than after ShutdownTimeout.
// kube-controller-manager (which exits) and controller-runtime (which skips
// its graceful shutdown) do the same. manager.Options.OnLeaseLost can keep
// the graceful shutdown for the work that is not leader-only, or keep the
// replica running as a warm standby that campaigns again, but only once
// its leader-only work has stopped. In every case the leader-only work is
// aborted at once, and the lease is released (ReleaseOnCancel) only after
// a shutdown in which it all stopped.
//
// # Health and logs
//
// Elector.Check, for /healthz, passes on standbys and on a replica that
// lost the lease and campaigns again. It fails once the API server has
// refused the Lease (403 or 401) for LeaseDuration + RenewDeadline; the
// refusal is logged through Options.Logger with the RBAC rule to add.
// client-go's leader-election logs go to Options.Logger too, never to the
// global klog.
//
// Goroutines: Run runs client-go's elector (its acquire and renew loop) in
// a goroutine. Once the lease is acquired, client-go starts a goroutine
// that watches the term (the fence timer, client-go's renewals) and runs
// the leading function in one more. Run joins all of them before it
// returns. CheckLeading and Fence start none.
package leader
