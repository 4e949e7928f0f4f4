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
// Goroutines: Start runs each informer's reflector and processor goroutines
// (client-go's); they stop when Start's ctx is done, and Wait blocks until
// they have. Event handlers run on the informers' goroutines and must not
// block.
package informer
