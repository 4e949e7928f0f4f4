package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The published anchor: timebertt's kubernetes-controller-sharding thesis.
const (
	thesisObjects1, thesisObjects5 = 2304, 7289 // objects at its SLOs, 1 and 5 instances
	thesisChanges1, thesisChanges5 = 75, 242    // changes/s at its SLOs
	thesisSingletonMiB             = 278
	thesisShardMiBLo, thesisShard  = 87, 115 // per shard, with 3 shards
)

// Targets of issue 15.
const (
	capacityTarget = 0.8 // capacity ≥ 0.8 × N × the singleton's
	heapTarget     = 1.3 // heap per replica ≤ 1.3/N (issue 35) × the singleton's, sharded type
)

// share is a replica's heap for the sharded type: its HeapInuse less an
// idle replica's.
func share(h, idle heapStats) float64 { return float64(h.HeapInuse) - float64(idle.HeapInuse) }

// baseline is the singleton the ratios divide by: one replica without
// sharding, what an operator runs before it shards, when it was measured;
// else the first sharded stage.
type baseline struct {
	name     string
	capacity float64 // writes/s
	share    float64 // heap for the sharded type, bytes
}

func baselineOf(res *results) baseline {
	if u := res.unsharded; u != nil {
		return baseline{name: "one replica without sharding", capacity: u.cap.best.achieved, share: share(u.heaps[0], res.idleUnsharded)}
	}
	s := res.stages[0]
	return baseline{name: fmt.Sprintf("%d sharded replica(s)", s.n), capacity: s.cap.best.achieved / float64(s.n), share: share(s.heaps[0], res.idleSharded)}
}

// idleOf is the idle heap of a replica like s's.
func idleOf(s stageResult, res *results) heapStats {
	if s.sharded {
		return res.idleSharded
	}
	return res.idleUnsharded
}

// judged is what a stage scored against the targets.
type judged struct {
	capRatio           float64   // capacity ÷ (N × the singleton's)
	balanceBound       float64   // the capacity ratio the ring's balance allows: 1 ÷ (N × the largest share of keys)
	shares             []float64 // per replica, bytes
	ratios             []float64 // per replica, share ÷ the singleton's share
	sharderRatio       float64   // the ratio of the replica running the sharder (of the only replica when none does)
	worstOthers        float64   // the highest ratio of the other replicas
	capMet             bool
	sharderMet         bool
	othersMet          bool
	minKeys, maxKeys   int
	sharderMiB, others float64 // the sharder replica's share, the mean of the others' (MiB)
	hasOthers          bool
}

func judge(s stageResult, base baseline, idle heapStats, n int) judged {
	var j judged
	if base.capacity > 0 {
		j.capRatio = s.cap.best.achieved / (float64(s.n) * base.capacity)
	}
	first := max(s.sharder, 0)
	var sumOthers float64
	for i, h := range s.heaps {
		sh := share(h, idle)
		j.shares = append(j.shares, sh)
		r := sh / base.share
		j.ratios = append(j.ratios, r)
		if i == first {
			j.sharderMiB, j.sharderRatio = sh/(1<<20), r
		} else {
			j.worstOthers = max(j.worstOthers, r)
			sumOthers += sh
			j.hasOthers = true
		}
	}
	if j.hasOthers {
		j.others = sumOthers / float64(len(s.heaps)-1) / (1 << 20)
	}
	j.minKeys, j.maxKeys = slices.Min(s.keys), slices.Max(s.keys)
	j.balanceBound = float64(n) / (float64(s.n) * float64(j.maxKeys))
	j.capMet = j.capRatio >= capacityTarget
	j.sharderMet = j.sharderRatio <= heapTarget/float64(s.n)
	j.othersMet = j.worstOthers <= heapTarget/float64(s.n)
	return j
}

// misses explains each target a stage missed, from its figures.
func misses(c config, res *results, base baseline) []string {
	var out []string
	perKeyBase := base.share / float64(c.n)
	for _, s := range res.stages {
		if s.n < 2 {
			continue
		}
		j := judge(s, base, res.idleSharded, c.n)
		if !j.capMet {
			out = append(out, fmt.Sprintf("N=%d, capacity: %.2f of N × the singleton's; the ring's balance allows %.2f (the busiest replica holds %d of %d keys).",
				s.n, j.capRatio, j.balanceBound, j.maxKeys, c.n))
		}
		for i := range s.heaps {
			if i == s.sharder || j.ratios[i] <= heapTarget/float64(s.n) {
				continue
			}
			fair := float64(s.keys[i]) * float64(s.n) / float64(c.n)
			perKey := j.shares[i] / float64(s.keys[i]) / perKeyBase
			out = append(out, fmt.Sprintf("N=%d, replica %d: %.2f× its fair share of keys × %.2f× the singleton's heap in use per key ÷ %d = %.2f, against %.2f.",
				s.n, i+1, fair, perKey, s.n, j.ratios[i], heapTarget/float64(s.n)))
		}
		if s.sharder >= 0 && !j.sharderMet {
			h := s.heaps[s.sharder]
			live := float64(h.HeapAlloc) - float64(res.idleSharded.HeapAlloc)
			out = append(out, fmt.Sprintf("N=%d, the sharder's replica: %.2f against %.2f with its %d keys of %d, in use ÷ live %.2f: the sharder's writes and reads of a large move are garbage allocated between the keys this replica caches at the same time, and the spans they shared stay in use after GC.",
				s.n, j.sharderRatio, heapTarget/float64(s.n), s.keys[s.sharder], c.n, share(h, res.idleSharded)/live))
		}
	}
	if inUse, live, ok := othersPerKey(res); ok && len(out) > 0 {
		u := res.unsharded
		if u != nil {
			out = append(out, fmt.Sprintf("Heap per key of the replicas that do not run the sharder: %.0f B in use, %.0f B live (the mean over the stages), against the singleton's %.0f B and %.0f B. Each of their objects carries the shard label, and their heap is less densely packed (in use ÷ live: %.2f against %.2f): they received their keys one by one as the sharder assigned them, between other allocations, where the singleton listed its keys at start.",
				inUse, live, share(u.heaps[0], res.idleUnsharded)/float64(c.n), (float64(u.heaps[0].HeapAlloc)-float64(res.idleUnsharded.HeapAlloc))/float64(c.n),
				inUse/live, share(u.heaps[0], res.idleUnsharded)/(float64(u.heaps[0].HeapAlloc)-float64(res.idleUnsharded.HeapAlloc))))
		}
	}
	if m := metadataPerObject(res, c.n); m > 0 && len(out) > 0 {
		out = append(out, fmt.Sprintf("The sharder's own state: the sharder's replica holds about %.0f B per object of the ring beyond its own keys (its share less its keys at the other replicas' heap per key, ÷ %d objects, the mean over the stages with 2 or more replicas), against %.0f B per key for a whole cached ConfigMap in the singleton. The sharder caches no labelled object: it watches only the unlabelled ones, and reads the labelled ones a page at a time when the members change.",
			m, c.n, perKeyBase))
	}
	return out
}

// othersPerKey is the sharded type's heap per key, in use and live, of the
// replicas that do not run the sharder, over every stage.
func othersPerKey(res *results) (inUse, live float64, ok bool) {
	keys := 0
	for _, s := range res.stages {
		for i, h := range s.heaps {
			if i == s.sharder || s.sharder < 0 {
				continue
			}
			inUse += share(h, res.idleSharded)
			live += float64(h.HeapAlloc) - float64(res.idleSharded.HeapAlloc)
			keys += s.keys[i]
		}
	}
	if keys == 0 {
		return 0, 0, false
	}
	return inUse / float64(keys), live / float64(keys), true
}

// metadataPerObject estimates what the sharder's replica holds beyond its
// own share of objects, per object of the ring: its share less its keys
// at the others' heap per key, ÷ every key. The mean over the stages with
// two replicas or more; 0 when there are none.
func metadataPerObject(res *results, n int) float64 {
	var sum float64
	count := 0
	for _, s := range res.stages {
		if s.sharder < 0 || len(s.heaps) < 2 {
			continue
		}
		var othersShare float64
		othersKeys := 0
		for i, h := range s.heaps {
			if i != s.sharder {
				othersShare += share(h, res.idleSharded)
				othersKeys += s.keys[i]
			}
		}
		perKey := othersShare / float64(othersKeys)
		sum += (share(s.heaps[s.sharder], res.idleSharded) - float64(s.keys[s.sharder])*perKey) / float64(n)
		count++
	}
	if count == 0 {
		return 0
	}
	return sum / float64(count)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

// report is bench/results/shard.md.
func report(c config, res *results) string {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	p("# Sharding: capacity, heap and handover (`make bench-shard`)\n\n")
	p("%s, %s/%s, %d CPUs; envtest kube-apiserver and etcd from bin/k8s on the same machine (load average %s before the run, %s after). ",
		time.Now().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), res.loadBefore, res.loadAfter)
	p("%d ConfigMaps (%d bytes of data each) in one namespace, sharded by `manager.Options.Sharding` (label mode) over replicas run as separate processes; ", c.n, c.dataBytes)
	p("each replica: %d workers, a Reconcile that waits %v (so one replica serves at most %.0f Reconciles/s), client QPS %s, member Leases %v / %v / %v (duration / renew deadline / retry period; the sharder judges liveness every retry period). ",
		c.workers, c.cost, float64(c.workers)/c.cost.Seconds(), qpsString(c.qps), c.lease[0], c.lease[1], c.lease[2])
	p("Whole run: %.1f min.\n\n", res.took.Minutes())
	if c.workers < 5 {
		p("**%d workers per replica, not the 5 the issue suggests:** with 5, four replicas serve 1,000 Reconciles/s, and the search must go past that; on this 2-core machine the API server, etcd and the driver together sent no more than about 500 updates/s while the replicas ran (measured during development: asked for 600 and 800/s, the driver sent 490 and 540/s). With %d, four replicas serve %.0f/s. The Reconcile still waits %v.\n\n",
			c.workers, c.workers, 4*float64(c.workers)/c.cost.Seconds(), c.cost)
	}
	if len(res.stages) == 0 {
		p("No sharded stage ran.\n")
		return sb.String()
	}
	base := baselineOf(res)

	p("The singleton the ratios divide by: %s (capacity %.0f writes/s, %.1f MiB of heap for the ConfigMaps). ", base.name, base.capacity, base.share/(1<<20))
	p("\"Sharded type\": heap in use after GC less an idle replica's (%.1f MiB sharded, %.1f MiB without sharding, measured before the ConfigMaps existed). ",
		mib(res.idleSharded.HeapInuse), mib(res.idleUnsharded.HeapInuse))
	p("\"Sharder\": the replica running the sharder, which watches the unlabelled objects of the ring and reads the others a page at a time when the members change; \"others\": the other replicas (the mean share; the highest ratio).\n\n")
	p("| replicas | keys per replica | capacity (writes/s) | ÷ (N × singleton) | ≥ %.1f | balance bound | heap in use per replica (MiB) | sharded type (MiB): sharder · others | ÷ singleton's: sharder · others | ≤ %.1f/N | met: sharder · others |\n", capacityTarget, heapTarget)
	p("|--|--|--:|--:|--|--:|--|--|--|--:|--|\n")
	rows := res.stages
	if res.unsharded != nil {
		rows = append([]stageResult{*res.unsharded}, rows...)
	}
	for _, s := range rows {
		j := judge(s, base, idleOf(s, res), c.n)
		name := fmt.Sprint(s.n)
		if !s.sharded {
			name = "1, no sharding"
		}
		capCell := fmt.Sprintf("%.0f", s.cap.best.achieved)
		if s.cap.atTop {
			capCell = "≥ " + capCell
		}
		if s.cap.limited {
			capCell += " (driver short)"
		}
		heaps := make([]string, len(s.heaps))
		for i, h := range s.heaps {
			heaps[i] = fmt.Sprintf("%.1f", mib(h.HeapInuse))
			if i == s.sharder {
				heaps[i] += "ˢ"
			}
		}
		others, ratioOthers, met := "–", "–", yes(j.sharderMet)
		if j.hasOthers {
			others = fmt.Sprintf("%.1f", j.others)
			ratioOthers = fmt.Sprintf("%.2f", j.worstOthers)
			met += " · " + yes(j.othersMet)
		}
		capMet := yes(j.capMet)
		if s.n == 1 {
			capMet, met = "–", "–"
		}
		p("| %s | %s | %s | %.2f | %s | %.2f | %s | %.1f · %s | %.2f · %s | %.2f | %s |\n",
			name, keysCell(j), capCell, j.capRatio, capMet, j.balanceBound, strings.Join(heaps, ", "), j.sharderMiB, others,
			j.sharderRatio, ratioOthers, heapTarget/float64(s.n), met)
	}
	p("\nˢ the replica running the sharder. \"Balance bound\": the capacity ratio the ring's split allows, 1 ÷ (N × the largest replica's share of the keys): the replica with the most keys saturates first.")
	p("\n\n")
	if why := misses(c, res, base); len(why) > 0 {
		p("**Why the misses.** A replica's ratio is (its keys ÷ n/N, its fair share) × (its heap per key ÷ the singleton's) ÷ N, so a replica misses %.1f/N when the ring gives it more than its fair share or it holds more per key than the singleton:\n\n", heapTarget)
		for _, w := range why {
			p("- %s\n", w)
		}
		p("\n")
	}

	if res.unsharded != nil && len(res.unsharded.churned) == 1 {
		churnedReport(p, c, res)
	}

	p("### Heap per replica\n\n")
	p("After two forced GCs, with the keys placed and reconciled. `HeapInuse` is what the targets are judged on; `HeapAlloc` counts only the bytes of live objects, so the difference is room in spans that hold some live object (fragmentation: a replica that received its keys one by one, as watch events between other allocations, packs them less densely than one that listed them). Per key: the sharded type's share ÷ the replica's keys.\n\n")
	p("| replicas | replica | keys | HeapInuse (MiB) | HeapAlloc (MiB) | sharded type, in use (MiB) | sharded type, live (MiB) | in use per key (B) | live per key (B) |\n|--|--|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range rows {
		idle := idleOf(s, res)
		name := fmt.Sprint(s.n)
		if !s.sharded {
			name = "1, no sharding"
		}
		for i, h := range s.heaps {
			who := fmt.Sprint(i + 1)
			if i == s.sharder {
				who += " (sharder)"
			}
			inUse, live := share(h, idle), float64(h.HeapAlloc)-float64(idle.HeapAlloc)
			p("| %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f |\n", name, who, s.keys[i], mib(h.HeapInuse), mib(h.HeapAlloc),
				inUse/(1<<20), live/(1<<20), inUse/float64(s.keys[i]), live/float64(s.keys[i]))
		}
	}
	p("\n")

	p("### Handover\n\n")
	p("| change | keys moved | to the first moved key's first Reconcile by its new owner (s) | to the last's (s) | measured from |\n|---|--:|--:|--:|---|\n")
	for _, s := range res.stages {
		if h := s.scaleUp; h != nil {
			p("| scale-up %d → %d | %d | %.2f | %.2f | the new member's Lease acquired |\n", h.from, h.to, h.moved, h.first.Seconds(), h.last.Seconds())
		}
		if h := s.kill; h != nil {
			p("| kill -9, %d → %d | %d | %.2f | %.2f | the kill |\n", h.from, h.to, h.moved, h.first.Seconds(), h.last.Seconds())
		}
	}
	p("\nA kill's handover cannot be shorter than the time the dead member's Lease takes to expire by the sharder's clock: %v after the last renewal it saw, which came up to one retry period (%v) before the kill; the sharder then buries the Lease and assigns the keys, up to 8 at once. ", c.lease[0], c.lease[2])
	p("A scale-up moves each key in three writes (drain label by the sharder, acknowledgement by the old owner, assignment by the sharder); the sharder makes up to 8 writes at once, and each old owner acknowledges up to 16 keys at once.\n\n")

	p("### Starts\n\n| replicas | launch → every key placed and reconciled (s) | drains during the start |\n|--:|--:|--:|\n")
	for _, s := range res.stages {
		p("| %d | %.1f | %.0f |\n", s.n, s.settle.Seconds(), s.drains)
	}
	p("\nEvery stage starts its replicas at once over ConfigMaps still labelled for the previous stage's members, which have left; the sharder assigns each to the ring's member. A drain during a start means the sharder assigned keys before every member had joined, and moved them afterwards (the heap of those replicas then holds some garbage from the keys that left).\n\n")

	p("### Capacity search\n\nEach rate is held %v; the writes of the first %v are not judged. Queue time: from the moment a replica's informer delivered the write (a handler of the replica's own on the controller's informer records it) to the start of the first Reconcile that read it or a later write of the key; the driver's writes carry their send time in an annotation, which gives \"sent → start\" too (the API server's write and watch latency included). A rate passes when the p99 queue time ≤ %v and the driver sent at least 95%% of it; \"driver short\": the queue times met the SLO but the driver sent less, so the rate is not counted. A rate that fails is held again (\"held again\") and fails only if it fails twice: load from outside the bench can only lengthen queue times, so one slow hold must not steer the bisection down, while above the replicas' capacity the queue grows every time.\n\n", c.hold, c.warmup, c.slo)
	p("| replicas | rate (writes/s) | sent (writes/s) | Reconciles/s | queue p50 (ms) | queue p99 (ms) | queue max (ms) | sent → start p99 (ms) | over %v | never reconciled | verdict |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n", c.slo)
	stages := res.stages
	if res.unsharded != nil {
		stages = append([]stageResult{*res.unsharded}, stages...)
	}
	for _, s := range stages {
		name := fmt.Sprint(s.n)
		if !s.sharded {
			name = "1 (unsharded)"
		}
		for _, st := range s.cap.steps {
			p("| %s | %.0f | %.1f | %.1f | %.1f | %s | %s | %s | %d of %d | %d | %s |\n", name, st.rate, st.achieved, st.served, ms(st.p50), msCell(st.p99), msCell(st.max), msCell(st.e2e99),
				st.over, st.measured, st.missed, st.verdict())
		}
	}

	p("\n### Published anchor\n\ntimebertt's kubernetes-controller-sharding thesis measured, at its SLOs, 1 → 5 instances going from %s → %s objects (%.2f×, %.2f per instance) and %d → %d changes/s (%.2f×, %.2f per instance), ",
		comma(thesisObjects1), comma(thesisObjects5), float64(thesisObjects5)/thesisObjects1, float64(thesisObjects5)/thesisObjects1/5,
		thesisChanges1, thesisChanges5, float64(thesisChanges5)/thesisChanges1, float64(thesisChanges5)/thesisChanges1/5)
	p("and %d MiB for a singleton against %d–%d MiB per shard with 3 shards (%.2f–%.2f of the singleton; %.1f/3 = %.2f). Its figures are whole-process memory of a real operator; ours are Go heap, with the sharded type's share separated.\n",
		thesisSingletonMiB, thesisShardMiBLo, thesisShard, float64(thesisShardMiBLo)/thesisSingletonMiB, float64(thesisShard)/thesisSingletonMiB, heapTarget, heapTarget/3)
	return sb.String()
}

func keysCell(j judged) string {
	if j.minKeys == j.maxKeys {
		return fmt.Sprint(j.minKeys)
	}
	return fmt.Sprintf("%d–%d", j.minKeys, j.maxKeys)
}

func msCell(d time.Duration) string {
	if d == infinite {
		return "never"
	}
	return fmt.Sprintf("%.1f", ms(d))
}

func qpsString(q float64) string {
	if q < 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%.0f", q)
}

func comma(n int) string {
	s := fmt.Sprint(n)
	if len(s) <= 3 {
		return s
	}
	return s[:len(s)-3] + "," + s[len(s)-3:]
}

// laterHeap is one of the heap measurements taken after a stage's start:
// which of its heaps, and the writes sent per key before them.
type laterHeap struct {
	heaps   func(stageResult) []heapStats
	written func(stageResult) float64
}

// churnedReport is the section on the heap once the capacity search is
// over, against the singleton's after its own search.
func churnedReport(p func(string, ...any), c config, res *results) {
	p("### Heap after the capacity search\n\n")
	p("The table above measures each replica just after the sharder placed every key: its hard case, since the replica running the sharder then holds the garbage of 10,000 label writes between its keys. ")
	p("Here the same measurement is taken once the capacity search is over, when the driver's round-robin writes have replaced the cached objects on every replica alike, the singleton included. The search sends more writes per key the more replicas serve them (the table's second column), and a heap's room between its objects grows with the rewrites it went through: the next table compares the stages at equal writes per key. ")
	laterReport(p, c, res, "after its own search", laterHeap{
		heaps:   func(s stageResult) []heapStats { return s.churned },
		written: func(s stageResult) float64 { return searchWrites(c, s) }})
	if len(res.unsharded.turned) != 1 {
		return
	}
	p("### Heap in service: every key written %g times\n\n", c.turnover)
	p("After the capacity search, the driver wrote every key again, at 90%% of the capacity the search found, until each had been written %g times in the stage (searches included), and the heap was measured once those writes were reconciled: every stage, the singleton included, then holds objects rewritten as often, as in a replica that has served for a while. ", c.turnover)
	if u := res.unsharded; len(u.heaps) == 1 {
		live := func(h heapStats) float64 { return float64(h.HeapAlloc) - float64(res.idleUnsharded.HeapAlloc) }
		p("In this run the singleton's sharded type grew from its start (keys listed) to then by %+.0f%% in use and %+.0f%% live. ",
			100*(share(u.turned[0], res.idleUnsharded)/share(u.heaps[0], res.idleUnsharded)-1), 100*(live(u.turned[0])/live(u.heaps[0])-1))
	}
	laterReport(p, c, res, "after as many writes", laterHeap{
		heaps:   func(s stageResult) []heapStats { return s.turned },
		written: func(s stageResult) float64 { return s.written }})
}

// laterReport is a table of the heaps which says, judged like the main
// table's against the singleton's heap of the same kind.
func laterReport(p func(string, ...any), c config, res *results, whose string, which laterHeap) {
	u := res.unsharded
	base := share(which.heaps(*u)[0], res.idleUnsharded)
	p("The ratios divide by the singleton's sharded type %s, %.1f MiB.\n\n", whose, base/(1<<20))
	p("| replicas | writes sent per key | heap in use per replica (MiB) | ÷ singleton's: sharder · others (highest) | ≤ %.1f/N | met: sharder · others | in use ÷ live: sharder · others (mean) |\n|--|--:|--|--|--:|--|--|\n", heapTarget)
	for _, s := range append([]stageResult{*u}, res.stages...) {
		hs := which.heaps(s)
		if len(hs) != len(s.heaps) {
			continue
		}
		idle := idleOf(s, res)
		name := fmt.Sprint(s.n)
		if !s.sharded {
			name = "1, no sharding"
		}
		// The ratios and verdicts as the main table's, over these heaps.
		after := s
		after.heaps = hs
		j := judge(after, baseline{share: base}, idle, c.n)
		first := max(s.sharder, 0)
		heaps := make([]string, len(hs))
		var sharderDensity, densitySum float64
		for i, h := range hs {
			heaps[i] = fmt.Sprintf("%.1f", mib(h.HeapInuse))
			if i == s.sharder {
				heaps[i] += "ˢ"
			}
			density := share(h, idle) / (float64(h.HeapAlloc) - float64(idle.HeapAlloc))
			if i == first {
				sharderDensity = density
			} else {
				densitySum += density
			}
		}
		ratios, met, dens := fmt.Sprintf("%.2f", j.sharderRatio), yes(j.sharderMet), fmt.Sprintf("%.2f", sharderDensity)
		if j.hasOthers {
			ratios += fmt.Sprintf(" · %.2f", j.worstOthers)
			met += " · " + yes(j.othersMet)
			dens += fmt.Sprintf(" · %.2f", densitySum/float64(len(hs)-1))
		}
		if s.n == 1 {
			met = "–"
		}
		p("| %s | %.1f | %s | %s | %.2f | %s | %s |\n", name, which.written(s), strings.Join(heaps, ", "), ratios, heapTarget/float64(s.n), met, dens)
	}
	p("\nˢ the replica running the sharder.\n\n")
}
