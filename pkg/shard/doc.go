// Package shard holds ctrlkit's sharding protocols: which member owns a
// key (Ring: rendezvous hashing in the label mode, a hash ring in the
// server-side mode), which members are alive (judged from their Leases by
// the local clock), and how keys move between them, in one of two modes:
//
//   - the label mode: the ring's sharder labels every object of the
//     sharded resources for its member (ShardLabel), and asks a live owner
//     to hand a key over (DrainLabel) before it gives it to another;
//   - the server-side mode (KEP-5866 shardSelector): the ring read as
//     ranges of the API server's hash space (ServerHash, Ring.Ranges,
//     Selector), and ring epochs (Epochs) that the ring's coordinator moves
//     forward as members come and go.
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
// its acknowledged annotation), and from a dead member only after its Lease expired, by
// which time it has stopped (package leader's fencing), and was buried, so
// that it can never renew; reconcile.Controller's Exclude gives the owner
// the moment its last Reconcile of a key has returned.
//
// Goroutines: the sharder runs an informer of the Leases in the ring's
// namespace (it judges the member Leases among them) and one of the
// unlabelled objects of each sharded resource (client-go's goroutines), a
// scan of the labelled objects and 8 workers; the coordinator runs an
// informer of the namespace's Leases and takes its steps on its own
// goroutine. Replica.RunMember and RunSharder return once their goroutines
// have stopped, after their ctx ends. Every type is safe for concurrent
// use.
package shard
