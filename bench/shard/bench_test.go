package main

import (
	"encoding/xml"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLatencies: a write's queue time runs from its event to the first
// Reconcile that read it or a later write of its key; a write whose event
// nobody recorded counts from its send; a write never reconciled is
// infinite.
func TestLatencies(t *testing.T) {
	const ms = int64(time.Millisecond)
	writes := []sentWrite{
		{key: 1, sent: 100 * ms}, // seen at 102, reconciled at 110
		{key: 2, sent: 100 * ms}, // merged: seen at 103, reconciled at 150 with the next write
		{key: 2, sent: 120 * ms}, // seen at 121, reconciled at 150
		{key: 3, sent: 100 * ms}, // no event recorded, reconciled at 130
		{key: 4, sent: 100 * ms}, // seen, never reconciled
		{key: 5, sent: 100 * ms}, // seen just after the Reconcile began
	}
	events := []reconciled{
		{start: 102 * ms, key: 1, sent: 100 * ms},
		{start: 103 * ms, key: 2, sent: 100 * ms},
		{start: 121 * ms, key: 2, sent: 120 * ms},
		{start: 101 * ms, key: 4, sent: 100 * ms},
		{start: 105*ms + 3, key: 5, sent: 100 * ms},
	}
	recs := []reconciled{
		{start: 50 * ms, key: 1, sent: 40 * ms}, // an older write's Reconcile
		{start: 110 * ms, key: 1, sent: 100 * ms},
		{start: 150 * ms, key: 2, sent: 120 * ms},
		{start: 130 * ms, key: 3, sent: 100 * ms},
		{start: 105 * ms, key: 5, sent: 100 * ms},
	}
	queue, e2e, unseen := latencies(writes, recs, events)
	d := func(n int64) time.Duration { return time.Duration(n * ms) }
	wantQueue := []time.Duration{d(8), d(47), d(29), d(30), infinite, 0}
	wantE2E := []time.Duration{d(10), d(50), d(30), d(30), infinite, d(5)}
	for i := range writes {
		if queue[i] != wantQueue[i] || e2e[i] != wantE2E[i] {
			t.Errorf("write %d: queue %v, sent→start %v; want %v, %v", i, queue[i], e2e[i], wantQueue[i], wantE2E[i])
		}
	}
	if unseen != 1 {
		t.Errorf("unseen = %d, want 1 (key 3)", unseen)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 100}, {0.99, 198}, {1, 200}, {0, 1}} {
		if got := percentile(ds, c.q); got != c.want {
			t.Errorf("percentile(1..200, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
}

// TestSearchCapacity: against replicas that serve up to 437 writes/s, the
// bisection ends at the highest passing rate below it, a short driver
// marks the result, and a search whose every step passes tries the top.
func TestSearchCapacity(t *testing.T) {
	serve := func(limit, driverMax float64) func(float64) (step, error) {
		return func(rate float64) (step, error) {
			sent := min(rate, driverMax)
			met := sent <= limit
			return step{rate: rate, achieved: sent, pass: met && sent >= 0.95*rate, short: met && sent < 0.95*rate}, nil
		}
	}
	quiet := func(string, ...any) {}
	c := config{iters: 6}
	res, err := searchCapacity(c, 640, serve(437, math.Inf(1)), quiet)
	if err != nil {
		t.Fatal(err)
	}
	// 320 pass, 480 fail twice, 400 pass, 440 fail twice, 420 pass, 430 pass.
	if res.best.rate != 430 || res.limited || res.atTop || len(res.steps) != 8 {
		t.Errorf("best %v limited %v atTop %v after %d steps; want 430, false, false, 8", res.best.rate, res.limited, res.atTop, len(res.steps))
	}

	// One slow hold below capacity (load from outside) does not steer the
	// search down: the rate is held again.
	flaky, first := serve(437, math.Inf(1)), true
	res, err = searchCapacity(c, 640, func(rate float64) (step, error) {
		if first {
			first = false
			return step{rate: rate, achieved: rate}, nil
		}
		return flaky(rate)
	}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if res.best.rate != 430 || len(res.steps) != 9 || !res.steps[1].retry || !res.steps[1].pass {
		t.Errorf("a slow first hold: best %v after %d steps, second step %+v; want 430 after 9, the second a passing retry", res.best.rate, len(res.steps), res.steps[1])
	}

	res, err = searchCapacity(c, 640, serve(437, 300), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !res.limited || res.best.achieved > 300 {
		t.Errorf("driver limited to 300/s: limited %v, best %v", res.limited, res.best.achieved)
	}

	res, err = searchCapacity(config{iters: 2}, 100, serve(1000, math.Inf(1)), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !res.atTop || res.best.rate != 100 || len(res.steps) != 3 {
		t.Errorf("every rate passing: atTop %v, best %v after %d steps; want true, 100, 3", res.atTop, res.best.rate, len(res.steps))
	}

	boom := errors.New("boom")
	if _, err := searchCapacity(c, 640, func(float64) (step, error) { return step{}, boom }, quiet); !errors.Is(err, boom) {
		t.Errorf("err = %v, want the hold's", err)
	}
}

// TestParseFlags: -quick fills in what was not given, and bad values are
// errors that name the flag.
func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-n", "2000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.n != 2000 || c.hold != 6*time.Second || len(c.replicas) != 2 || c.singleton {
		t.Errorf("-quick -n 2000: n %d hold %v replicas %v unsharded %v", c.n, c.hold, c.replicas, c.singleton)
	}
	c, err = parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.n != 10000 || len(c.replicas) != 4 || !c.singleton || c.workers != 2 || c.cost != 20*time.Millisecond {
		t.Errorf("defaults: n %d replicas %v unsharded %v workers %d cost %v", c.n, c.replicas, c.singleton, c.workers, c.cost)
	}
	for _, args := range [][]string{
		{"-replicas", "2,1"},
		{"-replicas", "1,1"},
		{"-replicas", "0"},
		{"-n", "5"},
		{"-hold", "2s", "-warmup", "3s"},
		{"-lease-duration", "1500ms"},
		{"-renew-deadline", "5s"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q): no error", args)
		} else if !strings.Contains(err.Error(), "-") {
			t.Errorf("parseFlags(%q): %v names no flag", args, err)
		}
	}
}

// TestRecTail: records appended in pieces, a partial last line included,
// are parsed once each; since returns those from a time on.
func TestRecTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.rec")
	tail := &recTail{path: path}
	if h, ok := tail.hello(); ok {
		t.Fatalf("hello before the file exists: %v", h)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write("hello 1 m-abc 127.0.0.1:1\nready 5\nr 10 cm-00001 7\ne 11 cm-00002 ")
	if h, ok := tail.hello(); !ok || h[0] != "m-abc" || h[1] != "127.0.0.1:1" {
		t.Fatalf("hello = %v, %v", h, ok)
	}
	write("8\nr 20 cm-00002 8\nexit 30 -\n")
	recs, events, err := tail.since(11)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0] != (reconciled{start: 20, key: 2, sent: 8}) {
		t.Errorf("Reconciles since 11: %v", recs)
	}
	if len(events) != 1 || events[0] != (reconciled{start: 11, key: 2, sent: 8}) {
		t.Errorf("events since 11: %v", events)
	}
	if at, _ := tail.readyAt(); at != 5 {
		t.Errorf("readyAt = %d, want 5", at)
	}
	write("r x cm-00003 1\n")
	if _, _, err := tail.since(0); err == nil {
		t.Error("a malformed record: no error")
	}
}

// fakeResults are a singleton without sharding and four sharded stages
// whose figures are chosen so that N=2 meets both targets, N=3 misses
// capacity and N=4 misses heap for the sharder's replica.
func fakeResults() *results {
	const mb = 1 << 20
	idle := heapStats{HeapInuse: 4 * mb}
	h := func(mbs ...float64) []heapStats {
		var out []heapStats
		for _, m := range mbs {
			out = append(out, heapStats{HeapInuse: uint64(m * mb)})
		}
		return out
	}
	st := func(n int, rate float64, heaps []heapStats) stageResult {
		keys := make([]int, n)
		for i := range keys {
			keys[i] = 10000 / n
		}
		return stageResult{n: n, sharded: true, sharder: 0, keys: keys, heaps: heaps,
			cap:     capacity{best: step{rate: rate, achieved: rate, pass: true}, steps: []step{{rate: rate, achieved: rate, pass: true}}},
			scaleUp: &handover{from: n, to: n + 1, moved: 10000 / (n + 1), first: time.Second, last: 2 * time.Second}}
	}
	single := st(1, 100, h(23)) // share 20 over its idle 3 MiB: the baseline
	single.sharded, single.sharder, single.scaleUp = false, -1, nil
	return &results{
		idleSharded:   idle,
		idleUnsharded: heapStats{HeapInuse: 3 * mb},
		unsharded:     &single,
		stages: []stageResult{
			st(1, 95, h(28)),       // 0.95; share 24: 1.2
			st(2, 190, h(14, 13)),  // 0.95; shares 10 and 9: 0.5, 0.45 ≤ 0.6
			st(3, 200, h(11, 10)),  // 0.67
			st(4, 400, h(12, 8.5)), // 1.0; sharder share 8 = 0.4 > 0.3, other 4.5 = 0.225
		},
	}
}

// TestReport: the table's ratios and verdicts follow the figures, against
// the singleton without sharding.
func TestReport(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := report(c, fakeResults())
	rows := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		for _, n := range []string{"1, no sharding", "1", "2", "3", "4"} {
			if strings.HasPrefix(line, "| "+n+" | ") && !strings.Contains(line, "MiB") && rows[n] == "" && strings.Count(line, "|") == 12 {
				rows[n] = line
			}
		}
	}
	for n, want := range map[string][]string{
		"1, no sharding": {"| 1.00 | – |", "| 20.0 · – | 1.00 · – |"},
		"1":              {"| 0.95 | – |", "| 24.0 · – | 1.20 · – |"},
		"2":              {"| 0.95 | yes |", "| 0.50 · 0.45 |", "| yes · yes |"},
		"3":              {"| 0.67 | **no** |"},
		"4":              {"| 1.00 | yes |", "| 0.40 · 0.23 |", "| **no** · yes |"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[n], w) {
				t.Errorf("row N=%s = %q; want it to contain %q", n, rows[n], w)
			}
		}
	}
	for _, w := range []string{
		"- N=3, capacity: 0.67 of N × the singleton's",
		"- N=4, the sharder's replica: 0.40 against 0.33",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("the misses do not say %q", w)
		}
	}
	if strings.Contains(out, "- N=2,") {
		t.Error("the misses name N=2, which met both targets")
	}
	if !strings.Contains(out, "2,304 → 7,289 objects") {
		t.Error("the report does not cite the thesis's scaling")
	}
}

// TestChart: the chart is well-formed XML with the measured points.
func TestChart(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	svg := chart(c, fakeResults())
	d := xml.NewDecoder(strings.NewReader(svg))
	circles := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
			circles++
		}
	}
	// 4 capacity points, 4 sharder heap points, 3 others', 3 thesis
	// points, and 4 legend markers.
	if circles != 18 {
		t.Errorf("%d circles, want 18", circles)
	}
}

// TestReportAfterTheSearch: the heap after the capacity search is judged
// against the singleton's after its own search, with each replica's in use
// ÷ live; stages without that measurement are left out.
func TestReportAfterTheSearch(t *testing.T) {
	c, res := laterFixture(t)
	res.unsharded.churned = []heapStats{hc(23, 21)}           // share 20, live 19
	res.stages[3].churned = []heapStats{hc(9.6, 8), hc(9, 8)} // shares 5.6 (0.28) and 5 (0.25), live 5 and 5
	out := report(c, res)
	for _, w := range []string{
		"### Heap after the capacity search",
		"| 1, no sharding | 0.2 | 23.0 | 1.00 | 1.30 | – | 1.05 |",
		"| 4 | 0.8 | 9.6ˢ, 9.0 | 0.28 · 0.25 | 0.33 | yes · yes | 1.12 · 1.00 |",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("the report does not contain %q", w)
		}
	}
	section := out[strings.Index(out, "### Heap after the capacity search"):]
	section = section[:strings.Index(section, "### Heap per replica")]
	if strings.Contains(section, "| 2 |") {
		t.Error("the section has a row for N=2, which was not measured after its search")
	}
}

// TestReportAtEqualTurnover: the heap after every key was written
// -turnover times is judged against the singleton's after as many writes,
// and the singleton's growth since its start is computed from its own
// figures.
func TestReportAtEqualTurnover(t *testing.T) {
	c, res := laterFixture(t)
	res.unsharded.heaps = []heapStats{hc(23, 21)} // share 20, live 19
	res.unsharded.churned = []heapStats{hc(24, 21)}
	res.unsharded.turned, res.unsharded.written = []heapStats{hc(28, 21.95)}, 6 // share 25 (+25%), live 19.95 (+5%)
	res.stages[3].churned = []heapStats{hc(9.6, 8), hc(9, 8)}
	res.stages[3].turned, res.stages[3].written = []heapStats{hc(11.5, 8), hc(10, 8)}, 6.2 // shares 7.5 (0.30), 6 (0.24)
	out := report(c, res)
	i := strings.Index(out, "### Heap in service: every key written 6 times")
	if i < 0 {
		t.Fatalf("no section on the heap at equal turnover in:\n%s", out)
	}
	section := out[i:]
	section = section[:strings.Index(section, "### Heap per replica")]
	for _, w := range []string{
		"grew from its start (keys listed) to then by +25% in use and +5% live",
		"divide by the singleton's sharded type after as many writes, 25.0 MiB",
		"| 1, no sharding | 6.0 | 28.0 | 1.00 | 1.30 | – | 1.25 |",
		"| 4 | 6.2 | 11.5ˢ, 10.0 | 0.30 · 0.24 | 0.33 | yes · yes | 1.50 · 1.20 |",
	} {
		if !strings.Contains(section, w) {
			t.Errorf("the section does not contain %q:\n%s", w, section)
		}
	}
	if strings.Contains(section, "| 2 |") {
		t.Error("the section has a row for N=2, which was not measured")
	}
}

// hc is a heap of inUse MiB in use and alloc MiB live.
func hc(inUse, alloc float64) heapStats {
	const mb = 1 << 20
	return heapStats{HeapInuse: uint64(inUse * mb), HeapAlloc: uint64(alloc * mb)}
}

// laterFixture is the default config and fakeResults with idle heaps of
// 4 MiB in use, 3 live (sharded) and 3, 2 (not).
func laterFixture(t *testing.T) (config, *results) {
	t.Helper()
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	res := fakeResults()
	res.idleSharded, res.idleUnsharded = hc(4, 3), hc(3, 2)
	return c, res
}
