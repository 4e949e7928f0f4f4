package shard

import (
	"fmt"
)

// A member's share in the server-side mode is a set of ranges of the API
// server's hash space, sent as a shardSelector; the ring names the owner
// of an object by the hash of its uid, as the server computes it.
func ExampleSelector() {
	one := NewRing("replica-a")
	fmt.Println(Selector(KeyUID, one.Ranges("replica-a")))

	two := NewRing("replica-a", "replica-b")
	fmt.Println(len(two.Ranges("replica-a")), "ranges for replica-a,", len(two.Ranges("replica-b")), "for replica-b")
	fmt.Println(two.OwnerOfHash(ServerHash("6f1c0b9e-41a2-4c8e-9d3b-0a7e5f2c1d44")))
	// Output:
	// shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')
	// 54 ranges for replica-a, 53 for replica-b
	// replica-a
}

// A member joins a ring of one: the coordinator proposes a target epoch
// with both members, and commits it only once the member of the committed
// epoch has acknowledged it (having stopped reconciling what it hands over).
func Example_ringEpochs() {
	e := Epochs{Committed: Epoch{N: 1, Members: []string{"a"}}, Target: Epoch{N: 1, Members: []string{"a"}}}
	acked := map[string]int64{"a": 1}
	ack := func(m string) int64 { return acked[m] }
	gone := func(string) bool { return false }
	live := []string{"a", "b"}

	e, _ = nextEpochs(e, live, ack, gone)
	fmt.Println("proposed:", e.Committed, "/", e.Target)
	_, moved := nextEpochs(e, live, ack, gone)
	fmt.Println("moved before a acknowledged:", moved)
	acked["a"] = 2
	e, _ = nextEpochs(e, live, ack, gone)
	fmt.Println("committed:", e.Committed, "/", e.Target)
	// Output:
	// proposed: 1 a / 2 a,b
	// moved before a acknowledged: false
	// committed: 2 a,b / 2 a,b
}
