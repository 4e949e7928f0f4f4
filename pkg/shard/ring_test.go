package shard_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ns-%d/object-%d", i%17, i)
	}
	return out
}

// TestRingBalance: with 100 virtual nodes no member of 2 to 6 owns more
// than 1.3 times or less than 0.7 times its fair share of 20,000 keys.
func TestRingBalance(t *testing.T) {
	ks := keys(20000)
	for n := 2; n <= 6; n++ {
		var members []string
		for i := range n {
			members = append(members, fmt.Sprintf("replica-%d-x7k2q", i))
		}
		r := shard.NewRing(members...)
		count := map[string]int{}
		for _, k := range ks {
			count[r.Owner(k)]++
		}
		fair := float64(len(ks)) / float64(n)
		for _, m := range members {
			if share := float64(count[m]) / fair; share < 0.7 || share > 1.3 {
				t.Errorf("%d members: %s owns %d keys, %.2f of its fair share", n, m, count[m], share)
			}
		}
	}
}

// TestRingMovesOnlyTheNewMembersShare: adding a member moves about 1/N of
// the keys, all to the new member; removing it moves them back.
func TestRingMovesOnlyTheNewMembersShare(t *testing.T) {
	ks := keys(20000)
	three := shard.NewRing("a", "b", "c")
	four := shard.NewRing("c", "a", "d", "b") // order does not matter
	again := shard.NewRing("b", "c", "a")
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
	if frac := float64(moved) / float64(len(ks)); frac < 0.15 || frac > 0.35 {
		t.Errorf("adding a 4th member moved %.2f of the keys, want about 0.25", frac)
	}
}

func TestRingEmptyAndMembers(t *testing.T) {
	if got := (shard.Ring{}).Owner("x"); got != "" {
		t.Errorf("empty ring owner = %q", got)
	}
	if got := shard.NewRing("b", "a", "b").Members(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Members = %q", got)
	}
}
