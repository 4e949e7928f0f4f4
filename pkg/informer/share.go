package informer

import (
	"hash/maphash"
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Limits of a sharer's tables: beyond them, new label sets and namespaces
// are cached as decoded, unshared. The tables keep what they hold for the
// informer's lifetime, so they are bounded.
const (
	maxSharedMaps       = 4096 // distinct label or annotation maps
	maxSharedMapEntries = 32   // larger maps are not shared
	maxSharedNamespaces = 4096
)

// sharer makes cached objects with equal labels, equal annotations or the
// same namespace share one map or string instead of each holding its own
// copy, as decoded. A one-entry map[string]string costs about 330 bytes of
// heap (Go's smallest map group holds 8 entries), so a label set repeated
// over many objects (the pods of one ReplicaSet, the ConfigMaps of one
// release) is most of what their metadata costs. Sharing is safe only
// because cached objects are read-only (see Lister); a caller that mutated
// a cached object's labels in place would now change every object sharing
// them.
type sharer struct {
	seed maphash.Seed

	mu   sync.Mutex
	maps map[uint64][]map[string]string // by mapHash
	n    int                            // maps held
	ns   map[string]string
}

func newSharer() *sharer {
	return &sharer{seed: maphash.MakeSeed(), maps: make(map[uint64][]map[string]string), ns: make(map[string]string)}
}

// transform is a cache.TransformFunc: it replaces obj's labels,
// annotations and namespace by shared equal ones. Objects without
// metadata, and tombstones, pass untouched.
func (s *sharer) transform(obj any) (any, error) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := a.GetLabels(); len(l) > 0 {
		if sh := s.share(l); sh != nil {
			a.SetLabels(sh)
		}
	}
	if an := a.GetAnnotations(); len(an) > 0 {
		if sh := s.share(an); sh != nil {
			a.SetAnnotations(sh)
		}
	}
	if ns := a.GetNamespace(); ns != "" {
		if sh, ok := s.ns[ns]; ok {
			a.SetNamespace(sh)
		} else if len(s.ns) < maxSharedNamespaces {
			s.ns[ns] = ns
		}
	}
	return obj, nil
}

// share returns the held map equal to m, holding m if there is none and
// there is room; nil when m is not to be shared.
func (s *sharer) share(m map[string]string) map[string]string {
	if len(m) > maxSharedMapEntries {
		return nil
	}
	h := s.mapHash(m)
	for _, c := range s.maps[h] {
		if maps.Equal(c, m) {
			return c
		}
	}
	if s.n < maxSharedMaps {
		s.maps[h] = append(s.maps[h], m)
		s.n++
	}
	return nil
}

// mapHash hashes m's entries independently of their order.
func (s *sharer) mapHash(m map[string]string) uint64 {
	var sum uint64
	var h maphash.Hash
	h.SetSeed(s.seed)
	for k, v := range m {
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(v)
		sum += h.Sum64()
	}
	return sum
}

// decodeSharing shares labels and annotations while a list is decoded
// (protolist.Decode) instead of after. Each item is decoded into a
// scratch map, which goes on to the next item when an equal shared map
// replaces it. Shared afterwards, by transform, each object's decoded map
// is dropped, and the dropped maps sit between the maps the cache keeps
// (a ConfigMap's labels and data are each a 288-byte block, decoded one
// after the other): the Go heap then keeps their spans in use, and the
// heap in use after the list is about what it would have been without
// sharing. One decodeSharing serves one list, in one goroutine.
type decodeSharing struct {
	s                   *sharer
	labels, annotations map[string]string // scratch maps, nil when taken
}

// prepare gives item the scratch maps to decode its labels and
// annotations into.
func (d *decodeSharing) prepare(item runtime.Object) {
	a, err := meta.Accessor(item)
	if err != nil {
		return
	}
	if d.labels == nil {
		d.labels = make(map[string]string)
	}
	if d.annotations == nil {
		d.annotations = make(map[string]string)
	}
	a.SetLabels(d.labels)
	a.SetAnnotations(d.annotations)
}

// decoded replaces item's labels and annotations by shared equal maps,
// or leaves it the scratch maps it decoded into, which are then its own.
func (d *decodeSharing) decoded(item runtime.Object) {
	a, err := meta.Accessor(item)
	if err != nil {
		return
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	var m map[string]string
	m, d.labels = d.s.adopt(a.GetLabels())
	a.SetLabels(m)
	m, d.annotations = d.s.adopt(a.GetAnnotations())
	a.SetAnnotations(m)
}

// adopt returns what an object that decoded scratch should hold instead
// (nil for no entries, or a shared equal map, or scratch itself) and the
// scratch map for the next object (nil when this one keeps it). Called
// under s.mu.
func (s *sharer) adopt(scratch map[string]string) (keep, next map[string]string) {
	if len(scratch) == 0 {
		return nil, scratch
	}
	if sh := s.share(scratch); sh != nil {
		clear(scratch)
		return sh, scratch
	}
	return scratch, nil
}
