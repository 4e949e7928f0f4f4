package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
)

// stormConfig is the restart storm: a fresh manager over every object of
// the first size, each Reconcile costing cost, while writes updates arrive
// at rate.
type stormConfig struct {
	updates int
	rate    int
	cost    time.Duration
}

// stormResult is one storm run.
type stormResult struct {
	sync    time.Duration // from building the manager to its informer synced
	drain   time.Duration // from building the manager to every object reconciled once
	all     latencies     // every update
	during  latencies     // the updates acknowledged before the backlog drained
	nDuring int           // how many updates that is (missed ones included)
	slow    int           // updates whose Reconcile started more than slowAfter after the response
}

// slowAfter separates updates served at once from those that waited
// behind (part of) the backlog: with 4 workers and a 1ms Reconcile, 100ms
// is 400 Reconciles.
const slowAfter = 100 * time.Millisecond

// stormPhase restarts fw's controller (a fresh manager) over c.sizes[0]
// ConfigMaps with a reconciler costing c.storm.cost, and as soon as its
// cache has synced, while the initial backlog (queued at low priority by
// both frameworks) drains, updates c.storm.updates objects at c.storm.rate
// per second, round-robin over the namespaces. It measures when each
// update's Reconcile started, and when the backlog was drained.
func stormPhase(ctx context.Context, cfg *rest.Config, fw framework, c config, w *writer) (stormResult, error) {
	var res stormResult
	n := c.sizes[0]
	st, err := launch(ctx, cfg, fw, newRecorder(n, objPrefix), setup{kind: configMaps, cost: c.storm.cost})
	if err != nil {
		return res, err
	}
	if err := st.waitSynced(); err != nil {
		_ = st.stop()
		return res, err
	}
	res.sync = st.res.sync
	d := time.Duration(float64(c.storm.updates) / float64(c.storm.rate) * float64(time.Second))
	writes := w.churn(ctx, c.storm.rate, d)
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
	during := func(wr write) bool { return wr.resp.IsZero() || wr.resp.Before(drainedAt) }
	for _, wr := range writes {
		if during(wr) {
			res.nDuring++
		}
	}
	res.all = measure(st.rec, writes, nil)
	res.during = measure(st.rec, writes, during)
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
