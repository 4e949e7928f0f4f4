package main

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
)

// row is one row of the table: per-round values of both frameworks,
// paired by round.
type row struct {
	name    string
	format  string
	a, b    []float64 // frameworks[0], frameworks[1]
	noRatio bool      // signed or count values, whose ratio means nothing
	aNote   string    // appended to the first framework's cell
	text    []string  // when set, the three cells as they are (a target row), instead of a, b and their ratio
}

// section is a titled group of rows.
type section struct {
	title string
	rows  []row
}

// each maps xs through f.
func each[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// pair builds a row from the per-round results of both frameworks.
func pair[T any](m map[string][]T, name, format string, noRatio bool, f func(T) float64) row {
	return row{name: name, format: format, noRatio: noRatio,
		a: each(m[frameworks[0].name], f), b: each(m[frameworks[1].name], f)}
}

func coldRows(m map[string][]coldResult, n int) []row {
	return []row{
		pair(m, "cache synced (s)", "%.3f", false, func(r coldResult) float64 { return r.sync.Seconds() }),
		pair(m, "every object reconciled once (s)", "%.3f", false, func(r coldResult) float64 { return r.all.Seconds() }),
		pair(m, "process CPU s per 1,000 objects (list, cache, reconcile)", "%.3f", false, func(r coldResult) float64 { return r.cpuPer1k }),
		pair(m, "heap per object at N, incl. fixed overhead (B)", "%.0f", false, func(r coldResult) float64 { return r.heap / float64(n) }),
	}
}

func sections(c config, res *results) []section {
	n := c.sizes[0]
	var secs []section
	cold := make(map[string][]coldResult)
	for name, rs := range res.main {
		for _, r := range rs {
			if r.hasCold {
				cold[name] = append(cold[name], r.cold)
			}
		}
	}
	if len(cold[frameworks[0].name]) > 0 {
		secs = append(secs, section{fmt.Sprintf("Cold start, %d ConfigMaps (%d rounds)", n, len(cold[frameworks[0].name])), coldRows(cold, n)})
	}
	for k, m := range res.large {
		size := c.sizes[k+1]
		secs = append(secs, section{fmt.Sprintf("Cold start, %d ConfigMaps (%d rounds)", size, len(m[frameworks[0].name])), coldRows(m, size)})
	}

	mem := section{title: "Memory: heap per cached object, slope between two cache sizes (B)"}
	if c.runs(secCold) && len(res.main[frameworks[0].name]) > 0 {
		mem.rows = append(mem.rows,
			pair(res.main, fmt.Sprintf("ConfigMap, %d → %d, defaults", n/2, n), "%.0f", false, func(r roundResult) float64 { return r.cmHeap.slope(n) }),
			leanRow(res.main, fmt.Sprintf("ConfigMap, %d → %d, best memory option", n/2, n),
				func(r roundResult) float64 { return r.cmHeap.slope(n) }, func(r roundResult) float64 { return r.cmLean.slope(n) }))
	}
	for k, m := range res.large {
		if len(cold[frameworks[0].name]) == 0 {
			break // no cold start at the first size to take the slope from
		}
		size := c.sizes[k+1]
		r := row{name: fmt.Sprintf("ConfigMap, %d → %d, defaults", n, size), format: "%.0f"}
		for fi, fw := range frameworks {
			var vs []float64
			for i, big := range m[fw.name] {
				if i < len(cold[fw.name]) {
					vs = append(vs, (big.heap-cold[fw.name][i].heap)/float64(size-n))
				}
			}
			if fi == 0 {
				r.a = vs
			} else {
				r.b = vs
			}
		}
		mem.rows = append(mem.rows, r)
	}
	if len(res.pods[frameworks[0].name]) > 0 {
		p := c.pods
		mem.rows = append(mem.rows,
			pair(res.pods, fmt.Sprintf("Pod (%.1f KB as JSON), %d → %d, defaults", float64(res.podSize.stripped)/1000, p/2, p), "%.0f", false,
				func(r podRound) float64 { return r.heap.slope(p) }),
			leanRow(res.pods, fmt.Sprintf("Pod, %d → %d, best memory option", p/2, p),
				func(r podRound) float64 { return r.heap.slope(p) }, func(r podRound) float64 { return r.lean.slope(p) }))
	}
	if len(mem.rows) > 0 {
		secs = append(secs, mem)
	}

	for i, rate := range c.rates {
		if !c.runs(secChurn) || len(res.main[frameworks[0].name]) == 0 {
			break
		}
		f := func(get func(churnResult) float64) func(roundResult) float64 {
			return func(r roundResult) float64 { return get(r.churn[i]) }
		}
		secs = append(secs, section{fmt.Sprintf("Churn %d writes/s for %v, %d ConfigMaps", rate, c.churn, n), []row{
			pair(res.main, "write response → Reconcile p50 (ms)", "%.2f", true, f(func(ch churnResult) float64 { return ms(ch.p(0.50)) })),
			pair(res.main, "write response → Reconcile p99 (ms)", "%.2f", false, f(func(ch churnResult) float64 { return ms(ch.p(0.99)) })),
			pair(res.main, "write response → Reconcile p99.9 (ms)", "%.2f", false, f(func(ch churnResult) float64 { return ms(ch.p(0.999)) })),
			pair(res.main, "write sent → Reconcile p50 (ms)", "%.2f", false, f(func(ch churnResult) float64 { return ms(ch.pSent(0.50)) })),
			pair(res.main, "write sent → Reconcile p99 (ms)", "%.2f", false, f(func(ch churnResult) float64 { return ms(ch.pSent(0.99)) })),
			pair(res.main, "write sent → Reconcile p99.9 (ms)", "%.2f", false, f(func(ch churnResult) float64 { return ms(ch.pSent(0.999)) })),
			pair(res.main, fmt.Sprintf("writes not seen within %v", settleAfter), "%.0f", true, f(func(ch churnResult) float64 { return float64(ch.missed) })),
			pair(res.main, "process CPU s per 1,000 reconciles", "%.3f", false, f(func(ch churnResult) float64 { return ch.cpuPer1000 })),
		}})
	}

	if c.runs(secStorm) && len(res.main[frameworks[0].name]) > 0 {
		secs = append(secs, stormSections(c, res)...)
	}
	return append(secs, crdSections(c, res)...)
}

// stormSections is one section per storm cost, and the targets.
func stormSections(c config, res *results) []section {
	n := c.sizes[0]
	var secs []section
	targets := section{title: fmt.Sprintf("Targets: restart storm, p99 update → Reconcile ≤ %v (updates acknowledged while the backlog drained; median over rounds)", targetP99)}
	for i, cost := range c.storm.costs {
		s := func(get func(stormResult) float64) func(roundResult) float64 {
			return func(r roundResult) float64 { return get(r.storms[i]) }
		}
		span := c.storm.span(n, cost)
		rows := []row{
			pair(res.main, "cache synced (s)", "%.3f", false, s(func(st stormResult) float64 { return st.sync.Seconds() })),
			pair(res.main, "backlog drained: every object reconciled once (s)", "%.3f", false, s(func(st stormResult) float64 { return st.drain.Seconds() })),
			pair(res.main, "every update: response → Reconcile p50 (ms)", "%.1f", false, s(func(st stormResult) float64 { return ms(st.all.p(0.50)) })),
			pair(res.main, "every update: response → Reconcile p99 (ms)", "%.1f", false, s(func(st stormResult) float64 { return ms(st.all.p(0.99)) })),
			pair(res.main, "every update: response → Reconcile max (ms)", "%.1f", false, s(func(st stormResult) float64 { return ms(st.all.max()) })),
			pair(res.main, "updates acknowledged before the backlog drained", "%.0f", true, s(func(st stormResult) float64 { return float64(st.nDuring) })),
			pair(res.main, "those: response → Reconcile p50 (ms)", "%.1f", false, s(func(st stormResult) float64 { return ms(st.during.p(0.50)) })),
			pair(res.main, "those: response → Reconcile p99 (ms)", "%.1f", false, s(func(st stormResult) float64 { return ms(st.during.p(0.99)) })),
			pair(res.main, "those: response → Reconcile max (ms)", "%.1f", false, s(func(st stormResult) float64 { return ms(st.during.max()) })),
		}
		if expectedDrain(n, cost) > starvationBound {
			rows = append(rows,
				pair(res.main, fmt.Sprintf("of those, acknowledged > %v after the cache sync (past the bound)", starvationBound), "%.0f", true,
					s(func(st stormResult) float64 { return float64(st.nLate) })),
				pair(res.main, "those past the bound: response → Reconcile p99 (ms)", "%.1f", false, s(func(st stormResult) float64 { return ms(st.late.p(0.99)) })),
				pair(res.main, "those past the bound: response → Reconcile max (ms)", "%.1f", false, s(func(st stormResult) float64 { return ms(st.late.max()) })))
		}
		rows = append(rows,
			pair(res.main, fmt.Sprintf("updates whose Reconcile started > %v after the response", slowAfter), "%.0f", true, s(func(st stormResult) float64 { return float64(st.slow) })),
			pair(res.main, fmt.Sprintf("updates not seen within %v of the drain", settleAfter), "%.0f", true, s(func(st stormResult) float64 { return float64(st.all.missed) })))
		secs = append(secs, section{fmt.Sprintf("Restart storm: fresh manager over %d ConfigMaps, %v per Reconcile (expected drain %.1fs), "+
			"%d updates at %d/s over %.1fs from cache sync", n, cost, expectedDrain(n, cost).Seconds(), c.storm.count(span), c.storm.rate, span.Seconds()), rows})
		targets.rows = append(targets.rows, targetRow(fmt.Sprintf("restart storm, %v Reconcile: p99 ≤ %v", cost, targetP99),
			each(res.main[frameworks[0].name], func(r roundResult) float64 { return ms(r.storms[i].during.p(0.99)) }),
			each(res.main[frameworks[1].name], func(r roundResult) float64 { return ms(r.storms[i].during.p(0.99)) })))
	}
	return append(secs, targets)
}

// targetRow says, per framework, whether the median over rounds of its
// per-round p99s (a and b, in ms) meets targetP99, and in how many rounds.
func targetRow(name string, a, b []float64) row {
	cell := func(xs []float64) string {
		if len(xs) == 0 {
			return "–"
		}
		ok := 0
		for _, x := range xs {
			if x <= ms(targetP99) {
				ok++
			}
		}
		verdict := "not met"
		if median(xs) <= ms(targetP99) {
			verdict = "met"
		}
		return fmt.Sprintf("%s: %s ms; %d of %d rounds", verdict, spread("%.1f", xs), ok, len(xs))
	}
	return row{name: name, text: []string{cell(a), cell(b), "–"}}
}

// leanRow is the best-memory-option row: a framework whose defaults are
// its best (frameworks[i].lean == "") shows its defaults, marked so.
func leanRow[T any](m map[string][]T, name string, defaults, lean func(T) float64) row {
	r := row{name: name, format: "%.0f"}
	pick := func(fw framework) []float64 {
		if fw.lean == "" {
			return each(m[fw.name], defaults)
		}
		return each(m[fw.name], lean)
	}
	r.a, r.b = pick(frameworks[0]), pick(frameworks[1])
	if frameworks[0].lean == "" {
		r.aNote = " = defaults"
	}
	return r
}

// spread formats the median of xs and, with more than one, its range.
func spread(format string, xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
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
// of the per-round ratios frameworks[0] ÷ frameworks[1], then the notes and
// the per-round lines.
func report(c config, res *results, took time.Duration) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# ctrlkit vs controller-runtime, end to end\n\n")
	fmt.Fprintf(&sb, "%s, %s/%s, %d CPUs; envtest kube-apiserver and etcd from bin/k8s on the same machine. "+
		"ConfigMaps (256-byte value) in %d namespaces, %d workers each, client QPS unlimited, A/B rounds in alternating order, "+
		"churn open loop. Values are medians over rounds, with (min–max); the ratio is the median of the per-round ratios. "+
		"Whole run: %.1f min.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		namespaces, workers, took.Minutes())
	secs := sections(c, res)
	if len(secs) > 0 {
		fmt.Fprintf(&sb, "| metric | %s | %s | %s ÷ %s |\n|---|--:|--:|--:|\n", frameworks[0].name, frameworks[1].name, frameworks[0].name, frameworks[1].name)
	}
	for _, sec := range secs {
		fmt.Fprintf(&sb, "| **%s** | | | |\n", sec.title)
		for _, m := range sec.rows {
			if m.text != nil {
				fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", m.name, m.text[0], m.text[1], m.text[2])
				continue
			}
			var ratio []float64
			for i := range min(len(m.a), len(m.b)) {
				if x, y := m.a[i], m.b[i]; !m.noRatio && x > 0 && y > 0 {
					ratio = append(ratio, x/y)
				}
			}
			rs := "–"
			if r := median(ratio); len(ratio) > 0 && r < 0.1 {
				rs = fmt.Sprintf("%.4f×", r)
			} else if len(ratio) > 0 {
				rs = fmt.Sprintf("%.2f×", r)
			}
			fmt.Fprintf(&sb, "| %s | %s%s | %s | %s |\n", m.name, spread(m.format, m.a), m.aNote, spread(m.format, m.b), rs)
		}
	}
	if wt := writesTable(c, res); wt != "" {
		if len(secs) > 0 {
			sb.WriteString("\n")
		}
		sb.WriteString(wt)
	}
	sb.WriteString(notes(c, res))
	sb.WriteString("\nPer round:\n\n```\n" + strings.Join(res.lines, "\n") + "\n```\n")
	return sb.String()
}

// writesTable is the writes section's table: one column per client, then
// the ratios (medians of the per-round ratios) and the added latency of
// read-your-own-writes (median of the per-round differences); empty when
// the section did not run.
func writesTable(c config, res *results) string {
	wr := res.writes
	if wr == nil || len(wr.runs) == 0 || len(wr.runs[0][modeOn]) == 0 {
		return ""
	}
	var sb strings.Builder
	on, off, cr, cg := writeModes[modeOn].name, writeModes[modeOff].name, writeModes[modeCR].name, writeModes[modeCG].name
	fmt.Fprintf(&sb, "Writes: the latency of one write as the operator sees it, from the call to its return, with each client's "+
		"manager caching every ConfigMap (%d of the benchmark's and %d written here); RYOW is ctrlkit's read-your-own-writes. "+
		"Values are medians over rounds of each round's quantile, with (min–max); ratios and differences are medians of the per-round ones.\n\n",
		c.sizes[0], writeObjects)
	fmt.Fprintf(&sb, "| metric | %s | %s | %s | %s | on ÷ off | on − off (ms) | off ÷ %s | on ÷ %s |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
		on, off, cr, cg, cr, cg)
	ratio := func(a, b []float64) string {
		var rs []float64
		for i := range min(len(a), len(b)) {
			if a[i] > 0 && b[i] > 0 {
				rs = append(rs, a[i]/b[i])
			}
		}
		if len(rs) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", median(rs))
	}
	diff := func(a, b []float64) string {
		var ds []float64
		for i := range min(len(a), len(b)) {
			ds = append(ds, a[i]-b[i])
		}
		if len(ds) == 0 {
			return "–"
		}
		return fmt.Sprintf("%+.2f", median(ds))
	}
	for k, wc := range wr.cases {
		runs := wr.runs[k]
		rounds := len(runs[modeOn])
		writers := "1 writer"
		if wc.conc > 1 {
			writers = fmt.Sprintf("%d concurrent writers", wc.conc)
		}
		title := "Writes, quiet (no other writer), " + writers
		if wc.loaded {
			title = fmt.Sprintf("Writes, loaded (background writer updating the other ConfigMaps at %d/s), %s", wr.rate, writers)
		}
		fmt.Fprintf(&sb, "| **%s: %d updates, %d creates and deletes per client and round (%d rounds)** | | | | | | | | |\n",
			title, c.writes.updates, c.writes.creates, rounds)
		for op := range numOps {
			if op != opUpdate && c.writes.creates == 0 {
				continue
			}
			for _, q := range []struct {
				name string
				q    float64
			}{{"p50", 0.50}, {"p99", 0.99}} {
				vals := make([][]float64, len(writeModes))
				for m := range writeModes {
					vals[m] = each(runs[m], func(r modeRun) float64 { return ms(r.ops[op].p(q.q)) })
				}
				fmt.Fprintf(&sb, "| %s %s (ms) | %s | %s | %s | %s | %s | %s | %s | %s |\n", opNames[op], q.name,
					spread("%.2f", vals[modeOn]), spread("%.2f", vals[modeOff]), spread("%.2f", vals[modeCR]), spread("%.2f", vals[modeCG]),
					ratio(vals[modeOn], vals[modeOff]), diff(vals[modeOn], vals[modeOff]), ratio(vals[modeOff], vals[modeCR]), ratio(vals[modeOn], vals[modeCG]))
			}
			cells := make([]string, len(writeModes))
			var failed int
			for m := range writeModes {
				var sum opResult
				for _, r := range runs[m] {
					sum.add(r.ops[op])
				}
				cells[m] = fmt.Sprintf("%d of %d", sum.stale, sum.n)
				failed += sum.failed
			}
			fmt.Fprintf(&sb, "| %s: cache stale when the call returned (all rounds) | %s | – | – | – | – |\n", opNames[op], strings.Join(cells, " | "))
			if failed > 0 {
				for m := range writeModes {
					var sum opResult
					for _, r := range runs[m] {
						sum.add(r.ops[op])
					}
					cells[m] = fmt.Sprintf("%d (cache lag %d)", sum.failed, sum.lag)
				}
				fmt.Fprintf(&sb, "| %s: errors (all rounds) | %s | – | – | – | – |\n", opNames[op], strings.Join(cells, " | "))
			}
		}
	}
	return sb.String()
}
