package shard

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The server-side mode has no labels to move objects with: every member
// lists and watches the hash ranges of its share (Selector), and a
// membership change moves ranges. A range moves from one live member to
// another by ring epochs, kept in the ring's record (RecordName) and in
// the members' Leases:
//
//  1. The coordinator (the replica holding the sharder Lease) proposes a
//     new Target epoch: the live members, numbered one past the last.
//  2. Each member, seeing it, stops reconciling what it owns under the
//     Committed epoch but not under the Target (View.Permits), waits for
//     the Reconciles of those keys that were running, and acknowledges the
//     Target's number in its own Lease (AckAnnotation).
//  3. Once every member of the Committed epoch has acknowledged, or is
//     gone (its Lease released, deleted, or expired and buried), the
//     coordinator commits: Committed becomes the Target.
//  4. Members then reconcile (and list and watch) what they own under the
//     new Committed epoch.
//
// Before the commit a member reconciles only keys it owns under both the
// Committed and the Target epochs; after it, only keys it owns under the
// Committed one: at no moment do two members' permitted keys meet (Next's
// doc gives the argument).

// Annotations of the ring's record and of the members' Leases.
const (
	// ModeAnnotation, on the ring's record, is the filtering mode every
	// replica of the ring follows: "labels", or "server/" and a Key
	// ("server/uid"). The first replica to start writes it.
	ModeAnnotation = "shard.ctrlkit.io/mode"
	// CommittedAnnotation and TargetAnnotation, on the ring's record, are
	// the server-side mode's epochs (Epoch.String).
	committedAnnotation = "shard.ctrlkit.io/committed"
	targetAnnotation    = "shard.ctrlkit.io/target"
	// AckAnnotation, on a member's Lease, is the number of the last Target
	// epoch the member acknowledged: it reconciles nothing it does not
	// own under that epoch.
	ackAnnotation = "shard.ctrlkit.io/acknowledged"
)

// The filtering modes a ring's record names.
const (
	recordLabels = "labels"
	recordServer = "server"
)

// RecordName is the name of the Lease that records ring's mode and, in
// the server-side mode, its epochs. No one holds it.
func RecordName(ring string) string { return ring + "-ring" }

// Epoch is one version of a ring: its number and its members, sorted.
type Epoch struct {
	N       int64
	Members []string
}

// String is the epoch as the ring's record holds it: "3 a,b,c".
func (e Epoch) String() string {
	return strconv.FormatInt(e.N, 10) + " " + strings.Join(e.Members, ",")
}

// ParseEpoch parses Epoch.String's form; "" is epoch 0 with no members.
func parseEpoch(s string) (Epoch, error) {
	if s == "" {
		return Epoch{}, nil
	}
	n, members, _ := strings.Cut(s, " ")
	var e Epoch
	var err error
	if e.N, err = strconv.ParseInt(n, 10, 64); err != nil || e.N < 0 {
		return Epoch{}, fmt.Errorf("shard: epoch %q: the number is not a non-negative integer", s)
	}
	if members != "" {
		e.Members = strings.Split(members, ",")
		if !slices.IsSorted(e.Members) || slices.Contains(e.Members, "") {
			return Epoch{}, fmt.Errorf("shard: epoch %q: the members are not sorted names", s)
		}
	}
	return e, nil
}

// Epochs are the Committed epoch of a ring and the Target it moves to;
// the Target equals the Committed epoch when no move is under way.
type Epochs struct {
	Committed, Target Epoch
}

// ParseEpochs reads the epochs from the annotations of a ring's record.
func ParseEpochs(annotations map[string]string) (Epochs, error) {
	c, err1 := parseEpoch(annotations[committedAnnotation])
	t, err2 := parseEpoch(annotations[targetAnnotation])
	if err := errors.Join(err1, err2); err != nil {
		return Epochs{}, err
	}
	if t.N < c.N {
		return Epochs{}, fmt.Errorf("shard: the target epoch %d is older than the committed %d", t.N, c.N)
	}
	return Epochs{Committed: c, Target: t}, nil
}

// Newer reports whether e is a later state of the ring's record than o:
// records only move forward, proposing a higher Target or committing it.
func (e Epochs) Newer(o Epochs) bool {
	return e.Target.N > o.Target.N || e.Target.N == o.Target.N && e.Committed.N > o.Committed.N
}

// Next is the coordinator's step: the record that should follow e, given
// the members whose Leases are live; acked returns the last epoch a member
// acknowledged, gone whether a member's Lease is released, deleted, or
// expired and buried (it reconciles nothing, and never will). ok is false
// when e stays.
//
//   - When the live members differ from the Target's, a new Target of
//     them is proposed, superseding one under way.
//   - Otherwise, when the Target is ahead of the Committed epoch and
//     every member of the Committed epoch has acknowledged it or is gone,
//     it is committed.
//
// Why two members never reconcile one key: a member permitted a key under
// a record (C, T) owns it under C. Take two members' views (C1, T1) and
// (C2, T2) with C1 < C2 (with C1 = C2, C's shares are disjoint). The
// first commit after (C1, T1) needed the first member's acknowledgement of
// a Target at least T1, which it gave only after seeing that Target; since
// its view still shows T1, that Target is T1, and the commit made T1
// committed. Any later commit would need its acknowledgement of a Target
// past T1, which it has not seen. So C2 = T1, and the first member's
// permitted keys, owned under T1 = C2, are not the second's.
func nextEpochs(e Epochs, live []string, acked func(member string) int64, gone func(member string) bool) (Epochs, bool) {
	live = slices.Sorted(slices.Values(live))
	if !slices.Equal(live, e.Target.Members) {
		return Epochs{Committed: e.Committed, Target: Epoch{N: e.Target.N + 1, Members: live}}, true
	}
	if e.Target.N == e.Committed.N {
		return e, false
	}
	for _, m := range e.Committed.Members {
		if acked(m) < e.Target.N && !gone(m) {
			return e, false
		}
	}
	return Epochs{Committed: e.Target, Target: e.Target}, true
}

// View is a member's reading of a ring's Epochs, with their Rings built.
// It is immutable and safe for concurrent use.
type epochView struct {
	Epochs
	committed, target Ring
}

// NewView builds the rings of e.
func newEpochView(e Epochs) *epochView {
	v := &epochView{Epochs: e, committed: NewRing(e.Committed.Members...)}
	v.target = v.committed
	if e.Target.N != e.Committed.N {
		v.target = NewRing(e.Target.Members...)
	}
	return v
}

// Permits reports whether member may reconcile an object whose ServerHash
// is h: it owns h under both the Committed and the Target epochs.
func (v *epochView) Permits(member string, h uint64) bool {
	return v.committed.OwnerOfHash(h) == member && v.target.OwnerOfHash(h) == member
}

// Ranges are the hashes member owns under the Committed epoch: what it
// lists and watches.
func (v *epochView) Ranges(member string) []Range { return v.committed.Ranges(member) }
