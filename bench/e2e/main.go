// Command e2e runs the same controller on ctrlkit and on controller-runtime
// against one envtest control plane and compares them end to end: cold
// start (cache sync and first reconcile of every object), the latency from
// a write to the Reconcile that sees it under an open-loop writer, heap per
// cached object and CPU per reconcile. See bench/e2e/README.md.
//
// Both frameworks run in this one process, one after the other, A/B
// alternating over the rounds; each run builds its own manager, runs and
// stops it. The objects are created once and reused by every run.
//
// Usage (make bench-e2e sets KUBEBUILDER_ASSETS):
//
//	go run ./bench/e2e [-n 2000] [-rounds 3] [-rates 100,200] [-churn 5s] [-out bench/results]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
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
	objects int
	rounds  int
	rates   []int
	churn   time.Duration
	out     string
}

func parseFlags() (config, error) {
	c := config{}
	defN := 2000
	if s := os.Getenv("BENCH_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return c, fmt.Errorf("BENCH_N=%q: want an integer", s)
		}
		defN = n
	}
	rates := flag.String("rates", "100,200", "churn write rates in writes/s, comma-separated")
	flag.IntVar(&c.objects, "n", defN, "ConfigMaps in the cluster (also BENCH_N)")
	flag.IntVar(&c.rounds, "rounds", 5, "A/B rounds")
	flag.DurationVar(&c.churn, "churn", 5*time.Second, "how long each churn rate runs")
	flag.StringVar(&c.out, "out", "bench/results", "directory for latest.md and latency.svg")
	flag.Parse()
	for f := range strings.SplitSeq(*rates, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r <= 0 {
			return c, fmt.Errorf("-rates %q: want positive integers", *rates)
		}
		c.rates = append(c.rates, r)
	}
	if c.objects < namespaces || c.rounds < 1 || c.churn <= 0 {
		return c, errors.New("-n must be at least 10, -rounds at least 1, -churn positive")
	}
	return c, nil
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

	t := time.Now()
	if err := seed(ctx, admin, c.objects); err != nil {
		return err
	}
	fmt.Printf("created %d ConfigMaps in %d namespaces in %.1fs\n", c.objects, namespaces, time.Since(t).Seconds())

	w := &writer{client: admin, objects: c.objects}
	results := make(map[string][]runResult)
	var rounds []string
	for round := range c.rounds {
		order := []framework{frameworks[0], frameworks[1]}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		baselines := make([]float64, len(c.rates))
		for i, rate := range c.rates {
			baselines[i] = writerCPU(ctx, w, rate, c.churn)
		}
		rounds = append(rounds, fmt.Sprintf("round %d writer alone: CPU s %v at %v writes/s", round+1, fmtFloats(baselines), c.rates))
		fmt.Println(rounds[len(rounds)-1])
		for _, fw := range order {
			res, err := runOnce(ctx, cfg, fw, c, w, baselines)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, fw.name, err)
			}
			line := fmt.Sprintf("round %d %-18s sync %.3fs  all reconciled %.3fs  cpu/1k objects %.3fs  heap/object %.0f B (slope %.0f B)", round+1, fw.name,
				res.sync.Seconds(), res.all.Seconds(), res.coldCPU, res.heapPerObject, res.heapSlope)
			for _, ch := range res.churn {
				line += fmt.Sprintf("  %d/s p50 %.2fms p99 %.2fms (from sent %.2f/%.2f) missed %d cpu/1k %.3fs", ch.rate,
					ms(ch.p(0.50)), ms(ch.p(0.99)), ms(ch.pSent(0.50)), ms(ch.pSent(0.99)), ch.missed, ch.cpuPer1000)
			}
			rounds = append(rounds, line)
			fmt.Println(line)
			results[fw.name] = append(results[fw.name], res)
		}
	}

	table := report(c, results, rounds)
	fmt.Println()
	fmt.Print(table)
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.out, "latest.md"), []byte(table), 0o644); err != nil {
		return err
	}
	svg := latencySVG(c, results)
	if err := os.WriteFile(filepath.Join(c.out, "latency.svg"), []byte(svg), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s and %s\n", filepath.Join(c.out, "latest.md"), filepath.Join(c.out, "latency.svg"))
	return nil
}

func fmtFloats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return "[" + strings.Join(s, " ") + "]"
}
