// Package workqueue holds the keys that wait for a reconcile.
//
// The contract, the same as client-go's util/workqueue:
//   - Stingy: a key that is waiting is stored once, however often it is added.
//   - Exclusive: a key is handed to one worker at a time; a key added while
//     it is being processed is queued again when the worker calls Done.
//   - Multi-producer, multi-consumer: every method is safe for concurrent use.
//   - Shutdown: after ShutDown, Add is a no-op and Get returns the keys still
//     waiting, then shutdown=true to every caller; ShutDownWithDrain also
//     waits for the keys in processing to be marked Done.
//
// Whoever calls Get must call Done for the key, and calls Forget when the key
// no longer needs backoff (after a success or a terminal failure).
//
// Interface is what the reconcile workers drain. New returns ctrlkit's
// Queue: client-go's semantics plus priorities (PriorityInterface),
// round-robin fairness across groups of keys, a starvation bound, and
// delays in one structure. NewClientGo wraps client-go's typed
// rate-limiting queue behind the same Interface. Both report client-go's
// metric names through Metrics.
package workqueue
