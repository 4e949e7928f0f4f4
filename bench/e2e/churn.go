package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

const (
	maxInFlight = 400 // open-loop writes outstanding at once
	settleAfter = 5 * time.Second
)

// writer is the open-loop churn writer. Sequence numbers and the object
// cursor carry on across runs, so every write sets a value never seen
// before, on the object least recently written. Consecutive writes go to
// consecutive objects, and so round-robin over the namespaces.
type writer struct {
	client  kubernetes.Interface
	objects int
	seq     int64
	cursor  int
}

// write is one churn write: the sequence number it set, when the request
// was sent and when the API server's response arrived (zero if it failed).
type write struct {
	seq        int64
	sent, resp time.Time
}

// churn patches one object every 1/rate seconds for d, on schedule
// whatever the response times (open loop, at most maxInFlight outstanding),
// and returns every write once all have answered. Not goroutine-safe.
func (w *writer) churn(ctx context.Context, rate int, d time.Duration) []write {
	total := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	out := make([]write, total)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		// Pacing an open-loop writer: the schedule is the point, not a condition.
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		seq, idx := w.next()
		out[i].seq = seq
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i].sent = time.Now()
			if w.patch(ctx, seq, idx) == nil {
				out[i].resp = time.Now()
			}
		})
	}
	wg.Wait()
	return out
}

// next picks the next write: a new sequence number, and the object least
// recently written.
func (w *writer) next() (seq int64, idx int) {
	w.seq++
	seq, idx = w.seq, w.cursor%w.objects
	w.cursor++
	return seq, idx
}

// patch merge-patches object idx's sequence annotation to seq.
func (w *writer) patch(ctx context.Context, seq int64, idx int) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, seqAnnotation, seq)
	_, err := w.client.CoreV1().ConfigMaps(nsName(idx)).Patch(ctx, objName(idx), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// latencies is what a recorder saw of a batch of writes.
type latencies struct {
	fromResp []time.Duration // sorted; write response to Reconcile start (negative when the watch event won)
	fromSent []time.Duration // sorted; write request sent to Reconcile start
	missed   int             // writes that failed or no Reconcile saw in time
}

// measure matches writes (accepted by keep, or all when keep is nil) with
// the Reconciles rec saw.
func measure(rec *recorder, writes []write, keep func(write) bool) latencies {
	var l latencies
	for _, wr := range writes {
		if keep != nil && !keep(wr) {
			continue
		}
		start, ok := rec.startOf(wr.seq)
		if wr.resp.IsZero() || !ok {
			l.missed++
			continue
		}
		l.fromResp = append(l.fromResp, start.Sub(wr.resp))
		l.fromSent = append(l.fromSent, start.Sub(wr.sent))
	}
	slices.Sort(l.fromResp)
	slices.Sort(l.fromSent)
	return l
}

// waitSeen polls until rec saw every successful write or d has passed.
func waitSeen(rec *recorder, writes []write, d time.Duration) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end) && !rec.sawAll(writes); {
		<-tick.C
	}
}

type churnResult struct {
	rate int
	latencies
	cpuPer1000  float64 // process CPU seconds per 1,000 reconciles during the phase, writer baseline subtracted
	reconciles  int64
	cpuSeconds  float64
	phaseLength time.Duration
}

// quantile is the q-quantile (nearest rank) of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// p is the q-quantile of the latencies from the write's response.
func (l latencies) p(q float64) time.Duration { return quantile(l.fromResp, q) }

// max is the largest latency from the write's response, 0 if none.
func (l latencies) max() time.Duration {
	if len(l.fromResp) == 0 {
		return 0
	}
	return l.fromResp[len(l.fromResp)-1]
}

// pSent is the q-quantile of the latencies from the write's request.
func (l latencies) pSent(q float64) time.Duration { return quantile(l.fromSent, q) }

// writerCPU runs the writer at rate for d with no manager running and
// returns the process CPU seconds it took: the baseline churnPhase
// subtracts.
func writerCPU(ctx context.Context, w *writer, rate int, d time.Duration) float64 {
	cpu0 := cpuSeconds()
	w.churn(ctx, rate, d)
	return cpuSeconds() - cpu0
}

// churnPhase runs the writer at rate for d and waits up to settleAfter for
// the Reconciles that see its writes.
// baseline is the writer's own CPU seconds at this rate (writerCPU).
func churnPhase(ctx context.Context, rec *recorder, w *writer, rate int, d time.Duration, baseline float64) (churnResult, error) {
	ch := churnResult{rate: rate}
	cpu0, t0, n0 := cpuSeconds(), time.Now(), rec.reconciles.Load()
	writes := w.churn(ctx, rate, d)
	waitSeen(rec, writes, settleAfter)
	ch.cpuSeconds = cpuSeconds() - cpu0
	ch.phaseLength = time.Since(t0)
	ch.reconciles = rec.reconciles.Load() - n0
	if ch.reconciles > 0 {
		ch.cpuPer1000 = (ch.cpuSeconds - baseline) / float64(ch.reconciles) * 1000
	}
	ch.latencies = measure(rec, writes, nil)
	if len(ch.fromResp) == 0 {
		return ch, fmt.Errorf("churn at %d/s: no write was seen by a Reconcile", rate)
	}
	return ch, nil
}
