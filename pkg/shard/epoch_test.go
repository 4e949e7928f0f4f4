package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func epoch(n int64, members ...string) Epoch { return Epoch{N: n, Members: members} }

// TestNext: a change of the live members proposes a new target at once,
// superseding one under way; a target is committed only once every member
// of the committed epoch acknowledged it or is gone.
func TestNext(t *testing.T) {
	none := func(string) bool { return false }
	acks := func(m map[string]int64) func(string) int64 { return func(s string) int64 { return m[s] } }
	for _, tc := range []struct {
		name   string
		e      Epochs
		live   []string
		acked  map[string]int64
		gone   func(string) bool
		want   Epochs
		change bool
	}{
		{"a first member", Epochs{}, []string{"a"}, nil, none,
			Epochs{Target: epoch(1, "a")}, true},
		{"the first epoch needs no one", Epochs{Target: epoch(1, "a")}, []string{"a"}, nil, none,
			Epochs{Committed: epoch(1, "a"), Target: epoch(1, "a")}, true},
		{"settled", Epochs{Committed: epoch(1, "a"), Target: epoch(1, "a")}, []string{"a"}, nil, none,
			Epochs{Committed: epoch(1, "a"), Target: epoch(1, "a")}, false},
		{"a member joins", Epochs{Committed: epoch(1, "a"), Target: epoch(1, "a")}, []string{"b", "a"}, nil, none,
			Epochs{Committed: epoch(1, "a"), Target: epoch(2, "a", "b")}, true},
		{"waits for the old members", Epochs{Committed: epoch(1, "a"), Target: epoch(2, "a", "b")}, []string{"a", "b"},
			map[string]int64{"a": 1, "b": 2}, none,
			Epochs{Committed: epoch(1, "a"), Target: epoch(2, "a", "b")}, false},
		{"commits once they acknowledged", Epochs{Committed: epoch(1, "a"), Target: epoch(2, "a", "b")}, []string{"a", "b"},
			map[string]int64{"a": 2}, none,
			Epochs{Committed: epoch(2, "a", "b"), Target: epoch(2, "a", "b")}, true},
		{"a member leaves", Epochs{Committed: epoch(2, "a", "b"), Target: epoch(2, "a", "b")}, []string{"a"}, nil, none,
			Epochs{Committed: epoch(2, "a", "b"), Target: epoch(3, "a")}, true},
		{"one that left must be gone", Epochs{Committed: epoch(2, "a", "b"), Target: epoch(3, "a")}, []string{"a"},
			map[string]int64{"a": 3}, none,
			Epochs{Committed: epoch(2, "a", "b"), Target: epoch(3, "a")}, false},
		{"commits once it is gone", Epochs{Committed: epoch(2, "a", "b"), Target: epoch(3, "a")}, []string{"a"},
			map[string]int64{"a": 3}, func(m string) bool { return m == "b" },
			Epochs{Committed: epoch(3, "a"), Target: epoch(3, "a")}, true},
		{"a newer change supersedes", Epochs{Committed: epoch(2, "a", "b"), Target: epoch(3, "a", "b", "c")}, []string{"a", "b", "c", "d"},
			map[string]int64{"a": 3, "b": 3}, none,
			Epochs{Committed: epoch(2, "a", "b"), Target: epoch(4, "a", "b", "c", "d")}, true},
		{"an older acknowledgement does not count", Epochs{Committed: epoch(2, "a", "b"), Target: epoch(4, "a", "b", "c", "d")}, []string{"a", "b", "c", "d"},
			map[string]int64{"a": 4, "b": 3}, none,
			Epochs{Committed: epoch(2, "a", "b"), Target: epoch(4, "a", "b", "c", "d")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, change := nextEpochs(tc.e, tc.live, acks(tc.acked), tc.gone)
			if change != tc.change || got.Committed.String() != tc.want.Committed.String() || got.Target.String() != tc.want.Target.String() {
				t.Errorf("Next = %v, %v; want %v, %v", got, change, tc.want, tc.change)
			}
		})
	}
}

func TestParseEpochs(t *testing.T) {
	e, err := ParseEpochs(map[string]string{committedAnnotation: "2 a,b", targetAnnotation: "3 a,b,c"})
	if err != nil || e.Committed.String() != "2 a,b" || e.Target.String() != "3 a,b,c" {
		t.Errorf("ParseEpochs = %v, %v", e, err)
	}
	if e, err := ParseEpochs(nil); err != nil || e.Target.N != 0 || e.Target.Members != nil {
		t.Errorf("no annotations: %v, %v", e, err)
	}
	for _, bad := range []map[string]string{
		{committedAnnotation: "x a"},
		{committedAnnotation: "-1 a"},
		{targetAnnotation: "2 b,a"},
		{targetAnnotation: "2 a,,b"},
		{committedAnnotation: "3 a", targetAnnotation: "2 a"},
	} {
		if _, err := ParseEpochs(bad); err == nil {
			t.Errorf("ParseEpochs(%v) succeeded", bad)
		}
	}
}

// model is the server-side protocol reduced to its decisions: a record,
// a coordinator taking Next's steps, and members that read the record
// when they get to it (so their views lag and skip records), acknowledge
// their view's target, and die. A member's drain is immediate in the
// model: what it may reconcile is its view's Permits at every moment,
// which is what the manager's workers ask before each Reconcile and what
// its drain waits for.
type model struct {
	r       *rand.Rand
	record  Epochs
	views   map[string]*epochView // live members' views
	acked   map[string]int64
	dead    map[string]bool // crashed or left: reconcile nothing
	gone    map[string]bool // dead, and its Lease released or buried
	nextID  int
	hashes  []uint64
	commits int
}

func (m *model) live() []string {
	var out []string
	for id := range m.views {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// step does one random thing.
func (m *model) step() {
	ids := m.live()
	switch k := m.r.IntN(10); {
	case k == 0 && len(ids) < 6: // a member joins with a fresh view
		id := fmt.Sprintf("m%d", m.nextID)
		m.nextID++
		m.views[id] = newEpochView(m.record)
	case k == 1 && len(ids) > 0: // a member dies or leaves: it stops at once
		id := ids[m.r.IntN(len(ids))]
		delete(m.views, id)
		m.dead[id] = true
	case k == 2: // a dead member's Lease expires and is buried, or it was released
		for id := range m.dead {
			if !m.gone[id] && m.r.IntN(2) == 0 {
				m.gone[id] = true
			}
		}
	case k < 6: // the coordinator steps (its view of the live members is the model's)
		next, ok := nextEpochs(m.record, ids, func(id string) int64 { return m.acked[id] }, func(id string) bool { return m.gone[id] })
		if ok {
			if next.Committed.N > m.record.Committed.N {
				m.commits++
			}
			m.record = next
		}
	case len(ids) > 0: // a member reads the record and acknowledges its target
		id := ids[m.r.IntN(len(ids))]
		if m.record.Newer(m.views[id].Epochs) {
			m.views[id] = newEpochView(m.record)
		}
		m.acked[id] = m.views[id].Target.N
	}
}

// check fails if two live members may reconcile one hash.
func (m *model) check(t *testing.T, step int) {
	for _, h := range m.hashes {
		var who []string
		for id, v := range m.views {
			if v.Permits(id, h) {
				who = append(who, id)
			}
		}
		if len(who) > 1 {
			t.Fatalf("step %d: members %v may all reconcile hash %#x (record %v)", step, who, h, m.record)
		}
	}
}

// TestEpochsNeverPermitAHashTwice: through random joins, deaths, lagging
// reads and coordinator steps, no two live members are ever permitted the
// same hash; once things settle, every hash is permitted to exactly one.
func TestEpochsNeverPermitAHashTwice(t *testing.T) {
	for seed := range uint64(8) {
		m := &model{r: rand.New(rand.NewPCG(seed, 7)), views: map[string]*epochView{}, acked: map[string]int64{},
			dead: map[string]bool{}, gone: map[string]bool{}}
		for range 200 {
			m.hashes = append(m.hashes, m.r.Uint64())
		}
		for i := range 500 {
			m.step()
			m.check(t, i)
		}
		// Settle: no more joins or deaths; every dead member is gone;
		// members read and acknowledge, and the coordinator steps.
		for id := range m.dead {
			m.gone[id] = true
		}
		ids := m.live()
		for range 4 {
			next, ok := nextEpochs(m.record, ids, func(id string) int64 { return m.acked[id] }, func(id string) bool { return m.gone[id] })
			if ok {
				m.record = next
			}
			for _, id := range ids {
				if m.record.Newer(m.views[id].Epochs) {
					m.views[id] = newEpochView(m.record)
				}
				m.acked[id] = m.views[id].Target.N
			}
			m.check(t, -1)
		}
		if m.record.Committed.N != m.record.Target.N || !slices.Equal(m.record.Committed.Members, ids) {
			t.Fatalf("seed %d: did not settle: record %v, live %v", seed, m.record, ids)
		}
		if len(ids) == 0 {
			continue
		}
		for _, h := range m.hashes {
			n := 0
			for id, v := range m.views {
				if v.Permits(id, h) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("seed %d: settled, hash %#x is permitted to %d members", seed, h, n)
			}
		}
		if m.commits == 0 {
			t.Fatalf("seed %d: nothing was ever committed", seed)
		}
	}
}
