package shard

import (
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
)

// LeaseName is the name of the Lease by which member announces itself in
// ring.
func LeaseName(ring, member string) string { return ring + "-member-" + member }

// Members tracks which members of one ring hold an unexpired Lease, judged
// by this process's clock: a Lease counts from the moment its record was
// last seen to change, for its leaseDurationSeconds, never from the
// timestamps its holder wrote, so clock skew between nodes cannot make a
// live member look dead. client-go's leader election judges Leases the
// same way. A Lease first seen counts from that moment, so a new sharder
// waits up to one lease duration longer before it gives away the objects
// of a member that died before it started. Safe for concurrent use.
type Members struct {
	ring  string
	clock clock.PassiveClock

	mu   sync.Mutex
	seen map[string]observed // by member
}

// observed is a member's Lease as last seen changed.
type observed struct {
	holder, rv string    // what changes at every renewal, with renew
	renew      time.Time // zero when the Lease has none
	at         time.Time
	duration   time.Duration
	released   bool
}

// NewMembers tracks the members of ring; a nil clock means the real one.
func NewMembers(ring string, clk clock.PassiveClock) *Members {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Members{ring: ring, clock: clk, seen: make(map[string]observed)}
}

// Observe records lease, if it is a member Lease of the ring (LeaseName),
// and returns its member.
func (m *Members) Observe(lease *coordinationv1.Lease) (member string, ok bool) {
	member, ok = strings.CutPrefix(lease.Name, m.ring+"-member-")
	if !ok || member == "" {
		return "", false
	}
	s := lease.Spec
	holder := ""
	if s.HolderIdentity != nil {
		holder = *s.HolderIdentity
	}
	var renew time.Time
	if s.RenewTime != nil {
		renew = s.RenewTime.Time
	}
	var d time.Duration
	if s.LeaseDurationSeconds != nil {
		d = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, known := m.seen[member]
	if !known || o.holder != holder || o.rv != lease.ResourceVersion || !o.renew.Equal(renew) {
		// Released (no holder) or buried by a sharder (another holder):
		// either way the member no longer holds it.
		o = observed{holder: holder, rv: lease.ResourceVersion, renew: renew, at: m.clock.Now(), duration: d, released: holder != member}
	}
	m.seen[member] = o
	return member, true
}

// Forget drops member, whose Lease was deleted: it is dead at once. A
// member deletes its Lease only after it stopped reconciling.
func (m *Members) Forget(member string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen, member)
}

// Alive reports whether member holds a Lease that has not expired.
func (m *Members) Alive(member string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.alive(member)
}

func (m *Members) alive(member string) bool {
	o, ok := m.seen[member]
	return ok && !o.released && m.clock.Since(o.at) < o.duration
}

// Live returns the members whose Leases have not expired, sorted.
func (m *Members) Live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for member := range m.seen {
		if m.alive(member) {
			out = append(out, member)
		}
	}
	slices.Sort(out)
	return out
}
