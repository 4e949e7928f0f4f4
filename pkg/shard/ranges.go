package shard

import (
	"fmt"
	"hash/fnv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Key is what the API server hashes to place an object in the server-side
// mode (KEP-5866 shardSelector): its uid or its namespace.
type Key string

// The keys the API server can hash.
const (
	// KeyUID hashes metadata.uid: objects spread evenly, but an object
	// and its children (other uids) land on different members.
	KeyUID Key = "uid"
	// KeyNamespace hashes metadata.namespace: every object of a namespace,
	// children included, lands on one member, and the spread is only as
	// even as the namespaces' sizes.
	KeyNamespace Key = "namespace"
)

// Field is the key's field path in a shardSelector.
func (k Key) Field() string { return "object.metadata." + string(k) }

// Valid reports whether k is KeyUID or KeyNamespace.
func (k Key) Valid() bool { return k == KeyUID || k == KeyNamespace }

// Of returns the value of obj that k hashes.
func (k Key) Of(obj metav1.Object) string {
	if k == KeyNamespace {
		return obj.GetNamespace()
	}
	return string(obj.GetUID())
}

// ServerHash is the hash kube-apiserver computes of a key's value to
// match it against a shardSelector's ranges: FNV-1a, 64 bits, of the
// value's bytes (k8s.io/apimachinery/pkg/sharding.HashField). A Ring's
// OwnerOfHash and Ranges work in this space.
func ServerHash(value string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(value))
	return h.Sum64()
}

// Range is the hashes from First to Last, both included.
type Range struct {
	First, Last uint64
}

// Contains reports whether h is in r.
func (r Range) Contains(h uint64) bool { return r.First <= h && h <= r.Last }

// noRange is a selector of the hash 0 alone: the API server has no
// syntax for an empty set of ranges, and an empty selector means every
// object.
const noRange = "'0x0000000000000000', '0x0000000000000001'"

// Selector returns the shardSelector of rs over key k, in the API
// server's syntax: shardRange(object.metadata.uid, '0x…', '0x…') joined
// with ||, each range's end exclusive (0x10000000000000000 for the last
// hash). With no ranges it selects the hash 0 alone, since the syntax has
// no empty set: whoever uses it must still check each object's hash (a
// sharded manager's workers do).
func Selector(k Key, rs []Range) string {
	if len(rs) == 0 {
		return "shardRange(" + k.Field() + ", " + noRange + ")"
	}
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString(" || ")
		}
		end := fmt.Sprintf("0x%016x", r.Last+1)
		if r.Last == ^uint64(0) {
			end = "0x10000000000000000"
		}
		fmt.Fprintf(&b, "shardRange(%s, '0x%016x', '%s')", k.Field(), r.First, end)
	}
	return b.String()
}
