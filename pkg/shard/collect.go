package shard

import (
	"runtime"
	"runtime/metrics"
	"sync"
)

// collector runs the garbage collector during a move as often as
// GOGC=25 would, rather than the default 100.
//
// Why: a move is thousands of label writes by the sharder, each a few
// kilobytes of garbage (client-go's request, net/http's and HTTP/2's),
// while the replica's informers cache the keys that move to it, one watch
// event at a time. Between two collections, the cached objects are
// allocated among that garbage, and once it is collected the spans they
// share stay in use, mostly empty. How much room that leaves grows with
// the garbage allowed between collections, which GOGC sets. Before this
// collector and the sharder's other cuts of its garbage (see Sharder), the
// replica running the sharder held 1.24-1.64x the heap in use per key of
// the others after a move of 10,000 keys (make bench-shard); with them,
// collecting as often as GOGC=25 would, 1.02-1.14x. As often as
// GOGC=12.5 gave no better in a full run, for twice the collections.
//
// The cost is bounded by the move's own allocations: each forced
// collection follows at least a quarter of the live heap (and 1 MiB) of
// new allocations, so it marks at most four bytes of live heap per byte
// the process allocated meanwhile. Outside moves the collector does
// nothing (it acts only after the sharder's label writes), and it never
// makes the runtime collect less often than it would.
type collector struct {
	mu      sync.Mutex
	samples []metrics.Sample
	cycles  uint64 // the GC cycles completed when base was read
	base    uint64 // the bytes allocated then
	forced  int    // collections forced so far
}

// minGarbage is the least allocation a collector lets through between two
// collections, so that a small heap is not collected after every write.
const minGarbage = 1 << 20

func newCollector() *collector {
	return &collector{samples: []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}}
}

// wrote is called after each write of a move: it collects when the
// process allocated more than a quarter of its live heap since the last
// collection. Concurrent callers skip the check while one makes it.
func (c *collector) wrote() {
	if c == nil || !c.mu.TryLock() {
		return
	}
	defer c.mu.Unlock()
	allocs, live, cycles := c.read()
	if cycles != c.cycles {
		c.cycles, c.base = cycles, allocs
		return
	}
	if allocs-c.base < max(live/4, minGarbage) {
		return
	}
	runtime.GC()
	c.forced++
	allocs, _, c.cycles = c.read()
	c.base = allocs
}

func (c *collector) read() (allocs, live, cycles uint64) {
	metrics.Read(c.samples)
	value := func(i int) uint64 {
		if c.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0 // not supported by this runtime: never collect
		}
		return c.samples[i].Value.Uint64()
	}
	return value(0), value(1), value(2)
}
