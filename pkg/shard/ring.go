package shard

import (
	"cmp"
	"slices"
	"strconv"
)

// VirtualNodes is how many points each member has on a Ring's hash
// ranges (OwnerOfHash, Ranges): with 100, the largest share of 2 to 10
// members stays within about 20% of the mean.
const virtualNodes = 100

// Ring places keys on its members consistently: adding or removing one
// member of N moves about 1/N of the keys, all to or from that member,
// and every replica computes the same placement from the same members,
// whatever their order. The zero value has no members and owns nothing.
// A Ring is immutable, and safe for concurrent use.
//
// It places in two ways. Owner, for keys a client places itself (the
// label mode), is rendezvous hashing: a key goes to the member whose hash
// of (member, key) is highest, so each key picks its member independently
// and the shares are as even as the keys allow (with 10,000 keys and 4
// members, within a few percent of fair). OwnerOfHash and Ranges, for a
// space the API server cuts into ranges (the server-side mode, whose
// selector can only name ranges), are a hash ring with VirtualNodes
// points per member: each member owns the hashes between the previous
// point and one of its own, and the shares are only as even as the
// points fall (within about 20%).
type Ring struct {
	points  []point  // sorted by hash
	members []member // sorted by name
}

type member struct {
	name string
	hash uint64
}

type point struct {
	hash   uint64
	member string
}

// NewRing returns the ring of members; repeats count once.
func NewRing(members ...string) Ring {
	members = slices.Clone(members)
	slices.Sort(members)
	members = slices.Compact(members)
	ms := make([]member, len(members))
	for i, m := range members {
		ms[i] = member{name: m, hash: hashString(m)}
	}
	pts := make([]point, 0, len(members)*virtualNodes)
	for _, m := range members {
		for i := range virtualNodes {
			pts = append(pts, point{hash: hashString(m + "#" + strconv.Itoa(i)), member: m})
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return cmp.Compare(a.member, b.member) // a tie must not depend on input order
	})
	return Ring{points: pts, members: ms}
}

// Owner returns the member that owns key by rendezvous hashing, or "" for
// a Ring without members: the member with the highest weight, a mix of
// the key's and the member's hashes (ties, which need equal 64-bit
// weights, go to the first name).
func (r Ring) Owner(key string) string {
	k := hashString(key)
	best, owner := uint64(0), ""
	for _, m := range r.members {
		if w := mix(k ^ m.hash); owner == "" || w > best {
			best, owner = w, m.name
		}
	}
	return owner
}

// OwnerOfHash returns the member that owns the hash h: the member of the
// first point at or after h, going round past the largest. It is "" for a
// Ring without members. The server-side mode places objects with
// ServerHash.
func (r Ring) OwnerOfHash(h uint64) string {
	if len(r.points) == 0 {
		return ""
	}
	i, _ := slices.BinarySearchFunc(r.points, h, func(p point, h uint64) int {
		switch {
		case p.hash < h:
			return -1
		case p.hash > h:
			return 1
		}
		return 0
	})
	if i == len(r.points) {
		i = 0
	}
	return r.points[i].member
}

// Ranges returns the hashes member owns (OwnerOfHash), as sorted,
// disjoint ranges, adjacent ones merged: about VirtualNodes of them with
// several members, one covering every hash with one member, none for a
// member not on the ring. The Ranges of a Ring's members cover every
// hash exactly once.
func (r Ring) Ranges(member string) []Range {
	var out []Range
	add := func(first, last uint64) {
		if n := len(out); n > 0 && out[n-1].Last+1 == first {
			out[n-1].Last = last
			return
		}
		out = append(out, Range{First: first, Last: last})
	}
	for i, p := range r.points {
		first := uint64(0)
		if i > 0 {
			if r.points[i-1].hash == p.hash {
				continue // a tie: the first of the tied points owns the hash
			}
			first = r.points[i-1].hash + 1
		}
		if p.member == member {
			add(first, p.hash)
		}
	}
	// Past the largest point, the hashes go round to the first point's.
	if n := len(r.points); n > 0 && r.points[0].member == member && r.points[n-1].hash != ^uint64(0) {
		add(r.points[n-1].hash+1, ^uint64(0))
	}
	return out
}

// Members returns the ring's members, sorted.
func (r Ring) Members() []string {
	var out []string
	for _, m := range r.members {
		out = append(out, m.name)
	}
	return out
}

// hashString is FNV-1a, 64 bits, finished with splitmix64's mixer so that
// keys differing in their last bytes land far apart.
func hashString(s string) uint64 {
	x := uint64(14695981039346656037) // FNV-1a's offset basis
	for i := 0; i < len(s); i++ {
		x ^= uint64(s[i])
		x *= 1099511628211 // FNV-1a's prime
	}
	return mix(x)
}

// mix is splitmix64's finalizer, a bijection of 64 bits in which every
// input bit flips about half the output bits.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
