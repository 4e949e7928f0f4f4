package bench

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// latencyCase is a latency scenario: an informer's initial list has put a
// backlog in the queue, and changes arrive while the workers drain it.
type latencyCase struct {
	backlog int           // initial-list keys, in ns0..ns9, at low priority
	workers int           // workers draining the queue
	cost    time.Duration // simulated work per key (time.Sleep)
	every   time.Duration // interval between changes, at normal priority
	// changes is how many changes are added; 0 means one every `every`
	// until the last backlog key has been handed out, so that changes
	// cover the whole drain however long the machine makes it.
	changes int
}

var (
	// shortLatency drains in about 3s, under the starvation bound.
	shortLatency = latencyCase{backlog: 10000, workers: 4, cost: time.Millisecond, every: 10 * time.Millisecond, changes: 100}
	// longLatency drains in 25s or more, five times the starvation bound.
	// A change every 25ms puts about 200 changes in each 5s window, so a
	// window's p99 leaves out its two worst waits and one hiccup of a
	// shared machine does not decide it. The changes add about 10% to the
	// work of the drain.
	longLatency = latencyCase{backlog: 10000, workers: 4, cost: 10 * time.Millisecond, every: 25 * time.Millisecond}
)

// window is the span over which BenchmarkLatencyLong takes each p99: the
// default starvation bound, so the first window is the one before the
// bound and every later one is after it.
const window = workqueue.DefaultStarvationBound

// BenchmarkLatency measures how long a changed key waits behind a backlog:
// the time from its Add to the Get that hands it to a worker. 10,000 keys
// cost 1ms each, so each iteration is one full drain of about 3s, under
// the starvation bound; run it with -benchtime=1x. It reports the 50th and
// 99th percentile and the maximum over all iterations, and the mean time to
// drain everything.
//
// ctrlkit puts the backlog at PriorityLow and controller-runtime at its
// handlers' low priority, so a change overtakes the backlog; client-go has
// one FIFO, so a change waits for the backlog ahead of it.
func BenchmarkLatency(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			for _, metrics := range []bool{false, true} {
				b.Run(metricsName(metrics), func(b *testing.B) {
					backlog := keys(shortLatency.backlog) // built before the timer runs
					var (
						lat   []time.Duration
						drain time.Duration
					)
					b.ResetTimer()
					for range b.N {
						s, d := shortLatency.run(b, im.new(b, metrics), backlog)
						for _, c := range s {
							lat = append(lat, c.wait)
						}
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

// BenchmarkLatencyLong is BenchmarkLatency with a backlog that takes at
// least 25s to drain (10,000 keys, 10ms each, 4 workers; about 29s with
// the changes and the sleeps' overshoot), five times the starvation bound,
// and a change every 25ms until the last backlog key is handed out. It
// runs with metrics on only, to keep `make bench` short; run it with
// -benchtime=1x.
//
// Besides p50, p99 and max over all changes and the drain time, it reports
// the p99 and max of the changes added once the oldest backlog key had
// waited the bound (bound-p99-ms, bound-max-ms), and the highest p99 over
// the 5s windows of the drain (worst5s-p99-ms), each change counted in the
// window of its Add: a queue whose priority fades after the bound shows it
// there. The p99 of each window is logged. key-ms is the time one key
// really took a worker: a change can wait that long for a free worker
// whatever the queue does.
func BenchmarkLatencyLong(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name+"/"+metricsName(true), func(b *testing.B) {
			backlog := keys(longLatency.backlog) // built before the timer runs
			var (
				all, late []time.Duration
				windows   [][]time.Duration // waits by window of the Add, over all iterations
				drain     time.Duration
				added     int
			)
			b.ResetTimer()
			for range b.N {
				s, d := longLatency.run(b, im.new(b, true), backlog)
				for _, c := range s {
					all = append(all, c.wait)
					if c.at >= window {
						late = append(late, c.wait)
					}
					w := int(c.at / window)
					for len(windows) <= w {
						windows = append(windows, nil)
					}
					windows[w] = append(windows[w], c.wait)
				}
				drain += d
				added += len(s)
			}
			slices.Sort(all)
			slices.Sort(late)
			var worst time.Duration
			for w, lat := range windows {
				if len(lat) == 0 {
					continue
				}
				slices.Sort(lat)
				p := percentile(lat, 0.99)
				worst = max(worst, p)
				b.Logf("changes added at %2ds-%2ds: %3d, p99 %.2f ms, max %.2f ms",
					w*int(window/time.Second), (w+1)*int(window/time.Second), len(lat), ms(p), ms(lat[len(lat)-1]))
			}
			b.ReportMetric(ms(percentile(all, 0.50)), "p50-ms")
			b.ReportMetric(ms(percentile(all, 0.99)), "p99-ms")
			b.ReportMetric(ms(all[len(all)-1]), "max-ms")
			if len(late) > 0 {
				b.ReportMetric(ms(percentile(late, 0.99)), "bound-p99-ms")
				b.ReportMetric(ms(late[len(late)-1]), "bound-max-ms")
			}
			b.ReportMetric(ms(worst), "worst5s-p99-ms")
			b.ReportMetric(float64(added)/float64(b.N), "changes")
			b.ReportMetric(drain.Seconds()/float64(b.N), "drain-s")
			// What one key really took a worker (the 10ms sleep and its
			// overshoot): the workers start and stay in step, so a change
			// that finds them all busy waits up to this long for any
			// queue.
			b.ReportMetric(ms(drain*time.Duration(longLatency.workers))/float64(b.N*longLatency.backlog+added), "key-ms")
		})
	}
}

// change is one changed key's wait: at is the time of its Add since the
// first backlog key was added (the wait the starvation bound counts), wait
// the time from that Add to the Get that handed it out.
type change struct{ at, wait time.Duration }

// run adds c.backlog keys of backlog to q at low priority, drains them with
// c.workers workers while adding a changed key at normal priority every
// c.every, shuts q down, and returns each change's wait and the time the
// drain took, from the last backlog Add to the last key processed.
func (c latencyCase) run(b *testing.B, q queue, backlog []string) (changes []change, drain time.Duration) {
	t0 := time.Now()
	for _, k := range backlog {
		q.AddLow(k)
	}
	var (
		mu        sync.Mutex
		addedAt   = make(map[string]time.Time)
		handedOut atomic.Int64 // backlog keys handed out
		processed int          // keys processed, backlog and changes; under mu
		total     = -1         // keys to process, known once the changes stop; under mu
		allDone   = make(chan struct{})
	)
	start := time.Now()
	// The number of keys is known only when the changes stop, so the
	// workers never close their allDone (want -1) and this closes its own.
	_, wait := workers(q, c.workers, -1, func(key string) {
		if strings.HasPrefix(key, "changed/") {
			got := time.Now()
			mu.Lock()
			at := addedAt[key]
			changes = append(changes, change{at: at.Sub(t0), wait: got.Sub(at)})
			mu.Unlock()
		} else {
			handedOut.Add(1)
		}
		time.Sleep(c.cost) // the workload, not a wait for a condition
		mu.Lock()
		if processed++; processed == total {
			close(allDone)
		}
		mu.Unlock()
	})
	tick := time.NewTicker(c.every)
	n := 0
	for ; c.changes == 0 || n < c.changes; n++ {
		<-tick.C
		if c.changes == 0 && handedOut.Load() == int64(len(backlog)) {
			break
		}
		k := "changed/k-" + strconv.Itoa(n) // built outside what is timed
		mu.Lock()
		addedAt[k] = time.Now()
		mu.Unlock()
		q.Add(k)
	}
	tick.Stop()
	mu.Lock()
	if total = len(backlog) + n; processed == total {
		close(allDone)
	}
	mu.Unlock()
	<-allDone
	drain = time.Since(start)
	q.ShutDown()
	wait()
	if len(changes) != n {
		b.Fatalf("%d changed keys handed out, want %d", len(changes), n)
	}
	return changes, drain
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, i)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
