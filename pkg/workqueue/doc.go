// Package workqueue holds the keys that wait for a reconcile.
//
// The contract, client-go's util/workqueue's except for the last point:
//   - Stingy: a key that is waiting is stored once, however often it is added.
//   - Exclusive: a key is handed to one worker at a time; a key added while
//     it is being processed is queued again when the worker calls Done.
//   - Multi-producer, multi-consumer: every method is safe for concurrent use.
//   - Shutdown: after ShutDown, Add is a no-op and Get returns the keys still
//     waiting, then shutdown=true to every caller; ShutDownWithDrain also
//     waits for the keys in processing to be marked Done, until they are or
//     until ShutDown is called.
//   - Delays: AddAfter queues a key once its delay has passed, and of two
//     delays the earlier wins. An Add of a key waiting on a delay queues it
//     now and drops the delay, as controller-runtime's priority queue does:
//     the Reconcile that runs now asks for a later run again if it still
//     needs one. (client-go's queue, and so ClientGoQueue, would hand the
//     key out now and once more when the delay ends.)
//
// Whoever calls Get must call Done for the key, and calls Forget when the key
// no longer needs backoff (after a success or a terminal failure).
//
// Queue adds priorities, and a starvation bound that does not undo them:
//   - Higher priorities are handed out first. Within a priority, fairness
//     groups (Options.Group) take turns, first in, first out within a group.
//   - Once the oldest PriorityLow key has waited Options.StarvationBound
//     (5s by default), the low keys get 1 Get in every 4 while keys of
//     higher priority wait, and never 2 in a row; the other Gets keep
//     priority order.
//   - So a change waits at most 1 Get for a low backlog of any size and
//     age: a key added at PriorityNormal or above while no key of its
//     priority or above waits is handed out by the second Get after its Add
//     at the latest (unless keys of higher priority arrive meanwhile). With
//     k such keys ahead of it, the backlog adds at most ceil((k+1)/3) Gets.
//
// Interface is what the reconcile workers drain. New returns ctrlkit's
// Queue: client-go's semantics plus priorities (PriorityInterface),
// round-robin fairness across groups of keys, the starvation bound, and
// delays in one structure. NewClientGo wraps client-go's typed
// rate-limiting queue behind the same Interface. Both report
// controller-runtime's workqueue series through Metrics.
package workqueue
