// Package manager owns the clients, the informer cache, the controllers and
// the HTTP endpoints of an operator, and runs them in order.
//
// A program creates one Manager with New, declares the informers it reads
// (informer.For on Manager.Cache), adds controllers with AddController and
// the watches that feed them, and calls Run:
//
//  1. the /metrics, /healthz and /readyz endpoints start (if Options.HTTPAddr
//     is set);
//  2. every declared informer starts;
//  3. Run waits until every informer has synced (WaitForCacheSync), logging
//     progress; no worker runs before that, so a Reconcile always sees the
//     objects that existed at start. A sync that does not finish within
//     Options.CacheSyncTimeout fails Run with an error naming each informer;
//  4. /readyz turns ready, and the controllers' workers and any added
//     Runnables start;
//  5. when ctx is cancelled, workers stop taking keys and in-flight
//     reconciles get Options.ShutdownTimeout to finish; then the informers
//     and the HTTP server stop and Run returns.
//
// A Manager holds no process-global state: its Prometheus registry,
// controller names and event broadcaster are its own, so several managers
// can live in one process.
//
// Goroutines: Run owns every goroutine it starts (HTTP server, informers,
// workers, Runnables) and joins them before it returns. EventRecorder starts
// the event broadcaster's goroutine on first use; Run shuts it down.
package manager
