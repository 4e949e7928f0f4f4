package informer

import (
	"hash/maphash"
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
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
