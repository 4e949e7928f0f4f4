package shard

import (
	"runtime"
	"runtime/debug"
	"testing"
)

var sink []byte

// TestCollector: after a write, the collector collects once the process
// allocated more than a quarter of its live heap (and minGarbage) since
// the last collection, and not before; a collection the runtime ran by
// itself counts as one.
func TestCollector(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but ours
	runtime.GC()
	c := newCollector()
	c.wrote() // the baseline
	cycles := func() uint32 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.NumGC
	}
	before := cycles()
	c.wrote()
	if c.forced != 0 || cycles() != before {
		t.Fatalf("with nothing allocated: %d forced, %d cycles; want none", c.forced, cycles()-before)
	}
	_, live, _ := c.read()
	for range (max(live/4, minGarbage) + 4<<20) / (64 << 10) {
		sink = make([]byte, 64<<10)
	}
	c.wrote()
	if c.forced != 1 || cycles() != before+1 {
		t.Fatalf("after allocating more than the bound: %d forced, %d cycles; want 1", c.forced, cycles()-before)
	}
	c.wrote()
	if c.forced != 1 {
		t.Fatalf("right after a collection: %d forced, want still 1", c.forced)
	}
	for range (minGarbage / 2) / (64 << 10) {
		sink = make([]byte, 64<<10)
	}
	runtime.GC() // the runtime's own
	for range (minGarbage / 2) / (64 << 10) {
		sink = make([]byte, 64<<10)
	}
	c.wrote()
	if c.forced != 1 {
		t.Fatalf("half the bound after another collection: %d forced, want still 1", c.forced)
	}
	var nilCollector *collector
	nilCollector.wrote() // a Sharder built without one
}
