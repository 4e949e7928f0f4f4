package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// A replica is this program run again with replicaEnv set to its name and
// configEnv naming the JSON file of its replicaConfig.
const (
	replicaEnv = "CTRLKIT_BENCH_SHARD_REPLICA"
	configEnv  = "CTRLKIT_BENCH_SHARD_CONFIG"
)

// sentKey is the annotation in which the driver writes the time it sent
// the write (Unix ns); the replica reports it with each Reconcile's start.
const sentKey = "bench.ctrlkit.io/sent"

// controllerName is the sharded controller's name.
const controllerName = "bench"

// replicaConfig is what the bench tells its replicas.
type replicaConfig struct {
	Kubeconfig string
	Namespace  string // of the ConfigMaps and of the Leases
	Ring       string
	Sharded    bool // false: a plain manager that caches and reconciles every ConfigMap
	Workers    int
	Cost       time.Duration // what each Reconcile waits
	// Lease timings of the sharding members.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	QPS                                       float32 // the replica's client; negative means no client-side limit
	Dir                                       string  // receives <name>.rec and <name>.log
	MemProfileRate                            int     // runtime.MemProfileRate when > 0 (finer heap profiles)
}

// The records a replica writes, one line each, fields separated by
// spaces, times in Unix ns:
//
//	hello <t> <member or -> <http addr>   the manager is built and its endpoint listens
//	ready <t>                             its caches synced
//	e <seen> <name> <sent>                the informer delivered an add or update of ConfigMap name carrying sent
//	r <start> <name> <sent>               a Reconcile of ConfigMap name began; sent is the annotation it read (0: none)
//	exit <t> <error or ->                 Run returned
//
// Each line is one write(2), so kill -9 loses none already written.
type recordFile struct {
	mu sync.Mutex
	f  *os.File
}

func (r *recordFile) add(fields ...string) {
	b := make([]byte, 0, 64)
	for i, f := range fields {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, f...)
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(b); err != nil {
		fmt.Fprintf(os.Stderr, "bench-shard replica: writing a record: %v\n", err)
	}
}

func nowString() string { return strconv.FormatInt(time.Now().UnixNano(), 10) }

// heapStats is what a replica's /heap endpoint returns: the heap after two
// forced collections.
type heapStats struct {
	HeapInuse, HeapAlloc uint64
}

// replicaMain runs the replica name with the config in file configPath
// until SIGTERM, or until Run fails, and returns the exit code.
func replicaMain(name, configPath string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "bench-shard replica %s: %v\n", name, err)
		return 2
	}
	b, err := os.ReadFile(configPath)
	if err != nil {
		return fail(err)
	}
	var c replicaConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fail(fmt.Errorf("%s: %w", configPath, err))
	}
	if c.MemProfileRate > 0 {
		runtime.MemProfileRate = c.MemProfileRate
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, name+".rec"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	rec := &recordFile{f: f}

	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fail(err)
	}
	rc.QPS, rc.Burst = c.QPS, max(int(c.QPS)*2, 1)
	rc.UserAgent = "bench-shard/" + name
	log := funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), prefix, args)
	}, funcr.Options{})
	opts := manager.Options{
		Name:      c.Ring,
		Informers: informer.Options{Namespaces: []string{c.Namespace}},
		Logger:    log.WithValues("replica", name),
	}
	if c.Sharded {
		opts.Sharding = &shard.Options{
			Namespace: c.Namespace, Identity: name, Controllers: []string{controllerName},
			Primary:       []kruntime.Object{&corev1.ConfigMap{}},
			LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod,
		}
	}
	mgr, err := manager.New(rc, opts)
	if err != nil {
		return fail(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache(), mgr.ShardScope())
	if err != nil {
		return fail(err)
	}
	lister := cms.Lister()
	// A handler of its own on the controller's informer: client-go hands
	// each event to every handler at once, so the time it sees an update
	// is the time the controller's handler queued the key, within the
	// scheduling of two goroutines.
	seen := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Annotations[sentKey] != "" {
			rec.add("e", nowString(), cm.Name, cm.Annotations[sentKey])
		}
	}
	if _, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}); err != nil {
		return fail(err)
	}
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		start := nowString()
		sent := "0"
		if cm, err := lister.Get(req.Namespace, req.Name); err == nil && cm.Annotations[sentKey] != "" {
			sent = cm.Annotations[sentKey]
		}
		rec.add("r", start, req.Name, sent)
		// The Reconcile's I/O: it waits, and takes no CPU while it does.
		t := time.NewTimer(c.Cost)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return reconcile.Result{}, nil
	})
	if _, err := mgr.AddController(controllerName, r, manager.ControllerOptions{Workers: c.Workers}, manager.Watch{Source: cms}); err != nil {
		return fail(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", mgr.Handler())
	mux.Handle("/debug/pprof/heap", pprof.Handler("heap")) // for -heapprofile
	mux.HandleFunc("/heap", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_ = json.NewEncoder(w).Encode(heapStats{HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	defer func() {
		_ = srv.Close()
		wg.Wait()
	}()
	member := mgr.Member()
	if member == "" {
		member = "-"
	}
	rec.add("hello", nowString(), member, ln.Addr().String())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	readyCtx, stopReady := context.WithCancel(ctx)
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for !mgr.Ready() {
			select {
			case <-readyCtx.Done():
				return
			case <-tick.C:
			}
		}
		rec.add("ready", nowString())
	})
	err = mgr.Run(ctx)
	stopReady()
	msg := "-"
	if err != nil {
		msg = strconv.Quote(err.Error())
	}
	rec.add("exit", nowString(), msg)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "bench-shard replica %s: Run: %v\n", name, err)
		return 3
	}
	return 0
}
