// Command fanout compares ctrlkit with controller-runtime on a fan-out
// operator (issue 37): -sources ConfigMaps in one namespace, each copied
// by the operator into -targets namespaces, as a secret or config
// replicator does. Both operators are the same Reconciler written with
// each framework's defaults (its cached reads, its client, 4 workers, no
// client-side rate limit): for a source, read it and each copy from the
// cache; create a missing copy, update one whose data differs. A copy's
// events wake its source (a label names it).
//
// Each round runs both frameworks, one after the other in an order that
// alternates, each into a fresh set of target namespaces. A run measures
//
//   - converge: from the manager's start to every copy existing with its
//     source's data, as an informer of the bench's own sees them;
//   - update p50, p99: -updates passes in which the bench updates every
//     source once, at -rate a second; an update's latency runs from the
//     source's update being accepted to the last of its copies showing
//     the new data;
//   - writes: the creates, updates and patches the operator sent, and
//     how many of them the API server refused with 409 (a conflict or an
//     AlreadyExists: a write made from a cache that had not seen the
//     operator's own earlier write).
//
// It prints every run and the medians over rounds with ctrlkit's ratio to
// controller-runtime, and writes them to -out/fanout.md.
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s go run ./bench/cmd/fanout
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlkit/ctrlkit/bench/internal/machine"
	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

const (
	srcNS       = "fanout-sources"
	sourceLabel = "fanout.ctrlkit.dev/source" // on a copy: its source's name
	runLabel    = "fanout.ctrlkit.dev/run"    // on a copy: the run that made it
	workers     = 4
)

var (
	sources = flag.Int("sources", 100, "source ConfigMaps")
	targets = flag.Int("targets", 10, "namespaces each source is copied into")
	rounds  = flag.Int("rounds", 3, "rounds; each runs both frameworks")
	updates = flag.Int("updates", 2, "passes of updates to every source in each run")
	rate    = flag.Int("rate", 50, "source updates a second during an update pass")
	wait    = flag.Duration("wait", 5*time.Minute, "how long a run may take to converge, or an update to reach its copies, before it fails")
	out     = flag.String("out", "bench/results", "directory fanout.md is written to")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// framework starts one operator over the target namespaces, counting its
// writes in w, until ctx ends; done yields what its Run or Start returned.
type framework struct {
	name  string
	start func(ctx context.Context, cfg *rest.Config, targets []string) (done <-chan error, err error)
}

var frameworks = []framework{{"ctrlkit", startCtrlkit}, {"controller-runtime", startControllerRuntime}}

// result is one run of one framework.
type result struct {
	converge       time.Duration
	p50, p99       time.Duration
	writes, refuse int64
}

func run() error {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: run `make bench-e2e`, which builds kube-apiserver and etcd into bin/k8s")
	}
	if *sources < 1 || *targets < 1 || *rounds < 1 || *updates < 1 || *rate < 1 {
		return errors.New("-sources, -targets, -rounds, -updates and -rate must be at least 1")
	}
	ctrllog.SetLogger(logr.Discard())
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "fanout: stopping envtest:", err)
		}
	}()
	cfg.QPS, cfg.Burst = -1, 0
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := createNamespace(ctx, admin, srcNS); err != nil {
		return err
	}
	for i := range *sources {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: fmt.Sprintf("src-%03d", i)}, Data: data("0")}
		if _, err := admin.CoreV1().ConfigMaps(srcNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	fmt.Printf("fanout: %d sources × %d targets, %d update passes at %d/s, %d rounds; load %s\n", *sources, *targets, *updates, *rate, *rounds, machine.LoadAverage())
	got := map[string][]result{}
	gen := 0 // the data every source holds
	for r := range *rounds {
		for k := range frameworks {
			fw := frameworks[(r+k)%len(frameworks)]
			runName := fmt.Sprintf("r%d-%s", r, strings.ReplaceAll(fw.name, "-", ""))
			res, err := measure(ctx, cfg, admin, fw, runName, &gen)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, fw.name, err)
			}
			got[fw.name] = append(got[fw.name], res)
			fmt.Printf("round %d %-18s converge %6.2f s  update p50 %6.1f ms p99 %6.1f ms  writes %5d (409: %d)\n",
				r+1, fw.name, res.converge.Seconds(), ms(res.p50), ms(res.p99), res.writes, res.refuse)
		}
	}
	table := report(got)
	fmt.Print("\n" + table)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, "fanout.md"), []byte(table), 0o644)
}

func createNamespace(ctx context.Context, admin kubernetes.Interface, name string) error {
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

func data(gen string) map[string]string {
	return map[string]string{"gen": gen, "payload": strings.Repeat("x", 256)}
}

// measure runs fw once into fresh target namespaces named after runName.
func measure(ctx context.Context, cfg *rest.Config, admin kubernetes.Interface, fw framework, runName string, gen *int) (result, error) {
	var tns []string
	for t := range *targets {
		ns := fmt.Sprintf("fanout-%s-t%d", runName, t)
		if err := createNamespace(ctx, admin, ns); err != nil {
			return result{}, err
		}
		tns = append(tns, ns)
	}
	obs, err := observe(ctx, admin, runName)
	if err != nil {
		return result{}, err
	}
	defer obs.stop()

	var res result
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	counted := rest.CopyConfig(cfg)
	var writes, refused atomic.Int64
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countWrites{rt, &writes, &refused} })
	began := time.Now()
	done, err := fw.start(runCtx, counted, tns)
	if err != nil {
		return result{}, err
	}
	want := strconv.Itoa(*gen)
	if err := obs.until(*wait, func(seen map[types.NamespacedName]string) bool { return everyCopyAt(seen, tns, want) }); err != nil {
		cancel()
		<-done
		return result{}, fmt.Errorf("converging: %w", err)
	}
	res.converge = time.Since(began)

	var lats []time.Duration
	for range *updates {
		*gen++
		l, err := updatePass(ctx, admin, obs, tns, strconv.Itoa(*gen))
		if err != nil {
			cancel()
			<-done
			return result{}, err
		}
		lats = append(lats, l...)
	}
	res.writes, res.refuse = writes.Load(), refused.Load()
	cancel()
	if err := <-done; err != nil {
		return result{}, fmt.Errorf("the manager: %w", err)
	}
	slices.Sort(lats)
	res.p50, res.p99 = quantile(lats, 0.50), quantile(lats, 0.99)
	return res, nil
}

func everyCopyAt(seen map[types.NamespacedName]string, tns []string, gen string) bool {
	for _, ns := range tns {
		for i := range *sources {
			if seen[types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("src-%03d", i)}] != gen {
				return false
			}
		}
	}
	return true
}

// updatePass updates every source to gen at -rate a second and returns,
// for each, the time from its update's answer to the last of its copies
// at gen.
func updatePass(ctx context.Context, admin kubernetes.Interface, obs *observer, tns []string, gen string) ([]time.Duration, error) {
	sent := make(map[string]time.Time, *sources)
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	defer tick.Stop()
	for i := range *sources {
		<-tick.C
		name := fmt.Sprintf("src-%03d", i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: name}, Data: data(gen)}
		if _, err := admin.CoreV1().ConfigMaps(srcNS).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("updating %s: %w", name, err)
		}
		sent[name] = time.Now()
	}
	if err := obs.until(*wait, func(map[types.NamespacedName]string) bool { return obs.reachedAll(gen, len(tns)) }); err != nil {
		return nil, fmt.Errorf("update to gen %s: %w", gen, err)
	}
	lats := make([]time.Duration, 0, *sources)
	for name, at := range sent {
		lats = append(lats, max(0, obs.lastAt(gen, name).Sub(at)))
	}
	return lats, nil
}

// observer is the bench's informer over one run's copies: the data gen
// each copy holds, and when each source's copies reached each gen.
type observer struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   map[types.NamespacedName]string
	count  map[[2]string]int       // gen, source: copies seen at gen
	last   map[[2]string]time.Time // gen, source: when the last of them was seen
}

func observe(ctx context.Context, admin kubernetes.Interface, runName string) (*observer, error) {
	o := &observer{seen: map[types.NamespacedName]string{}, count: map[[2]string]int{}, last: map[[2]string]time.Time{}}
	ctx, o.cancel = context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = runLabel + "=" + runName
	}))
	inf := f.Core().V1().ConfigMaps().Informer()
	record := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		now := time.Now()
		key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
		o.mu.Lock()
		defer o.mu.Unlock()
		if g := cm.Data["gen"]; o.seen[key] != g {
			o.seen[key] = g
			k := [2]string{g, cm.Name}
			o.count[k]++
			o.last[k] = now
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		o.stop()
		return nil, errors.New("the bench's informer did not sync")
	}
	return o, nil
}

func (o *observer) stop() { o.cancel() }

// until polls cond over what o has seen, every 10ms, for up to d.
func (o *observer) until(d time.Duration, cond func(map[types.NamespacedName]string) bool) error {
	deadline := time.Now().Add(d)
	for {
		o.mu.Lock()
		ok := cond(o.seen)
		o.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reachedAll reports whether every source has n copies seen at gen; the
// caller holds o.mu (until does).
func (o *observer) reachedAll(gen string, n int) bool {
	for i := range *sources {
		if o.count[[2]string{gen, fmt.Sprintf("src-%03d", i)}] < n {
			return false
		}
	}
	return true
}

func (o *observer) lastAt(gen, source string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last[[2]string{gen, source}]
}

// countWrites counts the POSTs, PUTs and PATCHes through it, and those
// answered 409.
type countWrites struct {
	next            http.RoundTripper
	writes, refused *atomic.Int64
}

func (c countWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		if strings.Contains(req.URL.Path, "/configmaps") {
			c.writes.Add(1)
			if err == nil && resp.StatusCode == http.StatusConflict {
				c.refused.Add(1)
			}
		}
	}
	return resp, err
}

// desired is the copy of src in namespace ns, for runName.
func desired(src *corev1.ConfigMap, ns, runName string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: src.Name, Labels: map[string]string{sourceLabel: src.Name, runLabel: runName}},
		Data:       maps.Clone(src.Data),
	}
}

// runOf is the run a set of target namespaces belongs to.
func runOf(targets []string) string {
	return strings.TrimSuffix(strings.TrimPrefix(targets[0], "fanout-"), "-t0")
}

// toSource maps a ConfigMap event to its source: a source to itself, a
// copy to the source its label names.
func toSource(obj metav1.Object) []types.NamespacedName {
	if obj.GetNamespace() == srcNS {
		return []types.NamespacedName{{Namespace: srcNS, Name: obj.GetName()}}
	}
	if s := obj.GetLabels()[sourceLabel]; s != "" {
		return []types.NamespacedName{{Namespace: srcNS, Name: s}}
	}
	return nil
}

func startCtrlkit(ctx context.Context, cfg *rest.Config, targets []string) (<-chan error, error) {
	run := runOf(targets)
	mgr, err := manager.New(cfg, manager.Options{Name: "fanout-ctrlkit", Informers: informer.Options{Namespaces: append([]string{srcNS}, targets...)}})
	if err != nil {
		return nil, err
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		return nil, err
	}
	lister, c := cms.Lister(), mgr.Client()
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		src, err := lister.Get(req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		for _, ns := range targets {
			cp, err := lister.Get(ns, src.Name)
			switch {
			case apierrors.IsNotFound(err):
				err = c.Create(ctx, desired(src, ns, run))
			case err == nil && !maps.Equal(cp.Data, src.Data):
				upd := cp.DeepCopy()
				upd.Data = maps.Clone(src.Data)
				err = c.Update(ctx, upd)
			}
			if err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{}, nil
	})
	if _, err := mgr.AddController("fanout", r, manager.ControllerOptions{Workers: workers}, manager.Watch{Source: cms, Map: toSource}); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	return done, nil
}

func startControllerRuntime(ctx context.Context, cfg *rest.Config, targets []string) (<-chan error, error) {
	run := runOf(targets)
	nss := map[string]crcache.Config{srcNS: {}}
	for _, ns := range targets {
		nss[ns] = crcache.Config{}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:     logr.Discard(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)}, // one manager per run, same name
		Cache:      crcache.Options{DefaultNamespaces: nss},
	})
	if err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	r := crreconcile.Func(func(ctx context.Context, req crreconcile.Request) (crreconcile.Result, error) {
		var src corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &src); err != nil {
			return crreconcile.Result{}, crclient.IgnoreNotFound(err)
		}
		for _, ns := range targets {
			var cp corev1.ConfigMap
			err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.Name}, &cp)
			switch {
			case apierrors.IsNotFound(err):
				err = c.Create(ctx, desired(&src, ns, run))
			case err == nil && !maps.Equal(cp.Data, src.Data):
				cp.Data = maps.Clone(src.Data)
				err = c.Update(ctx, &cp)
			}
			if err != nil {
				return crreconcile.Result{}, err
			}
		}
		return crreconcile.Result{}, nil
	})
	mapper := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj crclient.Object) []crreconcile.Request {
		var reqs []crreconcile.Request
		for _, k := range toSource(obj) {
			reqs = append(reqs, crreconcile.Request{NamespacedName: k})
		}
		return reqs
	})
	err = ctrl.NewControllerManagedBy(mgr).Named("fanout").Watches(&corev1.ConfigMap{}, mapper).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: workers}).Complete(r)
	if err != nil {
		return nil, fmt.Errorf("building controller: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report is the table of medians over rounds, with every round's figure
// beside it.
func report(got map[string][]result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Fan-out: %d sources × %d targets\n\n", *sources, *targets)
	fmt.Fprintf(&b, "`KUBEBUILDER_ASSETS=$PWD/bin/k8s go run ./bench/cmd/fanout` (%d rounds, %d update passes at %d/s; load average %s at the end). "+
		"Medians over rounds; every round in brackets. Ratio: ctrlkit ÷ controller-runtime.\n\n", *rounds, *updates, *rate, machine.LoadAverage())
	b.WriteString("| measure | ctrlkit | controller-runtime | ratio |\n|--|--:|--:|--:|\n")
	row := func(name, format string, f func(result) float64) {
		var cells [2]string
		var meds [2]float64
		for i, fw := range frameworks {
			var xs []string
			var vals []float64
			for _, r := range got[fw.name] {
				vals = append(vals, f(r))
				xs = append(xs, fmt.Sprintf(format, f(r)))
			}
			meds[i] = median(vals)
			cells[i] = fmt.Sprintf(format+" [%s]", meds[i], strings.Join(xs, ", "))
		}
		ratio := "–"
		if meds[1] > 0 {
			ratio = fmt.Sprintf("%.2f×", meds[0]/meds[1])
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, cells[0], cells[1], ratio)
	}
	row("time to converge, s", "%.2f", func(r result) float64 { return r.converge.Seconds() })
	row("update to all copies, p50 ms", "%.0f", func(r result) float64 { return ms(r.p50) })
	row("update to all copies, p99 ms", "%.0f", func(r result) float64 { return ms(r.p99) })
	row("writes sent", "%.0f", func(r result) float64 { return float64(r.writes) })
	row("writes refused with 409", "%.0f", func(r result) float64 { return float64(r.refuse) })
	return b.String()
}
