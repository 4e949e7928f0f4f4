// Package informer is ctrlkit's handle on the informer cache, and turns the
// cache's events into reconcile keys.
//
// A Cache owns one client-go SharedInformerFactory for built-in types and
// one informer per custom type, all sharing the same rules (namespace, list
// options, resync). Informers are declared before the Cache starts, with
// For (a typed informer for a Go type in the scheme, built-in or custom) or
// ForResource (unstructured objects of any resource). Declaring the same
// type twice returns the same informer. Nothing is cached that was not
// declared: asking for an undeclared type after Start is an error that names
// the declaration to add, never a silent cluster-wide watch.
//
// Objects in the cache are shared: never mutate an object from a Lister,
// DeepCopy it first. Unless Options.KeepManagedFields is set, managedFields
// are stripped before objects enter the cache.
//
// Handler turns add, update and delete events into namespace/name keys,
// through a MapFunc (ObjectKey, OwnerKey, ClusterOwnerKey or a user
// function) after Predicates have had their say. Deletes observed only
// through a relist arrive as cache.DeletedFinalStateUnknown tombstones and
// are unwrapped.
//
// Read your own writes: after a write the API server accepted, a client
// calls Cache.AwaitWrite with what the server returned; it blocks until
// every started informer of that resource holds the object at that
// resourceVersion or later (for a deletion: no longer holds it), has
// handled a later event, or does not cache the object (another namespace,
// labels outside its selector), or until the caller's ctx ends. A Lister
// read after it returns is not older than the write. It does not await
// writes by other processes, nor bring the rest of the cache up to date. An
// informer narrowed by a field selector on a field other than metadata.name
// or metadata.namespace may wait, for an object outside its scope, until it
// handles an event newer than the write, or until the caller's deadline. A resourceVersion that is not a
// positive decimal integer cannot be compared and is not awaited.
//
// Goroutines: Start runs each informer's reflector and processor goroutines
// (client-go's), including one listener pair for the handler each informer
// gets at declaration to track writes for AwaitWrite; they stop when
// Start's ctx is done, and Wait blocks until they have. Event handlers run
// on the informers' goroutines and must not block. AwaitWrite starts no
// goroutine: it blocks its caller.
package informer
