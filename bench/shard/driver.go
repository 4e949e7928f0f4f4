package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// driverWorkers is how many writes the driver may have in flight.
const driverWorkers = 128

// driver updates the ConfigMaps round-robin, open loop: write i is due
// i/rate after the start, whether or not earlier writes have returned.
type driver struct {
	cms  typedcorev1.ConfigMapInterface
	n    int
	next int // the key of the next write
}

// sentWrite is one write the driver sent: its key and the time just
// before the request (Unix ns), which it also carries as annotation
// sentKey.
type sentWrite struct {
	key  int32
	sent int64
}

// churn writes at rate for d and returns the writes that succeeded and
// how many failed.
func (d *driver) churn(ctx context.Context, rate float64, dur time.Duration) ([]sentWrite, int) {
	total := int(rate * dur.Seconds())
	jobs := make(chan int32, 4096)
	var (
		mu     sync.Mutex
		writes = make([]sentWrite, 0, total)
		failed int
		wg     sync.WaitGroup
	)
	for range driverWorkers {
		wg.Go(func() {
			for key := range jobs {
				sent := time.Now().UnixNano()
				body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, sentKey, strconv.FormatInt(sent, 10))
				_, err := d.cms.Patch(ctx, objName(int(key)), types.MergePatchType, []byte(body), metav1.PatchOptions{})
				mu.Lock()
				if err != nil {
					failed++
				} else {
					writes = append(writes, sentWrite{key: key, sent: sent})
				}
				mu.Unlock()
			}
		})
	}
	t0 := time.Now()
	tick := time.NewTicker(2 * time.Millisecond)
	for i := 0; i < total && ctx.Err() == nil; {
		due := min(total, int(time.Since(t0).Seconds()*rate)+1)
		for ; i < due; i++ {
			jobs <- int32(d.next)
			d.next = (d.next + 1) % d.n
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	slices.SortFunc(writes, func(a, b sentWrite) int { return cmp.Compare(a.sent, b.sent) })
	return writes, failed
}

// step is one rate held for a while, and what came of it.
type step struct {
	rate     float64 // asked for, writes/s
	achieved float64 // sent in the measured window, writes/s
	served   float64 // Reconciles started in the measured window, per second
	measured int     // writes sent in the measured window (after the warm-up)
	failed   int     // writes the API server refused
	p50, p99 time.Duration
	max      time.Duration // queue time: event seen → Reconcile start
	e2e99    time.Duration // write sent → Reconcile start, p99
	over     int           // measured writes whose queue time exceeded the SLO, unreconciled ones included
	missed   int           // writes of the whole step never reconciled by the end of the drain
	unseen   int           // writes of the whole step whose event no replica recorded
	short    bool          // the queue times met the SLO, but the driver sent less than 95% of the rate
	pass     bool
	retry    bool // the second hold of a rate whose first failed
}

func (s step) verdict() string {
	v := "fail"
	switch {
	case s.pass:
		v = "pass"
	case s.short:
		v = "driver short"
	}
	if s.retry {
		v += " (held again)"
	}
	return v
}

func (s step) String() string {
	return fmt.Sprintf("rate %4.0f/s sent %6.1f/s served %6.1f/s  queue p50 %7.1fms p99 %8.1fms max %8.1fms  sent→start p99 %8.1fms  over %d/%d missed %d unseen %d failed %d  %s",
		s.rate, s.achieved, s.served, ms(s.p50), ms(s.p99), ms(s.max), ms(s.e2e99), s.over, s.measured, s.missed, s.unseen, s.failed, s.verdict())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// infinite stands for the queue time of a write never reconciled.
const infinite = time.Duration(math.MaxInt64)

// writeKey is a write as the replicas' records name it.
type writeKey struct {
	key  int32
	sent int64
}

// latencies resolves each write against the replicas' records. The
// Reconcile that handled a write is the first to start after the write
// was sent that read it or a later write of the same key (the queue
// merges a key's writes). queue is the time from the event of the write
// seen by a replica's informer to that start, e2e from the write's send;
// both are infinite for a write not reconciled. A write whose event no
// replica recorded counts from its send in both; unseen counts them.
func latencies(writes []sentWrite, recs, events []reconciled) (queue, e2e []time.Duration, unseen int) {
	byKey := make(map[int32][]reconciled)
	for _, r := range recs {
		if r.sent > 0 {
			byKey[r.key] = append(byKey[r.key], r)
		}
	}
	seen := make(map[writeKey]int64, len(events))
	for _, e := range events {
		k := writeKey{e.key, e.sent}
		if t, ok := seen[k]; !ok || e.start < t {
			seen[k] = e.start
		}
	}
	queue, e2e = make([]time.Duration, len(writes)), make([]time.Duration, len(writes))
	for i, w := range writes {
		start := int64(0)
		for _, r := range byKey[w.key] {
			if r.sent >= w.sent && r.start >= w.sent && (start == 0 || r.start < start) {
				start = r.start
			}
		}
		from, ok := seen[writeKey(w)]
		if !ok {
			from = w.sent
			unseen++
		}
		if start == 0 {
			queue[i], e2e[i] = infinite, infinite
			continue
		}
		// The two handlers run on goroutines of their own: the Reconcile
		// may start a few microseconds before the other saw the event.
		queue[i], e2e[i] = time.Duration(max(0, start-from)), time.Duration(start-w.sent)
	}
	return queue, e2e, unseen
}

// percentile is the q-th quantile of sorted ds (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// holdRate churns at rate for c.hold against the replicas ps, waits until
// every write is reconciled (up to c.drain), and judges the measured
// window, the writes sent after c.warmup, against c.slo.
func holdRate(ctx context.Context, c config, d *driver, ps []*proc, rate float64) (step, error) {
	s := step{rate: rate}
	t0 := time.Now()
	writes, failed := d.churn(ctx, rate, c.hold)
	s.failed = failed
	from := t0.Add(c.warmup).UnixNano()
	end := t0.Add(c.hold).UnixNano()
	recsSince := func() (recs, events []reconciled, err error) {
		for _, p := range ps {
			r, e, err := p.recs.since(t0.UnixNano())
			if err != nil {
				return nil, nil, err
			}
			recs, events = append(recs, r...), append(events, e...)
		}
		return recs, events, nil
	}
	var queue, e2e []time.Duration
	var recs []reconciled
	err := waitFor(ctx, c.drain, func() bool {
		var events []reconciled
		var err error
		if recs, events, err = recsSince(); err != nil {
			return false
		}
		queue, e2e, s.unseen = latencies(writes, recs, events)
		return !slices.Contains(queue, infinite)
	})
	if err != nil && ctx.Err() != nil {
		return s, ctx.Err()
	}
	if err := checkAlive(ps); err != nil {
		return s, err
	}
	var window, windowE2E []time.Duration
	for i, w := range writes {
		if queue[i] == infinite {
			s.missed++
		}
		if w.sent >= from && w.sent < end {
			window, windowE2E = append(window, queue[i]), append(windowE2E, e2e[i])
			if queue[i] > c.slo {
				s.over++
			}
		}
	}
	for _, r := range recs {
		if r.start >= from && r.start < end {
			s.served++
		}
	}
	slices.Sort(window)
	slices.Sort(windowE2E)
	s.measured = len(window)
	s.achieved = float64(len(window)) / (c.hold - c.warmup).Seconds()
	s.served /= (c.hold - c.warmup).Seconds()
	s.p50, s.p99 = percentile(window, 0.50), percentile(window, 0.99)
	s.e2e99 = percentile(windowE2E, 0.99)
	if len(window) > 0 {
		s.max = window[len(window)-1]
	}
	met := len(window) > 0 && s.p99 <= c.slo
	s.short = met && s.achieved < 0.95*rate
	s.pass = met && !s.short
	return s, nil
}

// capacity is the result of the search for the highest rate that keeps
// p99 queue time within the SLO.
type capacity struct {
	best    step   // the highest passing step; zero when none passed
	steps   []step // in the order run
	limited bool   // the driver fell short of some rate it was asked for
	atTop   bool   // every rate passed, the top of the search included: the capacity is higher
}

// searchCapacity bisects the rate between 0 and top (a rate the replicas
// cannot serve: 1.6 × their combined service rate) for c.iters steps,
// holding each rate with hold. A step passes when p99 queue time ≤ c.slo
// and the driver sent at least 95% of the rate; a step whose queue times
// met the SLO while the driver fell short counts as not passed, and marks
// the result limited. A rate that fails is held once more, and fails only
// if it fails again: load from outside the bench (this machine is shared)
// can only lengthen queue times, so one slow hold below the replicas'
// capacity must not steer the bisection down, while above it the queue
// grows every time. When every step passed, top itself is tried.
func searchCapacity(c config, top float64, hold func(rate float64) (step, error), logf func(string, ...any)) (capacity, error) {
	var res capacity
	lo, hi := 0.0, top
	try := func(rate float64) (bool, error) {
		rate = math.Round(rate/5) * 5
		for attempt := 0; attempt < 2; attempt++ {
			s, err := hold(rate)
			if err != nil {
				return false, err
			}
			s.retry = attempt > 0
			logf("    %v", s)
			res.steps = append(res.steps, s)
			res.limited = res.limited || s.short
			if s.pass && s.achieved > res.best.achieved {
				res.best = s
			}
			if s.pass || s.short {
				return s.pass, nil
			}
		}
		return false, nil
	}
	failedOnce := false
	for range c.iters {
		mid := (lo + hi) / 2
		ok, err := try(mid)
		if err != nil {
			return res, err
		}
		if ok {
			lo = mid
		} else {
			hi, failedOnce = mid, true
		}
	}
	if !failedOnce {
		ok, err := try(hi)
		if err != nil {
			return res, err
		}
		res.atTop = ok
	}
	return res, nil
}
