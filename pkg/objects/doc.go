// Package objects holds the helpers every operator needs for the objects it
// owns: finalizers, controller owner references, create-or-update from the
// cache through the client (package client), and status conditions.
//
// The contract:
//   - Reads come from the cache. CreateOrUpdate reads the current object
//     from an informer.Lister and never GETs it from the API server. It
//     mutates a DeepCopy; cached objects are never modified.
//   - Writes are skipped when nothing changed: when mutate leaves the object
//     semantically equal (equality.Semantic.DeepEqual) to the cached one,
//     no request is made, so a reconcile of an object already in shape
//     costs no API call.
//   - Another writer shows as an error, returned as is: an Update that
//     lost a race fails with a conflict (apierrors.IsConflict), a Create of
//     an object the cache had not seen yet with AlreadyExists. With a
//     manager's client the cache reflects every earlier write through that
//     client, so these come from other writers. Return the error from
//     Reconcile; the retry, with backoff, reads a fresher cache.
//   - Writes go through package client, so they are fenced by leadership
//     as every write of the client is.
//   - The pure helpers (AddFinalizer, RemoveFinalizer,
//     SetControllerReference, SetCondition) change only the object they are
//     given, which must be the caller's own copy, never one from a lister,
//     and report whether they changed it, so a caller writes only when
//     needed.
//
// Nothing here starts goroutines or keeps state: every function is safe
// for concurrent use on distinct objects.
package objects
