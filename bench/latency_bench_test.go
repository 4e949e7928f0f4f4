package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The latency scenario: an informer's initial list has put a backlog in the
// queue, and changes arrive while the workers drain it.
const (
	backlogKeys   = 10000                 // initial-list keys, in ns0..ns9
	latWorkers    = 4                     // workers draining the queue
	reconcileCost = time.Millisecond      // simulated work per key
	changes       = 100                   // changed keys added during the drain
	changeEvery   = 10 * time.Millisecond // interval between changes
)

// BenchmarkLatency measures how long a changed key waits behind a backlog:
// the time from its Add to the Get that hands it to a worker. Each
// iteration is one full drain (about 3s), so run it with -benchtime=1x.
// It reports the 50th and 99th percentile and the maximum over all
// iterations, and the mean time to drain everything.
//
// ctrlkit puts the backlog at PriorityLow and controller-runtime at its
// handlers' low priority, so a change overtakes the backlog; client-go has
// one FIFO, so a change waits for the backlog ahead of it.
func BenchmarkLatency(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			for _, metrics := range []bool{false, true} {
				b.Run(metricsName(metrics), func(b *testing.B) {
					backlog := keys(backlogKeys) // built before the timer runs
					changed := make([]string, changes)
					for i := range changed {
						changed[i] = fmt.Sprintf("changed/k-%d", i)
					}
					var (
						lat   []time.Duration
						drain time.Duration
					)
					b.ResetTimer()
					for range b.N {
						l, d := latencyRun(b, im.new(b, metrics), backlog, changed)
						lat = append(lat, l...)
						drain += d
					}
					slices.Sort(lat)
					b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
					b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
					b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
					b.ReportMetric(drain.Seconds()/float64(b.N), "drain-s")
				})
			}
		})
	}
}

// latencyRun adds backlog to q at low priority, drains it with latWorkers
// workers while adding one of changed every changeEvery, shuts q down, and
// returns each changed key's wait and the time the drain took.
func latencyRun(b *testing.B, q queue, backlog, changed []string) (lat []time.Duration, drain time.Duration) {
	for _, k := range backlog {
		q.AddLow(k)
	}
	var (
		mu      sync.Mutex
		addedAt = make(map[string]time.Time, len(changed))
	)
	lat = make([]time.Duration, 0, len(changed))
	start := time.Now()
	allDone, wait := workers(q, latWorkers, len(backlog)+len(changed), func(key string) {
		if strings.HasPrefix(key, "changed/") {
			got := time.Now()
			mu.Lock()
			lat = append(lat, got.Sub(addedAt[key]))
			mu.Unlock()
		}
		time.Sleep(reconcileCost) // the workload, not a wait for a condition
	})
	tick := time.NewTicker(changeEvery)
	for _, k := range changed {
		<-tick.C
		mu.Lock()
		addedAt[k] = time.Now()
		mu.Unlock()
		q.Add(k)
	}
	tick.Stop()
	<-allDone
	drain = time.Since(start)
	q.ShutDown()
	wait()
	if len(lat) != len(changed) {
		b.Fatalf("%d changed keys handed out, want %d", len(lat), len(changed))
	}
	return lat, drain
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, i)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
