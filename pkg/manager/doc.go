// Package manager owns the clients, the informer cache, the controllers and
// the HTTP endpoints of an operator, and runs them in order.
//
// A program creates one Manager with New, declares the informers it reads
// (informer.For on Manager.Cache), adds controllers with AddController and
// the watches that feed them, and calls Run:
//
//  1. the /metrics, /healthz and /readyz endpoints start (if Options.HTTPAddr
//     is set), and the HTTPS server of /metrics (if Options.SecureMetrics
//     is set, which takes /metrics off Options.HTTPAddr);
//  2. every declared informer starts;
//  3. Run waits until every informer has synced (WaitForCacheSync), logging
//     progress; no worker runs before that, so a Reconcile always sees the
//     objects that existed at start. A sync that does not finish within
//     Options.CacheSyncTimeout fails Run with an error naming each informer;
//  4. /readyz turns ready, and the controllers' workers and any added
//     Runnables start; with Options.LeaderElection, leader-only controllers
//     and Runnables (AddLeaderOnly) start each time this replica becomes
//     the leader, after every cached object of their watches is enqueued;
//     while it stands by their queues hold no keys;
//  5. when ctx is cancelled, workers stop taking keys and in-flight
//     reconciles and Runnables get Options.ShutdownTimeout to finish; then
//     the informers and the HTTP servers stop and Run returns.
//
// Controllers may also be added (AddController) and removed
// (RemoveController) while Run runs, with informers declared then: a
// controller added while running waits until its informers have synced
// (the sync gate, bounded by Options.CacheSyncTimeout) and starts; a
// removed one stops as on shutdown, and the informers only it used
// (its watches' sources and ControllerOptions.Reads) stop and free their
// objects. Whenever an informer a controller uses is served but not
// synced (a CRD installed or recreated while running, see package
// informer), the controller's workers hold their keys until it has synced.
//
// With Options.Sharding, the controllers it names are sharded (package
// shard): each replica reconciles, and caches in the informers declared in
// Manager.ShardScope, only its share of their objects.
//
// With Options.Webhook, the webhook server (Manager.Webhooks) and its
// certificate source start with the endpoints in step 1, on every replica,
// so that the API server can call the operator's conversion webhook for
// the lists of step 3; /readyz also waits for the webhook server to be
// Ready. They stop last in step 5, after the informers.
//
// An error from any controller or Runnable, leader-only or not, stops Run
// the same way. Losing the lease aborts the leader-only work at once (see
// package leader for the fencing that keeps a replica that lost the lease
// from reconciling and writing); by default it then aborts everything and
// Run returns within the abort timeout, an error wrapping
// leader.ErrLeaseLost, for a process supervisor to restart the replica
// (Options.OnLeaseLost changes this).
//
// Manager.Client writes every type in the scheme, and its writes are in the
// cache's listers when it returns (package client). For tests, a Manager
// runs unchanged on the in-memory API server of package fake
// (manager.New(cluster.Config(), ...)).
//
// A Manager holds no process-global state: its Prometheus registry,
// controller names and event broadcaster are its own, so several managers
// can live in one process. client-go's contextual logs from the manager's
// goroutines (reflectors, leader election, events) go to Options.Logger.
//
// Every HTTP server the manager starts speaks HTTP/1.1 only by default,
// against HTTP/2 rapid reset (CVE-2023-44487); SecureMetricsOptions.HTTP2
// and WebhookOptions.HTTP2 turn it on for the metrics and the webhook
// server.
//
// Goroutines: Run owns every goroutine it starts (HTTP servers, informers,
// the secure metrics server's certificate source, workers, Runnables, the
// leader elector) and joins them before it
// returns, except a Runnable that has not returned ShutdownTimeout (the
// abort timeout, after a lost lease) after its ctx was cancelled: Run then
// returns an error naming it and leaves it running. EventRecorder starts
// the event broadcaster's goroutine on first use; Run shuts it down on
// every return path.
package manager
