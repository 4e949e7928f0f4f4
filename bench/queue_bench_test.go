package bench

import (
	"testing"
	"time"
)

// scenario is one throughput workload. run owns the timer: it sets up, calls
// b.ResetTimer, does b.N operations, calls b.StopTimer and shuts q down. One
// operation is one key processed (handed out by Get and marked Done).
type scenario struct {
	name string
	run  func(b *testing.B, q queue)
}

var scenarios = []scenario{
	{"serial", serial},
	{"workers", func(b *testing.B, q queue) {
		produceConsume(b, q, func(key string, _ int) { q.Add(key) })
	}},
	{"dedup", dedup},
	{"addafter", func(b *testing.B, q queue) {
		produceConsume(b, q, func(key string, i int) { q.AddAfter(key, delay(i)) })
	}},
}

// BenchmarkQueue runs every scenario on every queue, with metrics off and
// on: BenchmarkQueue/<scenario>/<queue>/metrics=<off|on>.
func BenchmarkQueue(b *testing.B) {
	for _, sc := range scenarios {
		b.Run(sc.name, func(b *testing.B) {
			for _, im := range impls {
				b.Run(im.name, func(b *testing.B) {
					for _, metrics := range []bool{false, true} {
						b.Run(metricsName(metrics), func(b *testing.B) {
							q := im.new(b, metrics)
							b.ReportAllocs()
							sc.run(b, q)
							b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
						})
					}
				})
			}
		})
	}
}

func metricsName(on bool) string {
	if on {
		return "metrics=on"
	}
	return "metrics=off"
}

// serial is one goroutine doing Add, Get and Done for one key per
// operation, cycling through 1,000 keys: the cost of the queue itself,
// without contention.
func serial(b *testing.B, q queue) {
	ks := keys(1000)
	for _, k := range ks { // warm up maps and free lists: measure the steady state
		q.Add(k)
		k, _ = q.Get()
		q.Done(k)
	}
	b.ResetTimer()
	for i := range b.N {
		q.Add(ks[i%len(ks)])
		k, _ := q.Get()
		q.Done(k)
	}
	b.StopTimer()
	q.ShutDown()
}

// dedup is one goroutine adding ten times per Get and Done, over four hot
// keys: each operation is one new key and nine adds of keys already
// waiting, then one key handed out and finished.
func dedup(b *testing.B, q queue) {
	hot := keys(4)
	b.ResetTimer()
	for i := range b.N {
		for j := range 10 {
			q.Add(hot[(i+j)%len(hot)])
		}
		k, _ := q.Get()
		q.Done(k)
	}
	b.StopTimer()
	q.ShutDown()
}

// produceConsume is one producer (the benchmark goroutine) calling add for
// b.N distinct keys while four workers Get and Done; it stops the timer
// when the workers have finished all b.N.
func produceConsume(b *testing.B, q queue, add func(key string, i int)) {
	ks := keys(b.N)
	allDone, wait := workers(q, 4, b.N, nil)
	b.ResetTimer()
	for i, k := range ks {
		add(k, i)
	}
	<-allDone
	b.StopTimer()
	q.ShutDown()
	wait()
}

// delay is the AddAfter delay of the i-th key: 1µs to 1ms, spread
// deterministically (7919 is prime, so i*7919 mod 1000 visits every value).
func delay(i int) time.Duration {
	return time.Duration(1+(i*7919)%1000) * time.Microsecond
}
