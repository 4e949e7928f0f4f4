// Package shard holds ctrlkit's sharding protocol: which member owns a key
// (Ring, a consistent hash ring with VirtualNodes points per member),
// which members are alive (Members, judged from their Leases by the local
// clock), what the sharder does to one object (Decide), and the Sharder
// that labels every object of the sharded resources accordingly. A
// manager runs all of it when manager.Options.Sharding is set. The
// protocol, and what is built and tested of it so far, is described in
// docs/sharding.md.
//
// The contract the protocol rests on: an object moves from one live member
// to another only after the first acknowledged that it stopped
// reconciling it (DrainLabel, then the labels removed by the owner), and
// from a dead member only after its Lease expired, by which time it has
// stopped (package leader's fencing); reconcile.Controller's Exclude gives
// the owner the moment its last Reconcile of the key has returned.
//
// Goroutines: Sharder.Start runs an informer of the member Leases and one
// of each sharded resource (client-go's goroutines) and one worker, and
// returns once they have stopped, after its ctx ends. Every type is safe
// for concurrent use.
package shard
