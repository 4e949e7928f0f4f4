package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// stageResult is what one set of replicas measured.
type stageResult struct {
	n       int
	sharded bool
	settle  time.Duration // from the launch to every key on its ring member and reconciled there
	drains  float64       // drain labels the sharder wrote during the start: members that joined after it assigned
	keys    []int         // keys owned per replica, in start order
	heaps   []heapStats   // per replica, after GC, with the keys synced
	churned []heapStats   // per replica, after GC, once the capacity search is over
	turned  []heapStats   // per replica, after GC, once every key was written c.turnover times (turnover)
	written float64       // writes sent per key when turned was measured
	sharder int           // index of the replica running the sharder; -1 when none
	cap     capacity
	scaleUp *handover // N → N+1, when measured
	kill    *handover // N+1 → N, or N → N-1 at the largest N
}

// handover is the time a set of keys took to move to its new owners.
type handover struct {
	from, to    int
	moved       int
	first, last time.Duration // to the first and to the last moved key's first Reconcile by its new owner
}

// placedOptions say what awaitPlaced waits for.
type placedOptions struct {
	since   time.Time       // Reconciles before it do not count
	check   func(int) bool  // the keys that must have been reconciled by their owner since then
	timeout time.Duration   // for the whole wait
	members func() []string // the ring's members; nil: not sharded, ps[0] owns every key
}

// awaitPlaced waits until every ConfigMap is labelled for the member that
// the ring of ps's members picks, none is draining, and every key o.check
// selects has been reconciled by its owner since o.since. It returns each
// checked key's first such Reconcile (Unix ns; 0 for the others).
func (b *bench) awaitPlaced(ctx context.Context, ps []*proc, o placedOptions) ([]int64, error) {
	n := b.c.n
	owner := make([]int, n) // index in ps
	if o.members != nil {
		names := o.members()
		want := ringOwners(b.c.namespace, n, names)
		for i := range n {
			owner[i] = slices.Index(names, want[i])
		}
		var last placement
		err := waitFor(ctx, o.timeout, func() bool {
			pl, err := place(ctx, b.md, b.c.namespace, b.c.ring, n)
			if err != nil {
				return false
			}
			last = pl
			return pl.draining == 0 && slices.Equal(pl.owner, want) || checkAlive(ps) != nil
		})
		if err == nil {
			err = checkAlive(ps)
		}
		if err != nil {
			wrong := 0
			for i := range last.owner {
				if last.owner[i] != want[i] {
					wrong++
				}
			}
			return nil, fmt.Errorf("the keys did not reach their ring members: %d of %d elsewhere, %d draining: %w", wrong, n, last.draining, err)
		}
	}
	firsts := make([]int64, n)
	missing := 0
	err := waitFor(ctx, o.timeout, func() bool {
		for pi, p := range ps {
			recs, _, err := p.recs.since(o.since.UnixNano())
			if err != nil {
				return false
			}
			for _, r := range recs {
				k := int(r.key)
				if k < n && owner[k] == pi && (firsts[k] == 0 || r.start < firsts[k]) {
					firsts[k] = r.start
				}
			}
		}
		missing = 0
		for i := range n {
			if o.check(i) && firsts[i] == 0 {
				missing++
			}
		}
		return missing == 0 || checkAlive(ps) != nil
	})
	if err == nil {
		err = checkAlive(ps)
	}
	if err != nil {
		return nil, fmt.Errorf("%d keys not reconciled by their owner: %w", missing, err)
	}
	for i := range n {
		if !o.check(i) {
			firsts[i] = 0
		}
	}
	return firsts, nil
}

// spread is the earliest and latest nonzero time of ts, relative to from.
func spread(ts []int64, from time.Time) (first, last time.Duration, count int) {
	lo, hi := int64(0), int64(0)
	for _, t := range ts {
		if t == 0 {
			continue
		}
		count++
		if lo == 0 || t < lo {
			lo = t
		}
		hi = max(hi, t)
	}
	if count == 0 {
		return 0, 0, 0
	}
	return time.Duration(lo - from.UnixNano()), time.Duration(hi - from.UnixNano()), count
}

func everyKey(int) bool { return true }

// members returns the member names of ps.
func members(ps []*proc) func() []string {
	return func() []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.member
		}
		return out
	}
}

// sharderOf returns the index in ps of the replica holding the ring's
// sharder Lease, or -1.
func (b *bench) sharderOf(ctx context.Context, ps []*proc) int {
	l, err := b.kube.CoordinationV1().Leases(b.c.namespace).Get(ctx, b.c.ring+"-sharder", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return -1
	}
	return slices.IndexFunc(ps, func(p *proc) bool { return p.member == *l.Spec.HolderIdentity })
}

// memberLeaseAcquired waits for p's member Lease and returns its
// acquireTime, which p's elector wrote from its own clock (this host's).
func (b *bench) memberLeaseAcquired(ctx context.Context, p *proc) (time.Time, error) {
	var at time.Time
	err := waitFor(ctx, time.Minute, func() bool {
		l, err := b.kube.CoordinationV1().Leases(b.c.namespace).Get(ctx, shard.LeaseName(b.c.ring, p.member), metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err != nil || l.Spec.AcquireTime == nil {
			return false
		}
		at = l.Spec.AcquireTime.Time
		return true
	})
	if err != nil {
		return at, fmt.Errorf("the member Lease of %s: %w", p.name, err)
	}
	return at, nil
}

// runStage starts count replicas of f at once over the ConfigMaps, waits
// until the keys are placed and reconciled, measures heap and capacity,
// then a scale-up to count+1 (when scaleUp) and a kill -9 of one replica
// that does not run the sharder, and stops the rest.
func (b *bench) runStage(ctx context.Context, f *fleet, sharded bool, count int, scaleUp bool) (stageResult, error) {
	res := stageResult{n: count, sharded: sharded, sharder: -1}
	prefix := fmt.Sprintf("n%d", count)
	if !sharded {
		prefix = "single"
	}
	launched := time.Now()
	ps, err := f.start(ctx, prefix, count)
	if err != nil {
		return res, err
	}
	defer func() {
		if err := f.stop(); err != nil {
			b.logf("  stopping the replicas: %v", err)
		}
	}()
	o := placedOptions{since: launched, check: everyKey, timeout: b.c.settleTimeout}
	if sharded {
		o.members = members(ps)
	}
	firsts, err := b.awaitPlaced(ctx, ps, o)
	if err != nil {
		return res, fmt.Errorf("starting %d replicas: %w", count, err)
	}
	_, res.settle, _ = spread(firsts, launched)
	if sharded {
		res.sharder = b.sharderOf(ctx, ps)
		for _, p := range ps {
			v, _, err := p.metric(ctx, "ctrlkit_shard_labels_total", `action="drain"`)
			if err != nil {
				return res, err
			}
			res.drains += v
		}
	}
	pl, err := place(ctx, b.md, b.c.namespace, b.c.ring, b.c.n)
	if err != nil {
		return res, err
	}
	for _, p := range ps {
		k := b.c.n
		if sharded {
			k = 0
			for _, m := range pl.owner {
				if m == p.member {
					k++
				}
			}
		}
		res.keys = append(res.keys, k)
		h, err := p.heap(ctx)
		if err != nil {
			return res, err
		}
		res.heaps = append(res.heaps, h)
		if b.c.heapProfiles != "" {
			if err := p.heapProfile(ctx, b.c.heapProfiles, ""); err != nil {
				return res, err
			}
		}
	}
	b.logf("  %d replica(s) placed and reconciled every key %.1fs after launch; drains during the start %.0f; keys %v; heap in use MiB %s, live %s; sharder: replica %d",
		count, res.settle.Seconds(), res.drains, res.keys, mibList(res.heaps, func(h heapStats) uint64 { return h.HeapInuse }),
		mibList(res.heaps, func(h heapStats) uint64 { return h.HeapAlloc }), res.sharder+1)

	top := 1.6 * float64(count*b.c.workers) / b.c.cost.Seconds()
	hold := func(rate float64) (step, error) { return holdRate(ctx, b.c, b.drv, ps, rate) }
	if res.cap, err = searchCapacity(b.c, top, hold, b.logf); err != nil {
		return res, err
	}
	b.logf("  capacity: %.1f writes/s (rate %.0f/s)", res.cap.best.achieved, res.cap.best.rate)
	for _, p := range ps {
		h, err := p.heap(ctx)
		if err != nil {
			return res, err
		}
		res.churned = append(res.churned, h)
		if b.c.heapProfiles != "" {
			if err := p.heapProfile(ctx, b.c.heapProfiles, "-churned"); err != nil {
				return res, err
			}
		}
	}
	b.logf("  after the capacity search: heap in use MiB %s, live %s", mibList(res.churned, func(h heapStats) uint64 { return h.HeapInuse }),
		mibList(res.churned, func(h heapStats) uint64 { return h.HeapAlloc }))
	if err := b.turnover(ctx, ps, &res); err != nil {
		return res, err
	}
	if !sharded {
		return res, nil
	}

	if scaleUp {
		p, err := f.launch(prefix + "up")
		if err != nil {
			return res, err
		}
		if err := p.awaitHello(ctx); err != nil {
			return res, err
		}
		acquired, err := b.memberLeaseAcquired(ctx, p)
		if err != nil {
			return res, err
		}
		ps = append(ps, p)
		want := ringOwners(b.c.namespace, b.c.n, members(ps)())
		firsts, err := b.awaitPlaced(ctx, ps, placedOptions{since: p.started, check: func(i int) bool { return want[i] == p.member },
			timeout: b.c.settleTimeout, members: members(ps)})
		if err != nil {
			return res, fmt.Errorf("scale-up %d → %d: %w", count, count+1, err)
		}
		h := &handover{from: count, to: count + 1}
		h.first, h.last, h.moved = spread(firsts, acquired)
		res.scaleUp = h
		b.logf("  scale-up %d → %d: %d keys moved; from the new member's Lease acquired to its first Reconcile of a moved key %.2fs, to its last %.2fs",
			count, count+1, h.moved, h.first.Seconds(), h.last.Seconds())
	}
	if len(ps) < 2 {
		return res, nil
	}
	sharder := b.sharderOf(ctx, ps)
	victim := -1
	for i := range ps {
		if i != sharder {
			victim = i
		}
	}
	pl, err = place(ctx, b.md, b.c.namespace, b.c.ring, b.c.n)
	if err != nil {
		return res, err
	}
	victimKeys := func(i int) bool { return pl.owner[i] == ps[victim].member }
	at := f.kill(ps[victim])
	survivors := slices.Delete(slices.Clone(ps), victim, victim+1)
	firsts, err = b.awaitPlaced(ctx, survivors, placedOptions{since: at, check: victimKeys, timeout: b.c.settleTimeout, members: members(survivors)})
	if err != nil {
		return res, fmt.Errorf("kill -9 of one of %d: %w", len(ps), err)
	}
	h := &handover{from: len(ps), to: len(ps) - 1}
	h.first, h.last, h.moved = spread(firsts, at)
	res.kill = h
	b.logf("  kill -9 of one of %d: %d keys moved; from the kill to the first Reconcile of a moved key by its new owner %.2fs, to the last %.2fs",
		len(ps), h.moved, h.first.Seconds(), h.last.Seconds())
	return res, nil
}

func mibList(hs []heapStats, f func(heapStats) uint64) string {
	s := "["
	for i, h := range hs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.1f", mib(f(h)))
	}
	return s + "]"
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// turnover writes every key until it was written b.c.turnover times since
// the stage began (the capacity search's writes count), at 90% of the
// capacity the search found, waits for those writes to be reconciled, and
// measures each replica's heap: every stage, the singleton included, then
// holds objects rewritten as often, which the heap after the capacity search
// alone does not give (the search sends more writes per key the more
// replicas serve them, and a heap's room between objects grows with the
// rewrites it went through).
func (b *bench) turnover(ctx context.Context, ps []*proc, res *stageResult) error {
	if b.c.turnover <= 0 {
		return nil
	}
	sent := searchWrites(b.c, *res) * float64(b.c.n)
	rate := 0.9 * res.cap.best.achieved // below the capacity: no backlog to drain
	if rate <= 0 {
		rate = float64(len(ps)*b.c.workers) / b.c.cost.Seconds() / 2
	}
	if need := b.c.turnover*float64(b.c.n) - sent; need >= 1 {
		c := b.c
		c.hold, c.warmup = time.Duration(need/rate*float64(time.Second)), 0
		st, err := holdRate(ctx, c, b.drv, ps, rate)
		if err != nil {
			return err
		}
		if st.missed > 0 {
			return fmt.Errorf("turnover: %d writes never reconciled", st.missed)
		}
		sent += st.achieved * c.hold.Seconds()
		b.logf("  turnover: %s", st)
	}
	res.written = sent / float64(b.c.n)
	for _, p := range ps {
		h, err := p.heap(ctx)
		if err != nil {
			return err
		}
		res.turned = append(res.turned, h)
		if b.c.heapProfiles != "" {
			if err := p.heapProfile(ctx, b.c.heapProfiles, "-turned"); err != nil {
				return err
			}
		}
	}
	b.logf("  after %.1f writes per key: heap in use MiB %s, live %s", res.written, mibList(res.turned, func(h heapStats) uint64 { return h.HeapInuse }),
		mibList(res.turned, func(h heapStats) uint64 { return h.HeapAlloc }))
	return nil
}

// searchWrites is the writes per key the capacity search of s sent.
func searchWrites(c config, s stageResult) float64 {
	sent := 0.0
	for _, st := range s.cap.steps {
		sent += st.achieved * c.hold.Seconds()
	}
	return sent / float64(c.n)
}
