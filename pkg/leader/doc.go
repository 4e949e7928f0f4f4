// Package leader decides which replica of an operator may reconcile, with a
// coordination.k8s.io Lease and client-go's leaderelection.
//
// An Elector campaigns for one Lease. While it holds the lease it calls its
// leading function with a context that is cancelled when leadership ends;
// a manager (package manager) uses it to start leader-only workers, keeping
// every replica's caches synced so a standby takes over warm.
//
// Timing follows client-go (and kube-controller-manager): a leader renews
// every RetryPeriod and gives up when it could not renew for RenewDeadline;
// a standby takes the lease once it has not been renewed for LeaseDuration.
// LeaseDuration > RenewDeadline > 1.2 × RetryPeriod must hold, so a leader
// always stops before anyone else can start. A leader that shuts down with
// ReleaseOnCancel clears the lease so a standby takes over within about one
// RetryPeriod instead of waiting for the lease to expire.
//
// What a user must do: make Reconcile return when its ctx is cancelled.
// When leadership is lost, ctrlkit starts no new Reconcile and cancels the
// ctx of those in flight, but it cannot stop a goroutine that ignores its
// ctx; such a Reconcile can still write after another replica leads. Use
// optimistic concurrency (resourceVersion on Update) for writes that must
// not race.
//
// Goroutines: Run runs client-go's elector (its renew loop) and the leading
// function in goroutines it joins before returning.
package leader
