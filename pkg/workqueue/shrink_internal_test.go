package workqueue

import (
	"fmt"
	"runtime"
	"testing"
)

// heapInUse returns HeapInuse after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestDrainedBacklogGivesBackMemory: a backlog of 100,000 keys (the
// initial list of a large cluster) that has drained leaves the queue's key
// map at the size of what is left, not at the backlog's peak. Go maps
// never shrink; without the rebuild the drained map keeps about 8 MB.
func TestDrainedBacklogGivesBackMemory(t *testing.T) {
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns-%d/object-%d", i%10, i)
	}
	q, _ := newTestQueue(t, Options[string]{})
	before := heapInUse()
	for _, k := range keys {
		q.Add(k)
	}
	full := heapInUse()
	for q.Len() > 10 {
		k, _ := q.Get()
		q.Done(k)
	}
	drained := heapInUse()
	q.mu.Lock()
	left, peak := len(q.nodes), q.peak
	q.mu.Unlock()
	t.Logf("heap in use: %d KiB before, %d KiB with %d keys queued, %d KiB with %d left (peak since the last rebuild: %d)",
		before>>10, full>>10, n, drained>>10, left, peak)
	grown := full - before
	if kept := drained - before; drained > before && kept > grown/8 {
		t.Errorf("after draining, the queue keeps %d KiB of the %d KiB the backlog took, want under an eighth", kept>>10, grown>>10)
	}
	if peak > 4*shrinkFrom {
		t.Errorf("key map peak is %d with %d keys left: it was not rebuilt", peak, left)
	}
	runtime.KeepAlive(keys)
}

// TestDrainedBacklogOfThousandsGivesBackItsMap: a backlog of 10,000 keys
// (a sharder's move, a replica's share of a list) that drains completely
// leaves a key map sized for at most about a thousand keys, not one
// rebuilt once at a quarter of the peak and then kept: about 200 KB for
// the sharder's keys.
func TestDrainedBacklogOfThousandsGivesBackItsMap(t *testing.T) {
	q, _ := newTestQueue(t, Options[string]{})
	addAndDrain(q, 10_000)
	q.mu.Lock()
	left, peak := len(q.nodes), q.peak
	q.mu.Unlock()
	if left != 0 || peak > 1024 {
		t.Errorf("drained: %d keys left, key map last built for %d; want none, and at most 1024", left, peak)
	}
}

// TestDrainedBacklogKeepsNoSpares: the nodes of a drained backlog are not
// kept for reuse. They were allocated while the backlog was queued, among
// whatever else the process allocated then; kept as spares, each would
// hold on to a page of that time's garbage. Once the queue is empty, its
// key map is empty too; the steady state afterwards keeps spares again.
func TestDrainedBacklogKeepsNoSpares(t *testing.T) {
	q, _ := newTestQueue(t, Options[string]{})
	addAndDrain(q, 10_000)
	q.mu.Lock()
	spares, mapFor := len(q.free), q.peak
	q.mu.Unlock()
	if spares != 0 || mapFor != 0 {
		t.Errorf("drained backlog of 10,000 keys: %d spare nodes kept, key map last built for %d keys; want none and 0", spares, mapFor)
	}
	for range 3 { // the steady state: a few keys at a time
		for i := range 4 {
			q.Add(fmt.Sprintf("ns/steady-%d", i))
		}
		for q.Len() > 0 {
			k, _ := q.Get()
			q.Done(k)
		}
	}
	q.mu.Lock()
	spares = len(q.free)
	q.mu.Unlock()
	if spares != 4 {
		t.Errorf("steady state of 4 keys at a time: %d spare nodes kept, want 4", spares)
	}
}

// addAndDrain queues n keys and then handles every one of them.
func addAndDrain(q *Queue[string], n int) {
	for i := range n {
		q.Add(fmt.Sprintf("ns/object-%d", i))
	}
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
	}
}
