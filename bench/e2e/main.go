// Command e2e runs the same controller on ctrlkit and on controller-runtime
// against one envtest control plane and compares them end to end: cold
// start (cache sync and first reconcile of every object) at several sizes,
// the latency from a write to the Reconcile that sees it under an
// open-loop writer, a restart storm (updates arriving while the initial
// backlog drains), heap per cached object for ConfigMaps and ~4 KB Pods
// with each framework's defaults and best memory option, and CPU per
// reconcile; cold start, CPU and heap over a custom resource (Site, a
// Website-like CRD); and the latency of one write through ctrlkit's client, with
// read-your-own-writes on and off, controller-runtime's and client-go's,
// quiet and under load. See bench/e2e/README.md.
//
// Both frameworks run in this one process, one after the other, A/B
// alternating over the rounds; each run builds its own manager, runs and
// stops it. The objects are created once and reused by every run; the
// sizes after the first are created after the first size's rounds.
//
// Usage (make bench-e2e sets KUBEBUILDER_ASSETS):
//
//	go run ./bench/e2e [-n 10000,50000] [-rounds 5] [-rounds-large 3] [-rates 100,200,400] [-churn 10s] [-pods 5000]
//		[-storm-costs 1ms,10ms] [-writes 500] [-write-creates 100] [-write-conc 1,8]
//		[-crd-n 10000] [-only cold,churn,storm,writes,pods,crd,large] [-out bench/results]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(1)
	}
}

type config struct {
	sizes       []int // ConfigMap counts, ascending; the first gets every measurement, the others cold start and heap
	rounds      int   // A/B rounds at the first size and for Pods
	roundsLarge int   // A/B rounds at the other sizes
	rates       []int
	churn       time.Duration
	pods        int // Pods for the heap comparison; 0 skips it
	crdN        int // Sites for the crd section; 0 (the flag's default) means sizes[0]
	storm       stormConfig
	writes      writeConfig
	only        map[string]bool // the sections to run (-only); every one by default
	out         string
}

// The sections -only selects.
const (
	secCold   = "cold"   // cold start, heap slope and best memory option at the first size
	secChurn  = "churn"  // churn latency and CPU at every rate (on a full manager, whose cold start it also reports)
	secStorm  = "storm"  // the restart storm, once per Reconcile cost
	secWrites = "writes" // the latency of one write, per client, quiet and loaded
	secPods   = "pods"   // Pod heap
	secCRD    = "crd"    // cold start, CPU and heap over a custom resource (Site), with the targets
	secLarge  = "large"  // cold start and heap at the sizes after the first
)

var allSections = []string{secCold, secChurn, secStorm, secWrites, secPods, secCRD, secLarge}

// runs reports whether section sec is selected.
func (c config) runs(sec string) bool { return c.only[sec] }

// partial reports whether -only left some sections out.
func (c config) partial() bool { return len(c.only) < len(allSections) }

// parseOnly parses -only: "all", or section names, comma-separated.
func parseOnly(s string) (map[string]bool, error) {
	only := make(map[string]bool)
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "all":
			for _, sec := range allSections {
				only[sec] = true
			}
		case slices.Contains(allSections, f):
			only[f] = true
		default:
			return nil, fmt.Errorf("-only %q: want all, or some of %s, comma-separated", s, strings.Join(allSections, ","))
		}
	}
	return only, nil
}

// parseDurations parses a comma-separated list of non-negative durations.
func parseDurations(flagName, s string) ([]time.Duration, error) {
	var out []time.Duration
	for f := range strings.SplitSeq(s, ",") {
		v, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s %q: want non-negative durations, comma-separated", flagName, s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s %q: want positive integers, comma-separated", flagName, s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFlags() (config, error) {
	c := config{}
	defN := "10000,50000"
	if s := os.Getenv("BENCH_N"); s != "" {
		defN = s
	}
	sizes := flag.String("n", defN, "ConfigMap counts, ascending and comma-separated (also BENCH_N); the first gets churn, storm and memory, the others cold start and heap")
	rates := flag.String("rates", "100,200,400", "churn write rates in writes/s, comma-separated")
	flag.IntVar(&c.rounds, "rounds", 5, "A/B rounds at the first size and for Pods")
	flag.IntVar(&c.roundsLarge, "rounds-large", 3, "A/B rounds at the other sizes")
	flag.DurationVar(&c.churn, "churn", 10*time.Second, "how long each churn rate runs")
	flag.IntVar(&c.pods, "pods", 5000, "Pods (~4 KB each) for the heap comparison; 0 skips it")
	flag.IntVar(&c.crdN, "crd-n", 0, "crd section: Site custom resources to create and cache; 0 means the first -n size")
	flag.IntVar(&c.storm.updates, "storm-updates", 200, "updates during the restart storm, at least: more when the expected drain outlasts them at -storm-rate")
	flag.IntVar(&c.storm.rate, "storm-rate", 50, "updates per second during the restart storm")
	costs := flag.String("storm-costs", "1ms,10ms", "simulated cost of each Reconcile during the restart storm, comma-separated: one storm case per cost")
	flag.IntVar(&c.writes.updates, "writes", 500, "writes section: updates per client, case and round")
	flag.IntVar(&c.writes.creates, "write-creates", 100, "writes section: creates, each followed by its delete, per client, case and round; 0 for updates only")
	conc := flag.String("write-conc", "1,8", fmt.Sprintf("writes section: concurrent writers, comma-separated, at most %d: one case per value, quiet and loaded", writeObjects))
	only := flag.String("only", "all", "sections to run, comma-separated: all, or some of "+strings.Join(allSections, ","))
	flag.StringVar(&c.out, "out", "bench/results", "directory for latest.md, latency.svg (churn) and storm.svg (storm)")
	flag.Parse()
	var err error
	if c.sizes, err = parseInts("-n", *sizes); err != nil {
		return c, err
	}
	if c.rates, err = parseInts("-rates", *rates); err != nil {
		return c, err
	}
	if c.storm.costs, err = parseDurations("-storm-costs", *costs); err != nil {
		return c, err
	}
	if c.only, err = parseOnly(*only); err != nil {
		return c, err
	}
	if c.writes.conc, err = parseInts("-write-conc", *conc); err != nil {
		return c, err
	}
	if !slices.IsSorted(c.sizes) || c.sizes[0] < 2*namespaces || c.sizes[len(c.sizes)-1] > 99999 {
		return c, errors.New("-n: sizes must be ascending, from 20 to 99999")
	}
	if c.crdN == 0 {
		c.crdN = c.sizes[0]
	}
	if c.crdN < 2*namespaces || c.crdN > 99999 {
		return c, errors.New("-crd-n: from 20 to 99999")
	}
	if c.rounds < 1 || c.roundsLarge < 1 || c.churn <= 0 || c.pods < 0 || c.pods > 99999 || c.storm.updates < 1 || c.storm.rate < 1 {
		return c, errors.New("-rounds and -rounds-large must be at least 1, -churn positive, -pods from 0 to 99999, -storm-updates and -storm-rate positive")
	}
	if c.writes.updates < 1 || c.writes.creates < 0 || slices.Max(c.writes.conc) > writeObjects {
		return c, fmt.Errorf("-writes must be positive, -write-creates at least 0, -write-conc at most %d", writeObjects)
	}
	return c, nil
}

// results is everything measured, per framework name and round.
type results struct {
	main     map[string][]roundResult
	large    []map[string][]coldResult // one per size after the first
	pods     map[string][]podRound
	podSize  podSize
	crd      map[string][]crdRound
	siteSize podSize       // of the first Site, with its status
	writes   *writeResults // nil unless the writes section ran
	seeded   []seeded
	lines    []string // the per-round lines printed during the run
	missing  []string // phases that failed, for the notes
}

func (r *results) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	r.lines = append(r.lines, line)
	fmt.Println(line)
}

// order is the frameworks in round's order: A/B, then B/A.
func order(round int) []framework {
	if round%2 == 1 {
		return []framework{frameworks[1], frameworks[0]}
	}
	return []framework{frameworks[0], frameworks[1]}
}

func run() error {
	c, err := parseFlags()
	if err != nil {
		return err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: run `make bench-e2e`, which builds kube-apiserver and etcd into bin/k8s")
	}
	// controller-runtime complains on stderr when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	began := time.Now()

	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-e2e: stopping envtest:", err)
		}
	}()
	admin, err := kubernetes.NewForConfig(unlimited(cfg))
	if err != nil {
		return err
	}
	ctx := context.Background()
	res := &results{main: make(map[string][]roundResult), pods: make(map[string][]podRound), crd: make(map[string][]crdRound)}

	if c.partial() {
		var secs []string
		for _, sec := range allSections {
			if c.runs(sec) {
				secs = append(secs, sec)
			}
		}
		res.logf("sections: %s (-only)", strings.Join(secs, ","))
	}
	if err := seedNamespaces(ctx, admin); err != nil {
		return err
	}
	n := c.sizes[0]
	mainPhase := c.runs(secCold) || c.runs(secChurn) || c.runs(secStorm)
	if mainPhase || c.runs(secWrites) || c.runs(secLarge) {
		s, err := seedConfigMaps(ctx, admin, 0, n, n/2)
		if err != nil {
			return err
		}
		res.seeded = append(res.seeded, s)
		res.logf("%v", s)
	}

	// Main phase: everything at the first size.
	w := &writer{client: admin, objects: n}
	for round := range c.rounds {
		if !mainPhase {
			break
		}
		var baselines []float64
		if c.runs(secChurn) {
			baselines = make([]float64, len(c.rates))
			for i, rate := range c.rates {
				baselines[i] = writerCPU(ctx, w, rate, c.churn)
			}
			res.logf("round %d writer alone: CPU s %v at %v writes/s", round+1, fmtFloats(baselines), c.rates)
		}
		for _, fw := range order(round) {
			r, err := mainRound(ctx, cfg, fw, c, w, baselines)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, fw.name, err)
			}
			res.main[fw.name] = append(res.main[fw.name], r)
			res.logf("%s", mainLine(c, round, fw, n, r))
		}
	}

	// Writes: the latency of one write, per client, over the first size.
	if c.runs(secWrites) {
		if err := writesPhase(ctx, cfg, admin, c, w, res); err != nil {
			res.missing = append(res.missing, fmt.Sprintf("writes: %v", err))
			fmt.Fprintln(os.Stderr, "bench-e2e: writes phase:", err)
		}
	}

	// Pods: heap only.
	if c.pods > 0 && c.runs(secPods) {
		if err := podPhase(ctx, cfg, admin, c, res); err != nil {
			res.missing = append(res.missing, fmt.Sprintf("Pod heap: %v", err))
			fmt.Fprintln(os.Stderr, "bench-e2e: Pod phase:", err)
		}
	}

	// The custom resource: cold start, CPU and heap.
	if c.runs(secCRD) {
		if err := crdPhase(ctx, cfg, c, res); err != nil {
			res.missing = append(res.missing, fmt.Sprintf("custom resource: %v", err))
			fmt.Fprintln(os.Stderr, "bench-e2e: crd phase:", err)
		}
	}

	// Larger sizes: cold start and heap.
	for k, size := range c.sizes[1:] {
		if !c.runs(secLarge) {
			break
		}
		if err := largePhase(ctx, cfg, admin, c, k, size, res); err != nil {
			res.missing = append(res.missing, fmt.Sprintf("%d ConfigMaps: %v", size, err))
			fmt.Fprintf(os.Stderr, "bench-e2e: %d ConfigMaps: %v\n", size, err)
			break
		}
	}

	took := time.Since(began)
	res.logf("whole run (envtest start to last measurement): %.1f min", took.Minutes())
	table := report(c, res, took)
	fmt.Println()
	fmt.Print(table)
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	files := map[string]string{"latest.md": table}
	if c.runs(secChurn) {
		files["latency.svg"] = churnSVG(c, res)
	}
	if c.runs(secStorm) {
		files["storm.svg"] = stormSVG(c, res)
	}
	var names []string
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(c.out, name), []byte(content), 0o644); err != nil {
			return err
		}
		names = append(names, name)
	}
	slices.Sort(names)
	fmt.Printf("\nwrote %s in %s\n", strings.Join(names, ", "), c.out)
	if len(res.missing) > 0 {
		return fmt.Errorf("some phases failed (see the notes in latest.md): %s", strings.Join(res.missing, "; "))
	}
	return nil
}

// podPhase creates c.pods Pods and measures every framework's heap over
// them.
func podPhase(ctx context.Context, cfg *rest.Config, admin kubernetes.Interface, c config, res *results) error {
	s, size, err := seedPods(ctx, admin, c.pods)
	if err != nil {
		return err
	}
	res.seeded = append(res.seeded, s)
	res.podSize = size
	res.logf("%v; one Pod is %d B as JSON, %d B without managedFields", s, size.full, size.stripped)
	for round := range c.rounds {
		for _, fw := range order(round) {
			r, err := podsRound(ctx, cfg, fw, c.pods)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, fw.name, err)
			}
			res.pods[fw.name] = append(res.pods[fw.name], r)
			line := fmt.Sprintf("round %d %-18s Pods: heap/object slope %.0f B", round+1, fw.name, r.heap.slope(c.pods))
			if fw.lean != "" {
				line += fmt.Sprintf(", lean %.0f B", r.lean.slope(c.pods))
			}
			res.logf("%s", line)
		}
	}
	return nil
}

// largePhase creates ConfigMaps up to size (the k-th size after the first)
// and measures every framework's cold start over them.
func largePhase(ctx context.Context, cfg *rest.Config, admin kubernetes.Interface, c config, k, size int, res *results) error {
	s, err := seedConfigMaps(ctx, admin, c.sizes[k], size, c.sizes[0]/2)
	if err != nil {
		return err
	}
	res.seeded = append(res.seeded, s)
	res.logf("%v", s)
	m := make(map[string][]coldResult)
	res.large = append(res.large, m)
	for round := range c.roundsLarge {
		for _, fw := range order(round) {
			r, err := coldOnly(ctx, cfg, fw, setup{kind: configMaps}, size, objPrefix)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, fw.name, err)
			}
			m[fw.name] = append(m[fw.name], r)
			res.logf("round %d %-18s N=%d sync %.3fs  all reconciled %.3fs  cpu/1k objects %.3fs  heap/object %.0f B", round+1, fw.name, size,
				r.sync.Seconds(), r.all.Seconds(), r.cpuPer1k, r.heap/float64(size))
		}
	}
	return nil
}

// mainLine is the per-round line of a main-phase result: what ran of it.
func mainLine(c config, round int, fw framework, n int, r roundResult) string {
	line := fmt.Sprintf("round %d %-18s N=%d", round+1, fw.name, n)
	if r.hasCold {
		line += fmt.Sprintf(" sync %.3fs  all reconciled %.3fs  cpu/1k objects %.3fs  heap/object %.0f B",
			r.cold.sync.Seconds(), r.cold.all.Seconds(), r.cold.cpuPer1k, r.cold.heap/float64(n))
	}
	if c.runs(secCold) {
		line += fmt.Sprintf(" (slope %.0f B", r.cmHeap.slope(n))
		if fw.lean != "" {
			line += fmt.Sprintf(", lean %.0f B", r.cmLean.slope(n))
		}
		line += ")"
	}
	for _, ch := range r.churn {
		line += fmt.Sprintf("\n    churn %d/s p50 %.2fms p99 %.2fms p99.9 %.2fms (from sent %.2f/%.2f/%.2f) missed %d cpu/1k %.3fs", ch.rate,
			ms(ch.p(0.50)), ms(ch.p(0.99)), ms(ch.p(0.999)), ms(ch.pSent(0.50)), ms(ch.pSent(0.99)), ms(ch.pSent(0.999)), ch.missed, ch.cpuPer1000)
	}
	for i, st := range r.storms {
		line += fmt.Sprintf("\n    storm %v: synced %.3fs drained %.3fs; all %d updates over %.1fs p50 %.1fms p99 %.1fms max %.1fms missed %d; "+
			"%d during backlog p50 %.1fms p99 %.1fms max %.1fms",
			c.storm.costs[i], st.sync.Seconds(), st.drain.Seconds(), st.sent, st.span.Seconds(), ms(st.all.p(0.5)), ms(st.all.p(0.99)), ms(st.all.max()), st.all.missed,
			st.nDuring, ms(st.during.p(0.5)), ms(st.during.p(0.99)), ms(st.during.max()))
		if st.nLate > 0 {
			line += fmt.Sprintf(", %d of them past the %v bound p99 %.1fms max %.1fms", st.nLate, starvationBound, ms(st.late.p(0.99)), ms(st.late.max()))
		}
		line += fmt.Sprintf("; %d over %v", st.slow, slowAfter)
	}
	return line
}

func fmtFloats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return "[" + strings.Join(s, " ") + "]"
}
