// Command shard measures ctrlkit's sharding (manager.Options.Sharding,
// docs/sharding.md) with replicas as separate OS processes against one
// envtest control plane: 1, 2, 3 and 4 sharded replicas over the same
// ConfigMaps, each with a fixed number of workers and a Reconcile that
// waits a fixed time (I/O-bound, so the machine's cores are not the
// limit). It reports, per number of replicas N:
//
//   - capacity: the highest update rate of a driver in this process whose
//     writes keep p99 queue time (write sent → start of the Reconcile that
//     read it) within 1 s, found by bisection over held rates;
//   - heap per replica: HeapInuse after GC with the keys synced, in total
//     and less the heap of an idle replica (the sharded type's share);
//   - handover time for a scale-up N → N+1 (from the new member's Lease to
//     its Reconciles of the moved keys) and for a kill -9 (from the kill
//     to the new owners' Reconciles of the dead replica's keys);
//
// against the targets of issue 15: capacity ≥ 0.8 × N × the singleton's,
// and heap per replica ≤ 1.3/N × the singleton's for the sharded type. It
// writes bench/results/shard.md and shard.svg. See bench/shard/README.md.
//
// Processes: this program is both the bench and the replica; it runs a
// replica instead of the bench when CTRLKIT_BENCH_SHARD_REPLICA names one
// (replica.go). Replicas die with the bench (PR_SET_PDEATHSIG); Linux only.
//
// Usage (make bench-shard sets KUBEBUILDER_ASSETS):
//
//	go run ./bench/shard [-n 10000] [-replicas 1,2,3,4] [-workers 2] [-cost 20ms] [-hold 20s] [-iters 5] [-quick] [-out bench/results]
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
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ctrlkit/ctrlkit/bench/internal/machine"
)

func main() {
	if name := os.Getenv(replicaEnv); name != "" {
		os.Exit(replicaMain(name, os.Getenv(configEnv)))
	}
	if err := run(); errors.Is(err, flag.ErrHelp) {
		return // the flag package printed the usage
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "bench-shard:", err)
		os.Exit(1)
	}
}

// config is the bench's flags.
type config struct {
	n             int   // ConfigMaps
	dataBytes     int   // of data per ConfigMap
	replicas      []int // the N to measure, ascending
	singleton     bool  // also measure one replica without sharding
	workers       int
	cost          time.Duration // each Reconcile's wait
	hold, warmup  time.Duration // per rate; the warm-up's writes are not judged
	drain         time.Duration // the longest wait for a step's writes to be reconciled
	iters         int           // bisection steps per N
	turnover      float64       // writes per key before the heap is measured in service (turnover); 0: not measured
	slo           time.Duration // p99 queue time
	lease         [3]time.Duration
	qps           float64 // the replicas' client QPS; negative: unlimited
	settleTimeout time.Duration
	namespace     string
	ring          string
	out           string
	keep          bool   // keep the replicas' records and logs
	heapProfiles  string // a directory for each replica's heap profile, taken with its heap; "" for none
	profileRate   int    // the replicas' runtime.MemProfileRate; 0 for the runtime's default
	quick         bool
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

func parseFlags(args []string) (config, error) {
	c := config{namespace: "bench-shard", ring: "bench-shard", slo: time.Second}
	fs := flag.NewFlagSet("bench-shard", flag.ContinueOnError)
	fs.IntVar(&c.n, "n", 10000, "ConfigMaps to shard")
	fs.IntVar(&c.dataBytes, "data", 1024, "bytes of data per ConfigMap")
	reps := fs.String("replicas", "1,2,3,4", "numbers of sharded replicas to measure, ascending and comma-separated; the first is the singleton the ratios divide by")
	fs.BoolVar(&c.singleton, "unsharded", true, "also measure one replica without sharding (reported beside the sharded singleton)")
	fs.IntVar(&c.workers, "workers", 2, "workers per replica (issue 15 suggests 5; this 2-core machine cannot drive 4 × 5 × 50 writes/s)")
	fs.DurationVar(&c.cost, "cost", 20*time.Millisecond, "what each Reconcile waits")
	fs.DurationVar(&c.hold, "hold", 20*time.Second, "how long each rate is held")
	fs.DurationVar(&c.warmup, "warmup", 4*time.Second, "the start of each hold whose writes are not judged")
	fs.DurationVar(&c.drain, "drain", 60*time.Second, "the longest wait, after a hold, for its writes to be reconciled")
	fs.IntVar(&c.iters, "iters", 5, "bisection steps per number of replicas")
	fs.Float64Var(&c.turnover, "turnover", 6, "after the capacity search, write every key until it was written this many times in the stage, then measure the heap again; 0 skips it")
	fs.DurationVar(&c.lease[0], "lease-duration", 4*time.Second, "member Lease duration (whole seconds)")
	fs.DurationVar(&c.lease[1], "renew-deadline", 3*time.Second, "member Lease renew deadline")
	fs.DurationVar(&c.lease[2], "retry-period", 500*time.Millisecond, "member Lease retry period, and the sharder's liveness interval")
	fs.Float64Var(&c.qps, "qps", -1, "the replicas' client QPS (burst twice that); negative for no client-side limit")
	fs.DurationVar(&c.settleTimeout, "settle-timeout", 10*time.Minute, "the longest wait for the keys to reach their members after a start, scale-up or kill")
	fs.StringVar(&c.out, "out", "bench/results", "directory for shard.md and shard.svg")
	fs.BoolVar(&c.keep, "keep", false, "keep the replicas' records and logs (their directory is printed)")
	fs.StringVar(&c.heapProfiles, "heapprofile", "", "a directory to write each replica's heap profile (<replica>.pb.gz, go tool pprof) into when its heap is measured: <replica>-churned.pb.gz after the capacity search, <replica>-turned.pb.gz in service")
	fs.IntVar(&c.profileRate, "memprofilerate", 0, "the replicas' runtime.MemProfileRate, for finer -heapprofile profiles (e.g. 4096); 0 keeps the runtime's default (512 KiB)")
	fs.BoolVar(&c.quick, "quick", false, "a quick look, a minute or two: -n 1000 -replicas 1,2 -hold 6s -warmup 2s -iters 3 -turnover 2 -unsharded=false, unless set")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.quick {
		set := make(map[string]bool)
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quick := map[string]string{"n": "1000", "replicas": "1,2", "hold": "6s", "warmup": "2s", "iters": "3", "unsharded": "false", "turnover": "2"}
		for name, v := range quick {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return c, err
				}
			}
		}
	}
	var err error
	if c.replicas, err = parseInts("-replicas", *reps); err != nil {
		return c, err
	}
	switch {
	case !slices.IsSorted(c.replicas) || len(slices.Compact(slices.Clone(c.replicas))) != len(c.replicas):
		return c, fmt.Errorf("-replicas %q: want distinct numbers, ascending", *reps)
	case c.n < 10 || c.n > 99999:
		return c, fmt.Errorf("-n %d: want 10 to 99999", c.n)
	case c.dataBytes < 0 || c.workers < 1 || c.cost <= 0:
		return c, errors.New("-data must be at least 0, -workers at least 1, -cost positive")
	case c.hold <= c.warmup || c.warmup < 0 || c.iters < 1 || c.drain <= 0:
		return c, errors.New("-hold must exceed -warmup (at least 0), -iters be at least 1, -drain positive")
	case c.lease[0]%time.Second != 0 || c.lease[0] <= c.lease[1] || c.lease[1] <= c.lease[2] || c.lease[2] <= 0:
		return c, errors.New("-lease-duration (whole seconds) > -renew-deadline > -retry-period > 0")
	}
	return c, nil
}

// bench is one run.
type bench struct {
	c     config
	kube  kubernetes.Interface
	md    metadata.Interface
	drv   *driver
	lines []string
}

func (b *bench) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	b.lines = append(b.lines, line)
	fmt.Println(line)
}

// results is everything measured.
type results struct {
	idleSharded, idleUnsharded heapStats
	seeded                     time.Duration
	unsharded                  *stageResult
	stages                     []stageResult
	loadBefore, loadAfter      string
	took                       time.Duration
}

func run() error {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: run `make bench-shard`, which builds kube-apiserver and etcd into bin/k8s")
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime's logger
	res := &results{loadBefore: machine.LoadAverage()}
	began := time.Now()

	dir, err := os.MkdirTemp("", "bench-shard-")
	if err != nil {
		return err
	}
	if c.keep {
		fmt.Println("replica records and logs:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-shard: stopping envtest:", err)
		}
	}()
	user, err := env.AddUser(envtest.User{Name: "bench-shard", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("provisioning the replicas' user: %w", err)
	}
	kcfg, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kcfg, 0o600); err != nil {
		return err
	}
	admin := rest.CopyConfig(cfg)
	admin.QPS, admin.Burst = -1, 0
	b := &bench{c: c}
	if b.kube, err = kubernetes.NewForConfig(admin); err != nil {
		return err
	}
	if b.md, err = metadata.NewForConfig(admin); err != nil {
		return err
	}
	b.drv = &driver{cms: b.kube.CoreV1().ConfigMaps(c.namespace), n: c.n}
	ctx := context.Background()

	rc := replicaConfig{Kubeconfig: kubeconfig, Namespace: c.namespace, Ring: c.ring, Workers: c.workers, Cost: c.cost,
		LeaseDuration: c.lease[0], RenewDeadline: c.lease[1], RetryPeriod: c.lease[2], QPS: float32(c.qps), MemProfileRate: c.profileRate}
	shardedFleet, err := b.newFleet(rc, dir, true)
	if err != nil {
		return err
	}
	defer shardedFleet.close()
	unshardedFleet, err := b.newFleet(rc, dir, false)
	if err != nil {
		return err
	}
	defer unshardedFleet.close()

	// Idle replicas, in the namespace before its ConfigMaps exist: what a
	// replica holds without the sharded type's objects (the sharder's
	// replica included, whose metadata informer is then empty too).
	if _, err := seed(ctx, b.kube, c.namespace, 0, 0); err != nil {
		return err
	}
	if res.idleUnsharded, err = b.idle(ctx, unshardedFleet, "idle-single"); err != nil {
		return err
	}
	if res.idleSharded, err = b.idle(ctx, shardedFleet, "idle"); err != nil {
		return err
	}
	b.logf("idle replica, no ConfigMaps: heap in use %.1f MiB sharded, %.1f MiB without sharding", mib(res.idleSharded.HeapInuse), mib(res.idleUnsharded.HeapInuse))

	if res.seeded, err = seed(ctx, b.kube, c.namespace, c.n, c.dataBytes); err != nil {
		return err
	}
	b.logf("created %d ConfigMaps (%d bytes of data each) in %.1fs", c.n, c.dataBytes, res.seeded.Seconds())

	if c.singleton {
		b.logf("one replica without sharding:")
		s, err := b.runStage(ctx, unshardedFleet, false, 1, false)
		if err != nil {
			return fmt.Errorf("unsharded: %w", err)
		}
		res.unsharded = &s
	}
	for i, n := range c.replicas {
		b.logf("%d sharded replica(s):", n)
		scaleUp := i+1 < len(c.replicas)
		s, err := b.runStage(ctx, shardedFleet, true, n, scaleUp)
		if err != nil {
			return fmt.Errorf("%d replicas: %w", n, err)
		}
		res.stages = append(res.stages, s)
	}
	res.took = time.Since(began)
	res.loadAfter = machine.LoadAverage()
	b.logf("whole run: %.1f min; load average before %s, after %s", res.took.Minutes(), res.loadBefore, res.loadAfter)

	table := report(c, res)
	fmt.Println()
	fmt.Print(table)
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	files := map[string]string{"shard.md": table, "shard.svg": chart(c, res)}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(c.out, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("\nwrote shard.md and shard.svg in %s\n", c.out)
	return nil
}

// newFleet is a fleet of replicas of rc, sharded or not, recording in dir.
func (b *bench) newFleet(rc replicaConfig, dir string, sharded bool) (*fleet, error) {
	rc.Sharded = sharded
	rc.Dir = filepath.Join(dir, "unsharded")
	if sharded {
		rc.Dir = filepath.Join(dir, "sharded")
	}
	if err := os.MkdirAll(rc.Dir, 0o755); err != nil {
		return nil, err
	}
	return newFleet(rc)
}

// idle starts one replica of f while there are no ConfigMaps, waits until
// its caches synced and two more seconds, and returns its heap.
func (b *bench) idle(ctx context.Context, f *fleet, prefix string) (heapStats, error) {
	ps, err := f.start(ctx, prefix, 1)
	if err != nil {
		return heapStats{}, err
	}
	p := ps[0]
	err = waitFor(ctx, time.Minute, func() bool {
		t, err := p.recs.readyAt()
		return err == nil && t > 0 || !p.alive()
	})
	if err == nil {
		err = checkAlive(ps)
	}
	if err != nil {
		return heapStats{}, fmt.Errorf("idle replica: %w", err)
	}
	time.Sleep(2 * time.Second) // a few Lease renewals, as in a running replica
	h, err := p.heap(ctx)
	if err != nil {
		return h, err
	}
	return h, f.stop()
}
