package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// stormConfig is the restart storm: a fresh manager over every object of
// the first size, once per Reconcile cost, while updates arrive at rate.
type stormConfig struct {
	updates int             // at least this many updates per storm
	rate    int             // updates per second
	costs   []time.Duration // one storm case per simulated Reconcile cost
}

// drainCover is how much of the expected drain (objects × cost ÷ workers)
// the updates span: a little more than all of it, since the real drain
// runs longer (the list, sleeps overshooting), so the updates keep
// arriving until the backlog's last Reconciles.
const drainCover = 1.2

// expectedDrain is how long n Reconciles costing cost take on the workers,
// the list and the framework's own work left out.
func expectedDrain(n int, cost time.Duration) time.Duration {
	return time.Duration(float64(n) * float64(cost) / workers)
}

// span is how long a storm's updates go on: -storm-updates at -storm-rate,
// or drainCover times the expected drain if that is longer, at the same
// rate; so a long drain gets updates across the whole of it, not only in
// its first seconds.
func (s stormConfig) span(n int, cost time.Duration) time.Duration {
	d := time.Duration(float64(s.updates) / float64(s.rate) * float64(time.Second))
	return max(d, time.Duration(drainCover*float64(expectedDrain(n, cost))))
}

// count is how many updates a storm of span d sends.
func (s stormConfig) count(d time.Duration) int { return int(float64(s.rate) * d.Seconds()) }

// stormResult is one storm run.
type stormResult struct {
	sync    time.Duration // from building the manager to its informer synced
	drain   time.Duration // from building the manager to every object reconciled once
	span    time.Duration // how long the updates went on, from the cache sync
	sent    int           // updates sent
	all     latencies     // every update
	during  latencies     // the updates acknowledged before the backlog drained
	nDuring int           // how many updates that is (missed ones included)
	late    latencies     // of those, the ones acknowledged more than starvationBound after the cache sync
	nLate   int           // how many updates that is (missed ones included)
	slow    int           // updates whose Reconcile started more than slowAfter after the response
}

// slowAfter separates updates served at once from those that waited
// behind (part of) the backlog: with 4 workers, 100ms is 400 Reconciles
// of 1ms, 40 of 10ms. It is also the target for the p99 (targetP99).
const slowAfter = 100 * time.Millisecond

// targetP99 is the restart storm's target: p99 update → Reconcile of the
// updates acknowledged while the backlog drains (issue 12).
const targetP99 = 100 * time.Millisecond

// starvationBound is how long ctrlkit's queue lets its oldest low-priority
// key wait before the backlog gets a share of the Gets. The initial list is
// queued just before the cache reports synced, so updates acknowledged
// later than this after the sync arrive once the backlog has its share.
const starvationBound = workqueue.DefaultStarvationBound

// stormPhase restarts fw's controller (a fresh manager) over c.sizes[0]
// ConfigMaps with a reconciler costing cost, and as soon as its cache has
// synced, while the initial backlog (queued at low priority by both
// frameworks) drains, updates objects at c.storm.rate per second for
// c.storm.span, round-robin over the namespaces. It measures when each
// update's Reconcile started, and when the backlog was drained.
func stormPhase(ctx context.Context, cfg *rest.Config, fw framework, c config, cost time.Duration, w *writer) (stormResult, error) {
	var res stormResult
	n := c.sizes[0]
	st, err := launch(ctx, cfg, fw, newRecorder(n, objPrefix), setup{kind: configMaps, cost: cost})
	if err != nil {
		return res, err
	}
	if err := st.waitSynced(); err != nil {
		_ = st.stop()
		return res, err
	}
	res.sync = st.res.sync
	syncedAt := st.t0.Add(st.res.sync)
	res.span = c.storm.span(n, cost)
	writes := w.churn(ctx, c.storm.rate, res.span)
	res.sent = len(writes)
	if err := st.waitAll(); err != nil {
		_ = st.stop()
		return res, err
	}
	res.drain = st.res.all
	waitSeen(st.rec, writes, settleAfter)
	if err := st.stop(); err != nil {
		return res, fmt.Errorf("stopping: %w", err)
	}
	drainedAt := st.rec.allAt
	boundAt := syncedAt.Add(starvationBound)
	during := func(wr write) bool { return wr.resp.IsZero() || wr.resp.Before(drainedAt) }
	late := func(wr write) bool {
		at := wr.resp
		if at.IsZero() { // failed: when it was sent
			at = wr.sent
		}
		return during(wr) && at.After(boundAt)
	}
	for _, wr := range writes {
		if during(wr) {
			res.nDuring++
		}
		if late(wr) {
			res.nLate++
		}
	}
	res.all = measure(st.rec, writes, nil)
	res.during = measure(st.rec, writes, during)
	res.late = measure(st.rec, writes, late)
	for _, d := range res.all.fromResp {
		if d > slowAfter {
			res.slow++
		}
	}
	if len(res.all.fromResp) == 0 {
		return res, fmt.Errorf("no update was seen by a Reconcile")
	}
	return res, nil
}
