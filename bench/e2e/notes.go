package main

import (
	"fmt"
	"strings"
)

// notes explains the table: how each number was taken, what the run
// created and how long that took, and what is missing.
func notes(c config, res *results) string {
	var sb strings.Builder
	sb.WriteString("\nNotes:\n")
	for _, s := range res.seeded {
		fmt.Fprintf(&sb, "- Setup: %v (client QPS unlimited).\n", s)
	}
	if res.podSize.full > 0 {
		fmt.Fprintf(&sb, "- A benchmark Pod (three containers with args, env, ports, resources, probes, mounts; eight labels, five annotations; "+
			"Pending, envtest has no scheduler) is %d B as JSON from the API server, %d B without its managedFields.\n",
			res.podSize.full, res.podSize.stripped)
	}
	if res.siteSize.full > 0 {
		fmt.Fprintf(&sb, "- A benchmark Site (custom resource bench.ctrlkit.io/v1: spec with image, replicas, port, six pod labels and five "+
			"strings; five labels, one annotation; status with observedGeneration, url and two conditions, written through the status "+
			"subresource) is %d B as JSON from the API server, %d B without its managedFields.\n", res.siteSize.full, res.siteSize.stripped)
	}
	if c.partial() {
		var secs []string
		for _, sec := range allSections {
			if c.runs(sec) {
				secs = append(secs, sec)
			}
		}
		fmt.Fprintf(&sb, "- **Partial run** (-only %s): the other sections were not measured; notes about them below do not apply.\n", strings.Join(secs, ","))
	}
	for _, m := range res.missing {
		fmt.Fprintf(&sb, "- **Missing:** %s.\n", m)
	}
	sb.WriteString(`- Cold start times run from the call that builds the manager (discovery included) to the informer's HasSynced
  (polled every 1ms) and to the Reconcile that completes the set of objects seen once. controller-runtime's
  controller starts its workers after client-go's WaitForCacheSync, which polls every 100ms.
- Heap is HeapInuse after two runtime.GC() with the manager running, every object reconciled and the manager then
  idle for 2s, minus HeapInuse before the manager was built (Go heap only, no RSS). The 2s make it the steady state
  after the initial list: ctrlkit's queue gives back what a drained backlog held (about 220 B per key) once it has
  stayed small for 1s; controller-runtime's queue keeps its share. A slope compares a cache holding the first half of the
  objects (label selector) with one holding all of them, so fixed overhead cancels out; the larger-size slope
  compares the N-object cold start of the same round with the larger one. "Best memory option": ctrlkit runs
  with ` + "`" + frameworks[0].lean + "`" + ` (its defaults already strip managedFields), controller-runtime with
  ` + "`" + frameworks[1].lean + "`" + `. controller-runtime's
  DefaultUnsafeDisableDeepCopy only skips the copy on reads (garbage, not cached heap) and is not used.
- Latency is from the churn write's HTTP response to the start of the first Reconcile that read that write's
  sequence annotation from the cache; it can be negative when the watch event arrives before the response.
  "Write sent" rows measure from the moment the request was sent instead: always positive, and they include the
  API server's write path (the same for both). latency.svg plots these. Every write goes to a different object.
  p99.9 is a nearest-rank quantile of one round's writes (rate × duration of them), so at the lowest rate it
  is among the few largest samples.
- CPU is getrusage(RUSAGE_SELF): the whole process, comparable only because both frameworks run in it one after
  the other; the API server and etcd are other processes and are not counted. Cold start: from building the
  manager to every object reconciled once, nothing else running. Churn: over the phase, minus the CPU of the same
  writer at the same rate with no manager running (measured once per round), per Reconcile in the phase; the
  writer costs more than the controller, so this row is noisy (it can even come out negative) and only large
  differences in it mean anything.
- Restart storm: a fresh manager (defaults: ctrlkit's priority and fair queue, controller-runtime's priority
  queue; both queue the initial list at low priority) whose Reconcile sleeps for the simulated cost after the
  cache read, once per cost (-storm-costs). The updates start when its cache has synced and go round-robin over
  all namespaces, each to a different object, at -storm-rate for the longer of -storm-updates ÷ rate and 1.2 ×
  the expected drain (objects × cost ÷ 4 workers), so they keep arriving until the backlog's last Reconciles,
  not only in its first seconds. Latency is from the update's response (the watch event arrives within about a
  millisecond of it, see the churn rows) to the start of the first Reconcile that saw it. storm.svg plots
  these. Updates acknowledged after the backlog drained meet an idle queue; the "those" rows keep only the
  ones that arrived while it was draining, and the target rows take their p99. When the expected drain
  outlasts ctrlkit's starvation bound (5s: after it, the low-priority backlog gets 1 Get in 4), the "past the
  bound" rows keep those acknowledged more than 5s after the cache sync (the initial list is queued just
  before it). controller-runtime registers its controller's event handler only
  after the manager has seen the caches synced (its controllers start after the cache runnables); an update
  that lands in that window is replayed to the new handler as part of the initial list (client-go marks every
  replayed object isInInitialList), so it is queued at low priority and waits behind the backlog. The
  "> 100ms" row counts such updates; ctrlkit adds its handlers before the informers start.
- At 400 writes/s this 2-core machine (API server, etcd, writer and controller together) is near its limit:
  in some rounds the API server's write path and watch delivery back up and the tails grow to hundreds of ms,
  in some runs to seconds (write sent → Reconcile p50 rising from ~3 ms to tens or hundreds of ms). Which
  rounds saturate can weigh more in the 400/s medians than the framework does; read them with the per-round
  lines below.
- Reads: each Reconcile reads its object once from the cache with the framework's default read path. ctrlkit's
  Lister returns the cached object itself (callers must not modify it); controller-runtime's cached client
  deep-copies it on every Get. That copy is part of controller-runtime's default cost and shows in its CPU rows.
- Ratios are left out (–) for the signed latencies and counts, and where a value is zero or negative.
`)
	if len(res.crd[frameworks[0].name]) > 0 {
		sb.WriteString(`- Custom resource: the Site CRD (bench/e2e/testdata) is installed with envtest's InstallCRDs, which waits until
  it is served; the Sites are created once, then per round and framework a manager caching the first half
  (label selector), stopped, then one caching all, each with one controller reconciling every Site once, as the
  ConfigMap cold start. ctrlkit: informer.For[*Site] with a scheme holding Site (JSON decoded straight into the
  Go type through a REST client of the group version); controller-runtime: its cache's typed informer of &Site{}
  with the same scheme, its defaults (managedFields kept). Heap per object (slope) is the target's heap: the
  half-to-full slope, fixed overhead cancelled; the "incl. fixed overhead" row divides the full cache's heap by N.
  Target rows take the median of the per-round ratios ctrlkit ÷ controller-runtime, with the range of those
  ratios and the rounds in which the ratio met the target.
`)
	}
	if res.writes != nil {
		fmt.Fprintf(&sb, `- Writes: each client updates the %d ConfigMaps of namespace %s in turn (read-modify-write from the
  server's last answer, a new annotation value each time, so every update changes the object), then creates
  ConfigMaps there, each deleted right after; the latency is from the call to its return. Each client runs next to
  its own manager's informer cache of every ConfigMap in the cluster (no controller), started fresh for each
  regime and round and synced, then %d untimed updates and a GC: ctrlkit's manager.Client() with
  read-your-own-writes on (the default: the write returns once the cache reflects it) and off
  (Options.ReadYourWrites.Disabled); controller-runtime's mgr.GetClient(), which does not wait for its cache;
  client-go's typed clientset with a shared informer, the floor (asked for protobuf, which the other two send for
  built-in types). The four run one after the other, in an order rotated every round. Quiet: nothing else writes.
  Loaded: churn's open-loop writer merge-patches the first size's ConfigMaps at %d/s through the whole regime, so
  every cache also decodes and stores those events and the write the cache must catch up on queues behind them;
  the per-round lines give the rate it reached. With n writers, each owns every n-th object, one write in flight.
- "Cache stale" counts writes after which the cache (ctrlkit's Lister, controller-runtime's cached Get,
  client-go's lister), read as soon as the call returned, did not hold the object at the written resourceVersion or
  later (a delete: still held the deleted UID). With read-your-own-writes on it must be 0; the other columns show
  how often a read right after the write would have been stale without it. "on − off" is the median of the
  per-round differences of the quantile, the added latency; the ratios are of quantiles, so a ratio near 1× means
  the wait is small next to the API server's answer. p99 is a nearest-rank quantile of one round's writes (of %d
  updates the %s largest), and the four clients do not run at the same moment: load that changes on the shared
  box between them can move p99 by more than read-your-own-writes does; read the ranges.
`, writeObjects, writeNS, writeWarmup, res.writes.rate, c.writes.updates, ordinal(c.writes.updates-(int(0.99*float64(c.writes.updates)+0.5)-1)))
	}
	return sb.String()
}

// ordinal is n as 1st, 2nd, 3rd, 4th, ….
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
