package shard

// ShardLabel is the label whose value names the member that owns an
// object of ring: each member's informers of the sharded types select
// ShardLabel(ring)=<member>, so the API server sends every member only
// its share.
func ShardLabel(ring string) string { return "shard.ctrlkit.io/" + ring }

// DrainLabel is the label the sharder sets on an object that must move
// from its live owner to another member: the owner stops reconciling it,
// then acknowledges by removing both labels, and only then does the
// sharder assign it to the new member.
func DrainLabel(ring string) string { return "drain.shard.ctrlkit.io/" + ring }

// Action is what the sharder does to one object.
type Action int

// The sharder's actions.
const (
	// Keep: the object is where it belongs, or nobody can take it.
	Keep Action = iota
	// Assign: label the object for the desired member (and clear any
	// drain label). Only done when nobody may be reconciling it: it is
	// unlabelled (new, or acknowledged by its last owner), or its owner
	// is dead (its lease expired, and a member whose lease expired has
	// stopped reconciling, see package leader's fencing).
	Assign
	// Drain: ask the live owner to hand the object over.
	Drain
	// Wait: a drain is under way; the owner has not acknowledged yet.
	Wait
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "keep"
	case Assign:
		return "assign"
	case Drain:
		return "drain"
	case Wait:
		return "wait"
	}
	return "unknown"
}

// Decide returns what to do with an object labelled for current (empty:
// unlabelled), with a drain label or not, that the ring assigns to
// desired (empty: the ring has no members); alive tells whether a member
// holds an unexpired lease. It never moves an object from a live owner
// without that owner's acknowledgement: the only way from one live member
// to another is Drain, then the owner's acknowledgement (the object is
// unlabelled), then Assign.
func decideAction(current string, draining bool, desired string, alive func(member string) bool) Action {
	switch {
	case desired == "":
		return Keep
	case current == "":
		return Assign
	case !alive(current):
		return Assign
	case draining:
		return Wait // even if the ring now wants current back: let the acknowledgement finish
	case current == desired:
		return Keep
	}
	return Drain
}
