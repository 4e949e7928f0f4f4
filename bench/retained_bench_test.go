package bench

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkRetained measures what each queue keeps after a backlog has
// drained: 50,000 keys (an initial list) go in at low priority, are handed
// out and marked done, and the heap the queue still holds is reported per
// key of that peak (retained-B/key), next to what it held at the peak
// (peak-B/key), after a further second of light traffic. Go maps and
// slices do not shrink by themselves, so a queue that does nothing about it
// keeps its largest backlog for good. One iteration is one whole backlog;
// run it with -benchtime=1x.
func BenchmarkRetained(b *testing.B) {
	const n = 50000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns-%d/object-%06d", i%10, i)
	}
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			var peak, retained uint64
			for range b.N {
				before := heapInUse()
				q := im.new(b, false)
				for _, k := range keys {
					q.AddLow(k)
				}
				full := heapInUse()
				for range n {
					k, _ := q.Get()
					q.Done(k)
				}
				// A controller's queue stays in use after its initial list:
				// a second of light traffic, the same for every queue.
				for end := time.Now().Add(1100 * time.Millisecond); time.Now().Before(end); {
					for range 300 {
						q.Add("ns-0/steady")
						k, _ := q.Get()
						q.Done(k)
					}
					time.Sleep(10 * time.Millisecond) // traffic, not a wait for a condition
				}
				after := heapInUse()
				peak += (full - min(full, before)) / n
				retained += (after - min(after, before)) / n
				q.ShutDown()
				runtime.KeepAlive(q)
			}
			b.ReportMetric(float64(peak)/float64(b.N), "peak-B/key")
			b.ReportMetric(float64(retained)/float64(b.N), "retained-B/key")
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
