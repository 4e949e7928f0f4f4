// Package informer is ctrlkit's handle on the informer cache, and turns the
// cache's events into reconcile keys.
//
// A Cache owns the informers of one manager, all sharing the same rules
// (namespaces, list options, resync). An informer is declared with For (a
// typed informer for a Go type in the scheme, built-in or custom),
// ForResource (unstructured objects of any resource) or ForMetadata.
// Declaring the same type twice (in the same Scope, if any) returns the
// same informer. Nothing is
// cached that was not declared. Every informer is a client-go
// SharedIndexInformer; how it lists and decodes is said below. Every
// informer fills its cache with a consistent list (resourceVersion ""),
// not client-go's default WatchList stream nor a list at resourceVersion
// "0", which the API server may answer from a cache older than what the
// client saw before it restarted; then it watches from the list's
// resourceVersion. Custom and metadata-only types ask for that list
// unpaginated; built-in types, through Clients.Config, in pages of 10,000
// (see below).
//
// Namespaces: Options.Namespaces (or a type's TypeOptions.Namespaces)
// caches only the namespaces listed, through one client-go informer per
// namespace, read through one Lister: Get and ListInNamespace go to the
// namespace's informer, List and ByIndex ask each. Reading a namespace
// that is not cached is an ErrNamespaceNotCached error, never an empty
// answer taken for the truth. Handlers of such an informer are called from
// one goroutine per namespace.
//
// Scopes: an informer declared in a Scope (For[T](c, scope)) is another
// informer of the type, apart from the one declared without it, narrowed
// by the Scope's label selector or shardSelector. Scope.Set changes them
// while the informer runs: it lists anew beside the running one, switches
// once synced, and tells its handlers what left and what entered (see
// Scope). A manager's shard scope is one (manager.Manager.ShardScope).
//
// Runtime: informers may be declared before or after Start; declared
// after, they start at once (WaitForSources waits for them). Cache.Use
// reference-counts an informer: when the last use is released, it stops,
// its objects are freed and the Cache forgets it (ErrRemoved for the old
// value); a manager uses the informers of each controller until the
// controller is removed. An informer whose type is not served yet
// (TypeOptions.WhenServed, for a CRD installed later) waits, asking
// discovery every Options.DiscoveryInterval, and starts when it is served.
// When a list or watch finds a running informer's resource gone (404) and
// discovery agrees (its CRD was deleted), the informer stops quietly, with
// one log line instead of a reflector retrying and logging every few
// seconds; its handlers get a delete for each object it still held; and it
// waits for the API to come back, then starts again and delivers the new
// objects. Source.Served and Source.HasSynced tell where an informer is.
//
// Built-in types are listed and watched in protobuf, with JSON accepted
// (in JSON when Clients.Config's ContentType is JSON), and each list is
// decoded item by item while it is read rather than once all of it has
// arrived; a first list of more than 10,000 objects comes in pages, each
// requested while the one before is still being read (the figures are in
// docs/design.md).
//
// Custom Go types are listed and watched as JSON decoded straight into
// their Go type. Both go through Clients.Config, which a manager sets
// (For picks, in one place: builtin.go). An object
// that does not decode into its Go type (a CRD schema that drifted from the
// struct) is left out of the cache, logged through the logger of Start's
// ctx and counted in ctrlkit_cache_decode_errors_total{informer}
// (Cache.Collector); the other objects of its list are cached.
// An object that stops decoding is not removed: when client-go's reflector
// relists after the watch event it could not decode, the cache keeps the
// last version of it that decoded (logged and counted too), so a
// Reconciler never takes it for deleted; its next change that decodes
// replaces it.
//
// Metadata only: ForMetadata declares an informer of a kind's metadata
// (metav1.PartialObjectMetadata, no spec, status or data), listed and
// watched through client-go's metadata client, for controllers that only
// map objects to their owners or read labels: a cluster-wide watch of
// Secrets or Pods then caches a fraction of the bytes. It is scoped like
// For, its objects carry the kind's apiVersion and kind, and it works with
// indexes, AwaitWrite, Handler and OwnerKey. A resource has one informer:
// declaring it both metadata-only and with For or ForResource is an error.
//
// Indexes: AddIndex declares a named index on an informer, computed by a
// typed IndexFunc; Lister.ByIndex returns the cached objects filed under a
// key, and Lister.ByIndexInNamespace those of one namespace, through a
// companion index keyed by namespace/key (a lookup, not a filter).
// IndexByControllerOwner and ControllerKey find the objects an owner
// controls, under the conventional name ControllerIndex. An index may be
// declared before or after Start: after, AddIndex files the objects already
// cached before it returns, holding the cache's write lock, so that
// informer's events and reads wait for it and none sees the index half
// built. Each name is declared once per informer (ErrIndexExists); reading
// an undeclared index is an error naming it. Index functions run under that
// lock: they must be fast, depend on the object alone, and never read the
// cache. The objects returned belong to the cache: DeepCopy before mutating.
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
// Goroutines: Start runs, for each declared informer, a supervisor
// goroutine (which waits for its API and restarts it) and client-go's
// reflector and processor goroutines for each of its namespaces, with
// one listener pair per event handler, among them the one the first
// AwaitWrite on it adds to track writes; an informer declared after Start
// gets them at declaration. They stop when Start's ctx is done, or when the last use
// of their informer is released (Cache.Use), and Wait blocks until they
// have. Event handlers run
// on the informers' goroutines and must not block. AwaitWrite blocks its
// caller; the first on an informer adds the event handler (and so
// client-go's listener goroutines) that tracks writes, for the informer's
// life. AddIndex starts no goroutine; after Start it blocks
// its caller while it files the cached objects.
package informer
