package shard

import (
	"fmt"
	"slices"
	"testing"
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ns-%d/object-%d", i%17, i)
	}
	return out
}

// TestRingBalance: Owner places 20,000 keys on 2 to 10 members with no
// member outside 0.92–1.08 of its fair share, whatever the members are
// called (fifty sets of names per size). With the 100 virtual nodes of
// OwnerOfHash the busiest member of 4 held up to 1.26 of its share.
func TestRingBalance(t *testing.T) {
	ks := keys(20000)
	worst := 0.0
	for n := 2; n <= 10; n++ {
		for set := range 50 {
			var members []string
			for i := range n {
				members = append(members, fmt.Sprintf("replica-%d-%d", set, i))
			}
			r := NewRing(members...)
			count := map[string]int{}
			for _, k := range ks {
				count[r.Owner(k)]++
			}
			fair := float64(len(ks)) / float64(n)
			for _, m := range members {
				share := float64(count[m]) / fair
				worst = max(worst, share)
				if share < 0.92 || share > 1.08 {
					t.Errorf("%d members: %s owns %d keys, %.3f of its fair share", n, m, count[m], share)
				}
			}
		}
	}
	t.Logf("busiest member: %.3f of its fair share", worst)
}

// TestRingMovesOnlyTheNewMembersShare: adding a member moves about 1/N of
// the keys, all to the new member; removing it moves them back.
func TestRingMovesOnlyTheNewMembersShare(t *testing.T) {
	ks := keys(20000)
	// Removing a member moves only its keys.
	abc, ac := NewRing("a", "b", "c"), NewRing("a", "c")
	for _, k := range ks {
		if before := abc.Owner(k); before != "b" && ac.Owner(k) != before {
			t.Fatalf("key %s moved from %s to %s when b left", k, before, ac.Owner(k))
		}
	}
	three := NewRing("a", "b", "c")
	four := NewRing("c", "a", "d", "b") // order does not matter
	again := NewRing("b", "c", "a")
	moved := 0
	for _, k := range ks {
		before, after := three.Owner(k), four.Owner(k)
		if before != after {
			moved++
			if after != "d" {
				t.Fatalf("key %s moved from %s to %s, not to the new member", k, before, after)
			}
		}
		if back := again.Owner(k); back != before {
			t.Fatalf("key %s: the same members gave %s, then %s", k, before, back)
		}
	}
	if frac := float64(moved) / float64(len(ks)); frac < 0.23 || frac > 0.27 {
		t.Errorf("adding a 4th member moved %.2f of the keys, want about 0.25", frac)
	}
}

func TestRingEmptyAndMembers(t *testing.T) {
	if got := (Ring{}).Owner("x"); got != "" {
		t.Errorf("empty ring owner = %q", got)
	}
	if got := NewRing("b", "a", "b").Members(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Members = %q", got)
	}
}
