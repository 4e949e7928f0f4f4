package main

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
)

// metric is one row of the table: how to read it from a run.
type metric struct {
	name    string
	format  string
	value   func(runResult) float64
	noRatio bool // signed or count values, whose ratio means nothing
}

func metrics(c config) []metric {
	rows := []metric{
		{"cold start: cache synced (s)", "%.3f", func(r runResult) float64 { return r.sync.Seconds() }, false},
		{"cold start: every object reconciled once (s)", "%.3f", func(r runResult) float64 { return r.all.Seconds() }, false},
		{"cold start: process CPU s per 1,000 objects (list, cache, reconcile)", "%.3f", func(r runResult) float64 { return r.coldCPU }, false},
		{"heap per cached object, slope N/2 → N (B)", "%.0f", func(r runResult) float64 { return r.heapSlope }, false},
		{"heap per cached object, incl. fixed overhead, at N (B)", "%.0f", func(r runResult) float64 { return r.heapPerObject }, false},
	}
	for i, rate := range c.rates {
		rows = append(rows,
			metric{fmt.Sprintf("churn %d/s: write → Reconcile p50 (ms)", rate), "%.2f", func(r runResult) float64 { return ms(r.churn[i].p(0.50)) }, true},
			metric{fmt.Sprintf("churn %d/s: write → Reconcile p99 (ms)", rate), "%.2f", func(r runResult) float64 { return ms(r.churn[i].p(0.99)) }, false},
			metric{fmt.Sprintf("churn %d/s: write sent → Reconcile p50 (ms)", rate), "%.2f", func(r runResult) float64 { return ms(r.churn[i].pSent(0.50)) }, false},
			metric{fmt.Sprintf("churn %d/s: write sent → Reconcile p99 (ms)", rate), "%.2f", func(r runResult) float64 { return ms(r.churn[i].pSent(0.99)) }, false},
			metric{fmt.Sprintf("churn %d/s: writes not seen within %v", rate, settleAfter), "%.0f", func(r runResult) float64 { return float64(r.churn[i].missed) }, true},
			metric{fmt.Sprintf("churn %d/s: process CPU s per 1,000 reconciles", rate), "%.3f", func(r runResult) float64 { return r.churn[i].cpuPer1000 }, false},
		)
	}
	return rows
}

// spread formats the median of xs and, with more than one, its range.
func spread(format string, xs []float64) string {
	s := fmt.Sprintf(format, median(xs))
	if len(xs) > 1 {
		s += fmt.Sprintf(" ("+format+"–"+format+")", slices.Min(xs), slices.Max(xs))
	}
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report renders the markdown table: medians over rounds, and the median
// of the per-round ratios ctrlkit ÷ controller-runtime.
// rounds are the per-round lines printed during the run.
func report(c config, results map[string][]runResult, rounds []string) string {
	a, b := results[frameworks[0].name], results[frameworks[1].name]
	var sb strings.Builder
	fmt.Fprintf(&sb, "# ctrlkit vs controller-runtime, end to end\n\n")
	fmt.Fprintf(&sb, "%s, %s/%s, %d CPUs; envtest kube-apiserver and etcd from bin/k8s. "+
		"%d ConfigMaps in %d namespaces, %d workers each, client QPS unlimited, %d A/B rounds (alternating order), "+
		"churn %v per rate (open loop). Values are medians over rounds, with (min–max); the ratio is the median of the per-round ratios.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		c.objects, namespaces, workers, c.rounds, c.churn)
	fmt.Fprintf(&sb, "| metric | %s | %s | %s ÷ %s |\n|---|--:|--:|--:|\n", frameworks[0].name, frameworks[1].name, frameworks[0].name, frameworks[1].name)
	for _, m := range metrics(c) {
		var va, vb, ratio []float64
		for i := range min(len(a), len(b)) {
			x, y := m.value(a[i]), m.value(b[i])
			va, vb = append(va, x), append(vb, y)
			if !m.noRatio && x > 0 && y > 0 {
				ratio = append(ratio, x/y)
			}
		}
		rs := "–"
		if len(ratio) > 0 {
			rs = fmt.Sprintf("%.2f×", median(ratio))
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", m.name, spread(m.format, va), spread(m.format, vb), rs)
	}
	sb.WriteString(`
Notes:
- Latency is from the churn write's HTTP response to the start of the first Reconcile that read that write's
  sequence annotation from the cache; it can be negative when the watch event arrives before the response.
  "Write sent" rows measure from the moment the request was sent instead: always positive, and they include the
  API server's write path (the same for both). latency.svg plots these. Every write goes to a different object.
- Heap is HeapInuse after runtime.GC() with the manager running and every object reconciled, minus HeapInuse
  before the manager was built. The slope row compares a run whose cache holds N/2 objects (label selector) with
  one that holds N; the other row divides by N and so includes each framework's fixed overhead. Each framework
  runs with its defaults: ctrlkit strips managedFields, controller-runtime keeps them.
- CPU is getrusage(RUSAGE_SELF): the whole process, comparable only because both frameworks run in it one after
  the other; the API server and etcd are other processes and are not counted. Cold start: from building the
  manager to every object reconciled once, nothing else running. Churn: over the phase, minus the CPU of the same
  writer at the same rate with no manager running (measured once per round), per Reconcile in the phase; the
  writer costs more than the controller, so this row is noisy (it can even come out negative) and only large
  differences in it mean anything.
- Cold start times run from the call that builds the manager (discovery included) to the informer's HasSynced
  (polled every 1ms) and to the Reconcile that completes the set of objects seen once. controller-runtime's
  controller starts its workers after client-go's WaitForCacheSync, which polls every 100ms; that granularity
  is likely most of its extra time to the first reconciles (not isolated here).
- Ratios are left out (–) for the signed latencies and counts, and where a value is zero or negative.

Per round:

`)
	sb.WriteString("```\n" + strings.Join(rounds, "\n") + "\n```\n")
	return sb.String()
}

// latencySVG draws the CDF of the churn latencies, pooled over rounds, one
// line per framework and rate, on a log time axis.
func latencySVG(c config, results map[string][]runResult) string {
	const (
		width, height          = 760, 440
		left, right, top, bot  = 70, 200, 40, 60
		plotW, plotH           = width - left - right, height - top - bot
		minMs                  = 0.1
		colorA, colorB, legend = "#1f77b4", "#ff7f0e", 18
	)
	type line struct {
		label, color, dash string
		ms                 []float64
	}
	var lines []line
	maxMs := 1.0
	for fi, fw := range frameworks {
		color := colorA
		if fi == 1 {
			color = colorB
		}
		for ri, rate := range c.rates {
			var all []float64
			for _, r := range results[fw.name] {
				for _, d := range r.churn[ri].fromSent {
					all = append(all, max(ms(d), minMs))
				}
			}
			slices.Sort(all)
			if len(all) > 0 {
				maxMs = max(maxMs, all[len(all)-1])
			}
			dash := ""
			if ri > 0 {
				dash = fmt.Sprintf(` stroke-dasharray="%d,4"`, 8-2*min(ri, 3))
			}
			lines = append(lines, line{fmt.Sprintf("%s %d/s", fw.name, rate), color, dash, all})
		}
	}
	decades := math.Ceil(math.Log10(maxMs / minMs))
	x := func(v float64) float64 { return left + plotW*math.Log10(v/minMs)/decades }
	y := func(f float64) float64 { return top + plotH*(1-f) }

	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&sb, `<text x="%d" y="22" font-size="14">Churn: write sent → Reconcile start, CDF (%d objects, %d rounds pooled)</text>`+"\n", left, c.objects, c.rounds)
	for d := 0.0; d <= decades; d++ {
		v := minMs * math.Pow(10, d)
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(v), top, x(v), top+plotH)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(v), top+plotH+16, v)
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 0.9, 0.99, 1} {
		fmt.Fprintf(&sb, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(f), left+plotW, y(f))
		fmt.Fprintf(&sb, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", left-6, y(f)+4, f)
	}
	fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="middle">latency (ms, log scale; ≤ %g shown at %g)</text>`+"\n", left+plotW/2, height-18, minMs, minMs)
	fmt.Fprintf(&sb, `<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">fraction of writes</text>`+"\n", top+plotH/2, top+plotH/2)
	for i, l := range lines {
		if len(l.ms) > 0 {
			var pts strings.Builder
			n := float64(len(l.ms))
			fmt.Fprintf(&pts, "%.1f,%.1f", x(l.ms[0]), y(0))
			for j, v := range l.ms {
				fmt.Fprintf(&pts, " %.1f,%.1f %.1f,%.1f", x(v), y(float64(j)/n), x(v), y(float64(j+1)/n))
			}
			fmt.Fprintf(&sb, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`+"\n", l.color, l.dash, pts.String())
		}
		ly := top + 10 + i*legend
		fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", left+plotW+12, ly, left+plotW+40, ly, l.color, l.dash)
		fmt.Fprintf(&sb, `<text x="%d" y="%d">%s (n=%d)</text>`+"\n", left+plotW+46, ly+4, l.label, len(l.ms))
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}
