// Package objects holds the helpers every operator needs for the objects it
// owns: finalizers, controller owner references, create-or-update from the
// cache, a writer for custom types that have no generated clientset, and
// status conditions.
//
// The contract:
//   - Reads come from the cache. CreateOrUpdate reads the current object
//     from an informer.Lister and never GETs it from the API server. It
//     mutates a DeepCopy; cached objects are never modified.
//   - Writes are skipped when nothing changed: when mutate leaves the object
//     semantically equal (equality.Semantic.DeepEqual) to the cached one,
//     no request is made, so a reconcile of an object already in shape
//     costs no API call.
//   - A stale cache shows as an error, returned as is: an Update that lost a
//     race fails with a conflict (apierrors.IsConflict), a Create of an
//     object the cache had not seen yet with AlreadyExists. Return it from
//     Reconcile; the retry, with backoff, reads a fresher cache.
//   - Writes are fenced: CreateOrUpdate and DynamicWriter call
//     leader.CheckLeading(ctx) just before each request, so under the ctx of
//     a leader-only Reconcile they send nothing once the replica can no
//     longer prove it holds the lease (the error wraps leader.ErrNotLeader).
//     Writes through a raw clientset are not checked: see package leader.
//   - The pure helpers (AddFinalizer, RemoveFinalizer,
//     SetControllerReference, SetCondition) change only the object they are
//     given, which must be the caller's own copy, never one from a lister,
//     and report whether they changed it, so a caller writes only when
//     needed.
//
// Nothing here starts goroutines or keeps state: every function is safe
// for concurrent use on distinct objects, and a DynamicWriter is safe for
// concurrent use.
package objects
