// Package shard holds ctrlkit's sharding protocols: which member owns a
// key (Ring: rendezvous hashing in the label mode, a hash ring with
// VirtualNodes points per member in the server-side mode),
// which members are alive (Members, judged from their Leases by the local
// clock), and how keys move between them, in one of two modes:
//
//   - the label mode: what the sharder does to one object (Decide), and
//     the Sharder that labels every object of the sharded resources
//     accordingly (ShardLabel, DrainLabel);
//   - the server-side mode (KEP-5866 shardSelector): the ring read as
//     ranges of the API server's hash space (ServerHash, Ring.Ranges,
//     Selector), and ring epochs (Epochs, Next, View) that the
//     Coordinator moves forward as members come and go.
//
// A Replica is one replica's part of all of it: a manager builds one
// when manager.Options.Sharding is set, and runs it. Before the informers
// start, the Replica settles the ring's mode (Options.Mode: a label per
// object, or the API server's hash ranges), reading or creating the ring's
// record Lease and, the first time, asking the API server whether it
// honours shardSelector; it logs "Sharding mode", and narrows its Scope,
// in which the sharded controllers' informers are declared. The
// protocols, and what is built and tested of them, are described in
// docs/sharding.md.
//
// The contract the protocols rest on: an object moves from one live
// member to another only after the first acknowledged that it stopped
// reconciling it (in the label mode, DrainLabel, then the labels removed
// by the owner; in the server-side mode, the target epoch in its Lease,
// AckAnnotation), and from a dead member only after its Lease expired, by
// which time it has stopped (package leader's fencing), and was buried, so
// that it can never renew; reconcile.Controller's Exclude gives the owner
// the moment its last Reconcile of a key has returned.
//
// Goroutines: Sharder.Start runs an informer of the Leases in the ring's
// namespace (it judges the member Leases among them) and one of the
// unlabelled objects of each sharded resource (client-go's goroutines), a
// scan of the labelled objects and 8 workers;
// Coordinator.Start runs an informer of the namespace's Leases and takes
// its steps on its own goroutine. Both return once their goroutines have
// stopped, after their ctx ends. Every type is safe for concurrent use.
package shard
