// Command benchtable reads `go test -bench` output of the bench package on
// stdin and prints markdown tables: throughput per scenario with each
// queue's ns/op as a ratio to client-go's, latency percentiles behind a
// short backlog and over a long drain, and the targets of the side-by-side
// comparison.
//
// Benchmark names are Benchmark<Func>[/<scenario>...]/<queue>/metrics=<on|off>.
// A benchmark that appears more than once (several runs of the binary, or
// -count) is reported by its median, with the spread: the largest
// deviation from the median. Ratios are the median of per-run ratios when
// every benchmark ran equally often, so run the whole set several times
// rather than use -count: then each run's ratios compare queues measured
// under the same load.
//
//	go test -run '^$' -bench . -benchmem ./bench/ | go run ./bench/cmd/benchtable
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The queue every ratio is taken against, and the one the targets are about.
const (
	baseline = "client-go"
	subject  = "ctrlkit"
	rival    = "controller-runtime"
)

// The units that mark a result as a latency benchmark, and one of the long
// drain (BenchmarkLatencyLong) in particular.
const (
	latencyUnit = "p99-ms"
	longUnit    = "worst5s-p99-ms"
)

// latencyTarget is the most a change may wait at p99, in milliseconds.
const latencyTarget = 10

func main() {
	r, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	if len(r.order) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark results on stdin")
		os.Exit(1)
	}
	render(os.Stdout, r)
}

// key names one benchmark result.
type key struct{ scenario, queue, metrics string }

// results are the parsed benchmarks in the order they first appeared.
type results struct {
	cpu    string
	order  []key
	values map[key]map[string][]float64 // unit → one value per run
}

// get returns the median of k's values in unit, and whether there is one.
func (r *results) get(k key, unit string) (float64, bool) {
	v := r.values[k][unit]
	if len(v) == 0 {
		return 0, false
	}
	return median(v), true
}

// spread returns how far k's values in unit stray from their median, as a
// fraction of it: the largest deviation.
func (r *results) spread(k key, unit string) (float64, bool) {
	v := r.values[k][unit]
	med, ok := r.get(k, unit)
	if !ok || med == 0 {
		return 0, false
	}
	var dev float64
	for _, x := range v {
		dev = max(dev, abs(x-med))
	}
	return dev / med, true
}

// ratio returns a's ns/op divided by b's. When both ran equally often, it
// is the median of the ratios within each run of the benchmark binary, so
// that load which changes between runs (a shared machine) cancels out;
// otherwise it is the ratio of the medians.
func (r *results) ratio(a, b key) (float64, bool) {
	x, y := r.values[a]["ns/op"], r.values[b]["ns/op"]
	if len(x) == 0 || len(y) == 0 {
		return 0, false
	}
	if len(x) != len(y) {
		my := median(y)
		return median(x) / my, my > 0
	}
	q := make([]float64, len(x))
	for i := range x {
		if y[i] == 0 {
			return 0, false
		}
		q[i] = x[i] / y[i]
	}
	return median(q), true
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// parse reads benchmark lines, ignoring everything else.
func parse(in io.Reader) (*results, error) {
	r := &results{values: make(map[key]map[string][]float64)}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if cpu, ok := strings.CutPrefix(line, "cpu: "); ok {
			r.cpu = strings.TrimSpace(cpu)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line (a log line starting with a name)
		}
		k, ok := parseName(f[0])
		if !ok {
			continue
		}
		if r.values[k] == nil {
			r.values[k] = make(map[string][]float64)
			r.order = append(r.order, k)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %q: %w", f[0], f[i], err)
			}
			r.values[k][f[i+1]] = append(r.values[k][f[i+1]], v)
		}
	}
	return r, sc.Err()
}

// parseName splits "BenchmarkQueue/serial/ctrlkit/metrics=off-2" into
// scenario "serial", queue "ctrlkit", metrics "off"; a function with no
// scenario level ("BenchmarkLatency/ctrlkit/metrics=on") is its own
// scenario, named by its words in lower case joined by hyphens ("latency",
// "latency-long").
func parseName(name string) (key, bool) {
	name = strings.TrimPrefix(name, "Benchmark")
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i] // the GOMAXPROCS suffix
		}
	}
	parts := strings.Split(name, "/")
	n := len(parts)
	if n < 3 {
		return key{}, false
	}
	metrics, ok := strings.CutPrefix(parts[n-1], "metrics=")
	if !ok {
		return key{}, false
	}
	scenario := strings.Join(parts[1:n-2], "/")
	if scenario == "" {
		scenario = words(parts[0])
	}
	return key{scenario: scenario, queue: parts[n-2], metrics: metrics}, true
}

// words turns "LatencyLong" into "latency-long".
func words(camel string) string {
	var b strings.Builder
	for i, c := range camel {
		if 'A' <= c && c <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	return b.String()
}

// render prints the throughput, latency and target tables.
func render(w io.Writer, r *results) {
	if r.cpu != "" {
		fmt.Fprintf(w, "cpu: %s\n\n", r.cpu)
	}
	// Rows of one scenario and metrics setting next to each other, in the
	// order the benchmarks ran.
	order := slices.Clone(r.order)
	rank := func(get func(key) string) func(key) int {
		var seen []string
		for _, k := range r.order {
			if !slices.Contains(seen, get(k)) {
				seen = append(seen, get(k))
			}
		}
		return func(k key) int { return slices.Index(seen, get(k)) }
	}
	scenarioRank := rank(func(k key) string { return k.scenario })
	metricsRank := rank(func(k key) string { return k.metrics })
	slices.SortStableFunc(order, func(a, b key) int {
		if d := scenarioRank(a) - scenarioRank(b); d != 0 {
			return d
		}
		return metricsRank(a) - metricsRank(b)
	})
	var lat, long []key
	fmt.Fprintln(w, "### Throughput (one op = one key through Add, Get, Done; median of runs; ratio = ns/op ÷ client-go's in the same run, lower is better)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | metrics | queue | ns/op | spread | ÷ client-go | items/s | B/op | allocs/op |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|--:|")
	for _, k := range order {
		if _, ok := r.get(k, longUnit); ok {
			long = append(long, k)
			continue
		}
		if _, ok := r.get(k, latencyUnit); ok {
			lat = append(lat, k)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", k.scenario, k.metrics, k.queue,
			num(r, k, "ns/op", 0), spread(r, k), ratio(r, k, key{k.scenario, baseline, k.metrics}),
			num(r, k, "items/s", 0), num(r, k, "B/op", 0), num(r, k, "allocs/op", 0))
	}
	if len(lat) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "### Latency of a changed key behind a 10,000-key backlog (1 ms per key, a drain of about 3 s; Add to Get; lower is better)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| queue | metrics | p50 ms | p99 ms | max ms | drain s |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|")
		for _, k := range lat {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", k.queue, k.metrics,
				num(r, k, "p50-ms", 2), num(r, k, "p99-ms", 2), num(r, k, "max-ms", 2), num(r, k, "drain-s", 2))
		}
	}
	if len(long) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "### Latency of a changed key over a long drain (10,000-key backlog, 10 ms per key, 4 workers: 25 s or more, metrics on; Add to Get; lower is better)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "\"after 5 s\": changes added once the oldest backlog key had waited the 5 s starvation bound; \"worst 5 s p99\": the highest p99 of the changes added in any 5 s window of the drain; \"key ms\": what one key really took a worker, the longest a change can wait for a free worker whatever the queue.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| queue | metrics | p50 ms | p99 ms | max ms | p99 after 5 s ms | max after 5 s ms | worst 5 s p99 ms | changes | key ms | drain s |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, k := range long {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", k.queue, k.metrics,
				num(r, k, "p50-ms", 2), num(r, k, "p99-ms", 2), num(r, k, "max-ms", 2),
				num(r, k, "bound-p99-ms", 2), num(r, k, "bound-max-ms", 2), num(r, k, longUnit, 2),
				num(r, k, "changes", 0), num(r, k, "key-ms", 2), num(r, k, "drain-s", 2))
		}
	}
	fmt.Fprintln(w)
	targets(w, r, lat, long)
}

// targets prints the targets with what was measured.
func targets(w io.Writer, r *results, lat, long []key) {
	fmt.Fprintln(w, "### Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | scenario | measured | met |")
	fmt.Fprintln(w, "|---|---|--:|---|")
	var scenarios []string
	for _, k := range r.order {
		if !slices.Contains(lat, k) && !slices.Contains(long, k) && !slices.Contains(scenarios, k.scenario) {
			scenarios = append(scenarios, k.scenario)
		}
	}
	row := func(target, scenario string, v float64, ok bool, prec int, unit string, met func(float64) bool) {
		if !ok {
			fmt.Fprintf(w, "| %s | %s | n/a | n/a |\n", target, scenario)
			return
		}
		fmt.Fprintf(w, "| %s | %s | %s%s | %s |\n", target, scenario, strconv.FormatFloat(v, 'f', prec, 64), unit, yesNo(met(v)))
	}
	for _, s := range scenarios {
		v, ok := r.ratio(key{s, subject, "off"}, key{s, baseline, "off"})
		row("ctrlkit off ≤ 1.0× client-go off", s, v, ok, 2, "×", func(v float64) bool { return v <= 1.0 })
	}
	for _, s := range scenarios {
		v, ok := r.ratio(key{s, subject, "on"}, key{s, baseline, "on"})
		row("ctrlkit on ≤ 0.8× client-go on", s, v, ok, 2, "×", func(v float64) bool { return v <= 0.8 })
	}
	for _, s := range scenarios {
		v, ok := r.ratio(key{s, rival, "on"}, key{s, subject, "on"})
		row("ctrlkit on ≥ 5× faster than controller-runtime on", s, v, ok, 2, "×", func(v float64) bool { return v >= 5 })
	}
	for _, m := range []string{"off", "on"} {
		v, ok := r.get(key{"serial", subject, m}, "allocs/op")
		row("0 allocs/op in steady Add+Get+Done (metrics "+m+")", "serial", v, ok, 0, "", func(v float64) bool { return v == 0 })
	}
	for _, k := range lat {
		if k.queue != subject {
			continue
		}
		v, ok := r.get(k, latencyUnit)
		row("latency p99 ≤ 10 ms (metrics "+k.metrics+")", k.scenario, v, ok, 2, " ms", func(v float64) bool { return v <= latencyTarget })
	}
	// "At every point of the drain" is the worst of the p99s taken over
	// each 5 s window of it. BenchmarkLatencyLong runs with metrics on
	// only, so there is one row.
	for _, k := range long {
		if k.queue != subject {
			continue
		}
		v, ok := r.get(k, longUnit)
		row("latency p99 ≤ 10 ms at every point of the drain (long backlog)", k.scenario, v, ok, 2, " ms", func(v float64) bool { return v <= latencyTarget })
	}
}

// num formats k's median in unit, or "n/a".
func num(r *results, k key, unit string, prec int) string {
	v, ok := r.get(k, unit)
	if !ok {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// ratio formats k's ns/op divided by base's, or "n/a".
func ratio(r *results, k, base key) string {
	v, ok := r.ratio(k, base)
	if !ok {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "×"
}

// spread formats the spread of k's ns/op as ±percent, or "n/a".
func spread(r *results, k key) string {
	v, ok := r.spread(k, "ns/op")
	if !ok {
		return "n/a"
	}
	return "±" + strconv.FormatFloat(100*v, 'f', 0, 64) + "%"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}
