package shard

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
)

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("replica-%d-q7x2k", i)
	}
	return out
}

// uuids returns n random version-4 UUIDs from a fixed seed, as the API
// server's uids look.
func uuids(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]string, n)
	for i := range out {
		a, b := r.Uint64(), r.Uint64()
		out[i] = fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, a>>16&0xffff, a&0xfff, b>>48&0x3fff|0x8000, b&0xffffffffffff)
	}
	return out
}

// TestRangesCoverEveryHashOnce: the ranges of a ring's members, put
// together, are the whole hash space with no gap and no overlap, and a
// hash is in the ranges of the member OwnerOfHash names.
func TestRangesCoverEveryHashOnce(t *testing.T) {
	probes := []uint64{0, 1, ^uint64(0), ^uint64(0) - 1}
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		probes = append(probes, r.Uint64())
	}
	for n := 1; n <= 6; n++ {
		ring := NewRing(members(n)...)
		var all []Range
		owner := map[Range]string{}
		for _, m := range members(n) {
			rs := ring.Ranges(m)
			// Adjacent points of one member merge: about VirtualNodes*(1-1/n).
			if want := float64(virtualNodes) * float64(n-1) / float64(n); n > 1 && (float64(len(rs)) < 0.7*want || len(rs) > virtualNodes) {
				t.Errorf("%d members: %s has %d ranges, want about %.0f", n, m, len(rs), want)
			}
			for _, rg := range rs {
				owner[rg] = m
			}
			all = append(all, rs...)
		}
		slices.SortFunc(all, func(a, b Range) int {
			if a.First < b.First {
				return -1
			}
			return 1
		})
		if all[0].First != 0 || all[len(all)-1].Last != ^uint64(0) {
			t.Fatalf("%d members: the ranges span %#x to %#x, not the whole space", n, all[0].First, all[len(all)-1].Last)
		}
		for i := 1; i < len(all); i++ {
			if all[i].First != all[i-1].Last+1 {
				t.Fatalf("%d members: %+v then %+v: a gap or an overlap", n, all[i-1], all[i])
			}
		}
		for _, h := range probes {
			i, _ := slices.BinarySearchFunc(all, h, func(rg Range, h uint64) int {
				switch {
				case rg.Last < h:
					return -1
				case rg.First > h:
					return 1
				}
				return 0
			})
			if got, want := owner[all[i]], ring.OwnerOfHash(h); !all[i].Contains(h) || got != want {
				t.Fatalf("%d members: hash %#x is in %+v of %s, but OwnerOfHash says %s", n, h, all[i], got, want)
			}
		}
	}
	if rs := NewRing("a").Ranges("a"); !slices.Equal(rs, []Range{{First: 0, Last: ^uint64(0)}}) {
		t.Errorf("one member's ranges = %+v, want the whole space", rs)
	}
	if rs := NewRing("a", "b").Ranges("c"); rs != nil {
		t.Errorf("a stranger's ranges = %+v, want none", rs)
	}
}

// TestRangesMoveAboutOneNth: adding a fourth member moves about a quarter
// of the uids, all to it; with 2 to 6 members each owns 0.7 to 1.3 of its
// fair share of 20,000 uids hashed as the API server hashes them.
func TestRangesMoveAboutOneNth(t *testing.T) {
	ids := uuids(20000)
	for n := 2; n <= 6; n++ {
		ring := NewRing(members(n)...)
		count := map[string]int{}
		for _, id := range ids {
			count[ring.OwnerOfHash(ServerHash(id))]++
		}
		for _, m := range members(n) {
			if share := float64(count[m]) * float64(n) / float64(len(ids)); share < 0.7 || share > 1.3 {
				t.Errorf("%d members: %s owns %.2f of its fair share", n, m, share)
			}
		}
	}
	three, four := NewRing(members(3)...), NewRing(members(4)...)
	moved := 0
	for _, id := range ids {
		h := ServerHash(id)
		if before, after := three.OwnerOfHash(h), four.OwnerOfHash(h); before != after {
			moved++
			if after != members(4)[3] {
				t.Fatalf("uid %s moved from %s to %s, not to the new member", id, before, after)
			}
		}
	}
	if frac := float64(moved) / float64(len(ids)); frac < 0.15 || frac > 0.35 {
		t.Errorf("adding a 4th member moved %.2f of the uids, want about 0.25", frac)
	}
}

var shardRange = regexp.MustCompile(`shardRange\((object\.metadata\.\w+), '(0x[0-9a-f]+)', '(0x[0-9a-f]+)'\)`)

// TestSelectorMatchesAsTheServerDoes: an object matches the ranges of
// the member OwnerOfHash names, and only those, when the selector's
// ranges are matched by k8s.io/apimachinery's sharding.Selector, the code
// kube-apiserver filters lists and watches with; ServerHash is its hash.
func TestSelectorMatchesAsTheServerDoes(t *testing.T) {
	ring := NewRing(members(3)...)
	selectors := map[string]sharding.Selector{}
	for _, m := range members(3) {
		s := Selector(KeyUID, ring.Ranges(m))
		var reqs []sharding.ShardRangeRequirement
		for _, g := range shardRange.FindAllStringSubmatch(s, -1) {
			reqs = append(reqs, sharding.ShardRangeRequirement{Key: g[1], Start: g[2], End: g[3]})
		}
		if len(reqs) != len(ring.Ranges(m)) {
			t.Fatalf("%s: %d ranges in the selector, want %d: %s", m, len(reqs), len(ring.Ranges(m)), s)
		}
		selectors[m] = sharding.NewSelector(reqs...)
	}
	for _, id := range uuids(3000) {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: types.UID(id)}}
		want := ring.OwnerOfHash(ServerHash(id))
		for m, sel := range selectors {
			if got, err := sel.Matches(obj); err != nil || got != (m == want) {
				t.Fatalf("uid %s owned by %s: %s's selector matches %v (%v)", id, want, m, got, err)
			}
		}
		if got, want := fmt.Sprintf("%016x", ServerHash(id)), sharding.HashField(id); got != want {
			t.Fatalf("ServerHash(%s) = %s, the API server's is %s", id, got, want)
		}
	}
	if got := Selector(KeyNamespace, []Range{{First: 0, Last: ^uint64(0)}}); got != "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')" {
		t.Errorf("the whole space: %s", got)
	}
	if got := Selector(KeyUID, nil); got != "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')" {
		t.Errorf("no ranges: %s", got)
	}
}
