// Package client writes objects of every type in a scheme, built-in or
// custom, with no generated clientset: Create, Update, Patch (merge, JSON
// patch, strategic merge for built-ins), server-side Apply, Delete with
// preconditions and propagation, DeleteAllOf, and the same writes on the
// status subresource (Client.Status). Client.With gives dry runs, another
// field manager, or apply with force.
//
// Reads belong to listers (informer.Lister): they cost no request.
// GetFromServer and ListFromServer are for the rare read that must bypass
// the cache.
//
// The contract:
//   - Built-in types travel as protobuf, as client-go's clientset sends
//     them when asked; custom types as JSON, decoded straight into their Go
//     type, with no unstructured step. A write sets the object passed to
//     it to the server's answer, every field of it, and leaves it as it
//     was when the write fails (Apply, which takes an apply configuration,
//     leaves that unchanged).
//   - Server-side apply takes apply configurations (ApplyConfiguration),
//     which carry only the fields the operator set: client-go's for
//     built-in types, controller-gen's generated ones for custom types.
//     The field manager is Options.FieldManager, the manager's name for a
//     manager's client. The API server counts a manager's applies and its
//     other writes (Create, Update, Patch) as two owners, so a field one of
//     them set conflicts with an Apply that changes it; a controller, the
//     authority on the fields it applies, applies with
//     WriteOptions.Force.
//   - Read-your-own-writes, on when Options.Cache is set (a manager's
//     client has it): when a write returns, a read through any Lister of
//     that resource in the Cache reflects at least that write — the
//     object at that resourceVersion or newer, or, after a deletion
//     (including an update that removed an object's last finalizer), no
//     object with that UID — and so does every List, for every earlier
//     write by this client to that informer. The wait happens inside the
//     write, for at most ReadYourWrites.Timeout, after which the write
//     returns a *CacheLagError (the write itself succeeded). A write to a
//     resource the Cache has no started informer for does not wait, and
//     costs nothing more than the request.
//   - What it does not promise: writes by other processes, or by other
//     clients in this one (Manager.Kubernetes, Manager.Dynamic), are not
//     awaited; a lister may show any version at or after a write, not that
//     exact version; an informer narrowed by a field selector other than
//     metadata.name/namespace may make a write of an object outside its
//     selector wait until its next event, or the timeout. A dry run waits
//     for nothing.
//   - Writes are fenced by leadership: under the ctx of a leader-only
//     Reconcile whose replica can no longer prove it holds the lease, a
//     write is not sent and its error wraps leader.ErrNotLeader. The check
//     is at the transport, after client-side rate limiting, and a write
//     that passed it goes no further than its connection if the term
//     ends before it reaches the socket (leader.FenceConfig). A client
//     given Options.HTTPClient is fenced only if that was built from
//     leader.FenceConfig.
//   - Errors from the API server are returned as they are, for apierrors'
//     predicates: a conflict (stale resourceVersion) or not-found is
//     expected now and then; return it from Reconcile to retry.
//
// For unit tests, package fake serves the same requests from memory.
package client
