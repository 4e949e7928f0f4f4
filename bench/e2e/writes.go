package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ckclient "github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// The writes section measures the latency of one write as the operator
// sees it, from the call to its return, through four clients, each next
// to the informer cache of its manager (every ConfigMap of the cluster):
// ctrlkit's manager client with read-your-own-writes on (it returns once
// the cache reflects the write) and off, controller-runtime's manager
// client and client-go's clientset (the floor). The writes go to
// writeObjects ConfigMaps of a namespace of their own; the caches also
// hold the first size's ConfigMaps, which the background writer updates
// in the loaded regime.
const (
	writeNS         = "bench-writes"
	writeObjects    = 200 // ConfigMaps the updates go to, each in turn
	writePrefix     = "w-"
	createPrefix    = "wc-"
	writeWarmup     = 20 // untimed updates before each manager's measurements: connections, discovery
	writeAnnotation = "bench.ctrlkit.io/write"
)

// writeConfig is what the writes section does per mode, case and round.
type writeConfig struct {
	updates int   // sequential or concurrent updates
	creates int   // creates, each followed by the delete of what it created; 0 for none
	conc    []int // concurrent writers: one case per value and regime
}

// writeTarget is a started manager's client and cache, as the writes
// section uses them. update, create and del set cm to the server's answer
// (del leaves it as it was); cached returns the cache's object (nil when
// it holds none) and must not be modified.
type writeTarget struct {
	update, create, del func(ctx context.Context, cm *corev1.ConfigMap) error
	cached              func(ns, name string) *corev1.ConfigMap
	synced              func() bool
	done                <-chan error
	cancel              context.CancelFunc
}

// stop cancels the manager and waits for it to return.
func (t *writeTarget) stop() error {
	t.cancel()
	select {
	case err := <-t.done:
		return err
	case <-time.After(stopTimeout):
		return errors.New("manager did not stop within a minute")
	}
}

// waitSynced polls the cache until it has synced.
func (t *writeTarget) waitSynced() error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	deadline := time.After(startTimeout)
	for !t.synced() {
		select {
		case <-tick.C:
		case err := <-t.done:
			return fmt.Errorf("manager stopped before its cache synced: %w", err)
		case <-deadline:
			return errors.New("cache did not sync in time")
		}
	}
	return nil
}

// writeMode is one client under measurement.
type writeMode struct {
	name  string
	start func(ctx context.Context, cfg *rest.Config) (*writeTarget, error)
}

// The modes, in the order of the table's columns.
const (
	modeOn = iota
	modeOff
	modeCR
	modeCG
)

var writeModes = []writeMode{
	modeOn:  {name: "ctrlkit, RYOW on", start: ryow(true)},
	modeOff: {name: "ctrlkit, RYOW off", start: ryow(false)},
	modeCR:  {name: "controller-runtime", start: startControllerRuntimeWrites},
	modeCG:  {name: "client-go", start: startClientGoWrites},
}

// ryow starts ctrlkit with read-your-own-writes on or off.
func ryow(on bool) func(context.Context, *rest.Config) (*writeTarget, error) {
	return func(ctx context.Context, cfg *rest.Config) (*writeTarget, error) {
		return startCtrlkitWrites(ctx, cfg, !on)
	}
}

// writeOrder is the modes in round's order: rotated by one every round, so
// each mode takes each place in turn.
func writeOrder(round int) []int {
	out := make([]int, len(writeModes))
	for i := range out {
		out[i] = (i + round) % len(writeModes)
	}
	return out
}

// startCtrlkitWrites runs a ctrlkit manager (defaults, client QPS
// unlimited) with an informer of every ConfigMap and no controller; its
// Client waits for the cache unless disabled.
func startCtrlkitWrites(ctx context.Context, cfg *rest.Config, disabled bool) (*writeTarget, error) {
	mgr, err := manager.New(unlimited(cfg), manager.Options{
		Name:           "bench-writes",
		ReadYourWrites: ckclient.ReadYourWrites{Disabled: disabled},
	})
	if err != nil {
		return nil, err
	}
	inf, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		return nil, err
	}
	lister, c := inf.Lister(), mgr.Client()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Run(runCtx) }()
	return &writeTarget{
		update: func(ctx context.Context, cm *corev1.ConfigMap) error { return c.Update(ctx, cm) },
		create: func(ctx context.Context, cm *corev1.ConfigMap) error { return c.Create(ctx, cm) },
		del: func(ctx context.Context, cm *corev1.ConfigMap) error {
			return c.Delete(ctx, cm, ckclient.DeleteOptions{})
		},
		cached: func(ns, name string) *corev1.ConfigMap {
			cm, err := lister.Get(ns, name)
			if err != nil {
				return nil
			}
			return cm
		},
		synced: inf.HasSynced,
		done:   done,
		cancel: cancel,
	}, nil
}

// startControllerRuntimeWrites runs a controller-runtime manager
// (defaults, metrics off, client QPS unlimited) with an informer of every
// ConfigMap and no controller; its client writes to the API server
// directly and reads from the cache.
func startControllerRuntimeWrites(ctx context.Context, cfg *rest.Config) (*writeTarget, error) {
	mgr, err := ctrl.NewManager(unlimited(cfg), ctrl.Options{
		Logger:  logr.Discard(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return nil, err
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return nil, err
	}
	c, reader := mgr.GetClient(), mgr.GetCache()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	return &writeTarget{
		update: func(ctx context.Context, cm *corev1.ConfigMap) error { return c.Update(ctx, cm) },
		create: func(ctx context.Context, cm *corev1.ConfigMap) error { return c.Create(ctx, cm) },
		del:    func(ctx context.Context, cm *corev1.ConfigMap) error { return c.Delete(ctx, cm) },
		cached: func(ns, name string) *corev1.ConfigMap {
			var cm corev1.ConfigMap
			if err := reader.Get(context.Background(), crclient.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
				return nil
			}
			return &cm
		},
		synced: inf.HasSynced,
		done:   done,
		cancel: cancel,
	}, nil
}

// startClientGoWrites runs client-go's shared informer of every ConfigMap
// (as ctrlkit's, JSON) and writes with the typed clientset, asked for
// protobuf as ctrlkit's and controller-runtime's clients send built-in
// types: the floor, a request and nothing else.
func startClientGoWrites(ctx context.Context, cfg *rest.Config) (*writeTarget, error) {
	cs, err := kubernetes.NewForConfig(unlimited(cfg))
	if err != nil {
		return nil, err
	}
	pcfg := unlimited(cfg)
	pcfg.ContentType = kruntime.ContentTypeProtobuf
	pcfg.AcceptContentTypes = kruntime.ContentTypeProtobuf + "," + kruntime.ContentTypeJSON
	wcs, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	cms := factory.Core().V1().ConfigMaps()
	inf, lister := cms.Informer(), cms.Lister()
	runCtx, cancel := context.WithCancel(ctx)
	factory.Start(runCtx.Done())
	done := make(chan error, 1)
	go func() {
		<-runCtx.Done()
		factory.Shutdown()
		done <- nil
	}()
	into := func(cm *corev1.ConfigMap, res *corev1.ConfigMap, err error) error {
		if err == nil {
			*cm = *res
		}
		return err
	}
	return &writeTarget{
		update: func(ctx context.Context, cm *corev1.ConfigMap) error {
			res, err := wcs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
			return into(cm, res, err)
		},
		create: func(ctx context.Context, cm *corev1.ConfigMap) error {
			res, err := wcs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			return into(cm, res, err)
		},
		del: func(ctx context.Context, cm *corev1.ConfigMap) error {
			return wcs.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{})
		},
		cached: func(ns, name string) *corev1.ConfigMap {
			cm, err := lister.ConfigMaps(ns).Get(name)
			if err != nil {
				return nil
			}
			return cm
		},
		synced: inf.HasSynced,
		done:   done,
		cancel: cancel,
	}, nil
}

// Write operations, in the table's order.
const (
	opUpdate = iota
	opCreate
	opDelete
	numOps
)

var opNames = [numOps]string{"Update", "Create", "Delete"}

// opResult is one kind of write by one mode in one case and round.
type opResult struct {
	lat    []time.Duration // sorted; every write the server accepted, also those whose wait for the cache timed out
	n      int             // writes attempted
	stale  int             // writes the cache did not reflect when the call returned
	failed int             // writes that returned an error, cache-lag errors included
	lag    int             // of those, *client.CacheLagError: accepted, the cache did not catch up in time
}

func (o *opResult) add(p opResult) {
	o.lat = append(o.lat, p.lat...)
	o.n += p.n
	o.stale += p.stale
	o.failed += p.failed
	o.lag += p.lag
}

func (o opResult) p(q float64) time.Duration { return quantile(o.lat, q) }

// writeCase is one case of the section: a regime and a number of writers.
type writeCase struct {
	loaded bool
	conc   int
}

func (k writeCase) String() string {
	regime := "quiet"
	if k.loaded {
		regime = "loaded"
	}
	return fmt.Sprintf("%s, %d at once", regime, k.conc)
}

// modeRun is what one mode measured in one case and round.
type modeRun struct{ ops [numOps]opResult }

// bgStats is what the background writer did during one loaded regime.
type bgStats struct {
	sent, failed int
	span         time.Duration
}

// writeResults is the writes section: runs[case][mode] has one modeRun
// per round.
type writeResults struct {
	cases []writeCase
	runs  [][][]modeRun
	bg    []bgStats // one per round
	rate  int       // the background writer's target rate
}

// writeCases is the section's cases: quiet, then loaded, each with every
// number of writers.
func writeCases(c config) []writeCase {
	var out []writeCase
	for _, loaded := range []bool{false, true} {
		for _, n := range c.writes.conc {
			out = append(out, writeCase{loaded: loaded, conc: n})
		}
	}
	return out
}

// seedWriteObjects creates the namespace and the ConfigMaps the updates go
// to (kept when they exist) and returns them as the server has them.
func seedWriteObjects(ctx context.Context, admin kubernetes.Interface) ([]*corev1.ConfigMap, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: writeNS}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", writeNS, err)
	}
	objs := make([]*corev1.ConfigMap, writeObjects)
	value := strings.Repeat("x", 256)
	err := createAll(0, writeObjects, func(i int) error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%03d", writePrefix, i), Namespace: writeNS},
			Data:       map[string]string{"value": value},
		}
		got, err := admin.CoreV1().ConfigMaps(writeNS).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = admin.CoreV1().ConfigMaps(writeNS).Get(ctx, cm.Name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", writeNS, cm.Name, err)
		}
		objs[i] = got
		return nil
	})
	return objs, err
}

// writesPhase measures every mode in every case, over c.rounds rounds: in
// each round the quiet cases, then the loaded ones with the background
// writer at the highest -rates value; for each regime a fresh manager per
// mode, the modes in writeOrder.
func writesPhase(ctx context.Context, cfg *rest.Config, admin kubernetes.Interface, c config, w *writer, res *results) error {
	objs, err := seedWriteObjects(ctx, admin)
	if err != nil {
		return err
	}
	wr := &writeResults{cases: writeCases(c), rate: slices.Max(c.rates)}
	wr.runs = make([][][]modeRun, len(wr.cases))
	for k := range wr.runs {
		wr.runs[k] = make([][]modeRun, len(writeModes))
	}
	res.writes = wr
	var seq atomic.Int64
	for round := range c.rounds {
		for _, loaded := range []bool{false, true} {
			var stopBG func() bgStats
			if loaded {
				stopBG = w.background(ctx, wr.rate)
			}
			err := writesRegime(ctx, cfg, admin, c, round, loaded, objs, &seq, wr, res)
			if stopBG != nil {
				bg := stopBG()
				wr.bg = append(wr.bg, bg)
				res.logf("round %d writes loaded: background writer sent %d (%d failed) over %.1fs, %.0f/s (target %d/s)",
					round+1, bg.sent, bg.failed, bg.span.Seconds(), float64(bg.sent)/bg.span.Seconds(), wr.rate)
			}
			if err != nil {
				return fmt.Errorf("round %d: %w", round+1, err)
			}
		}
	}
	return nil
}

// writesRegime runs one round of one regime: every mode, in turn, on a
// fresh manager, every case of the regime.
func writesRegime(ctx context.Context, cfg *rest.Config, admin kubernetes.Interface, c config, round int, loaded bool,
	objs []*corev1.ConfigMap, seq *atomic.Int64, wr *writeResults, res *results) error {
	for _, m := range writeOrder(round) {
		mode := writeModes[m]
		t, err := mode.start(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", mode.name, err)
		}
		if err := t.waitSynced(); err != nil {
			_ = t.stop()
			return fmt.Errorf("%s: %w", mode.name, err)
		}
		warm := writeWorker{t: t, admin: admin, objs: objs, seq: seq}
		warm.updates(ctx, 0, 1, writeWarmup)
		runtime.GC() // what the previous manager left is not this one's to collect
		for k, wc := range wr.cases {
			if wc.loaded != loaded {
				continue
			}
			r := measureWrites(ctx, t, admin, objs, seq, wc.conc, c.writes.updates, c.writes.creates)
			wr.runs[k][m] = append(wr.runs[k][m], r)
			res.logf("%s", writeLine(round, wc, mode, r))
		}
		if err := t.stop(); err != nil {
			return fmt.Errorf("%s: stopping: %w", mode.name, err)
		}
	}
	return nil
}

// writeLine is the per-round line of one mode in one case.
func writeLine(round int, wc writeCase, mode writeMode, r modeRun) string {
	line := fmt.Sprintf("round %d writes %-18s %-18s", round+1, wc, mode.name)
	for op, o := range r.ops {
		if o.n == 0 {
			continue
		}
		line += fmt.Sprintf(" %s p50 %.2fms p99 %.2fms stale %d/%d", strings.ToLower(opNames[op]), ms(o.p(0.5)), ms(o.p(0.99)), o.stale, o.n)
		if o.failed > 0 {
			line += fmt.Sprintf(" failed %d (cache lag %d)", o.failed, o.lag)
		}
		line += ";"
	}
	return strings.TrimSuffix(line, ";")
}

// measureWrites runs conc writers side by side, each sequential: writer g
// updates objs g, g+conc, g+2·conc, … in turn, its share of updates in
// all, then creates and deletes its share of creates, one object after
// the other.
func measureWrites(ctx context.Context, t *writeTarget, admin kubernetes.Interface, objs []*corev1.ConfigMap, seq *atomic.Int64,
	conc, updates, creates int) modeRun {
	per := make([]modeRun, conc)
	var wg sync.WaitGroup
	for g := range conc {
		share := func(total int) int {
			n := total / conc
			if g < total%conc {
				n++
			}
			return n
		}
		wg.Go(func() {
			ww := writeWorker{t: t, admin: admin, objs: objs, seq: seq}
			per[g].ops[opUpdate] = ww.updates(ctx, g, conc, share(updates))
			per[g].ops[opCreate], per[g].ops[opDelete] = ww.createDeletes(ctx, share(creates))
		})
	}
	wg.Wait()
	var r modeRun
	for _, p := range per {
		for op := range r.ops {
			r.ops[op].add(p.ops[op])
		}
	}
	for op := range r.ops {
		slices.Sort(r.ops[op].lat)
	}
	return r
}

// writeWorker is one sequential writer.
type writeWorker struct {
	t     *writeTarget
	admin kubernetes.Interface
	objs  []*corev1.ConfigMap // as the server last answered; writer g owns those at g mod conc
	seq   *atomic.Int64
	next  int // the next of its objects to update
}

// timed runs write and accounts for it in o: its latency when the server
// accepted it, an error, and whether the cache reflects it when it
// returns (reflected, called right after).
func timed(o *opResult, write func() error, reflected func() bool) (accepted bool) {
	o.n++
	t0 := time.Now()
	err := write()
	d := time.Since(t0)
	var lag *ckclient.CacheLagError
	accepted = err == nil || errors.As(err, &lag)
	if err != nil {
		o.failed++
		if lag != nil {
			o.lag++
		}
	}
	if accepted {
		o.lat = append(o.lat, d)
		if !reflected() {
			o.stale++
		}
	}
	return accepted
}

// atOrAfter reports whether cm is at resourceVersion rv or later.
func atOrAfter(cm *corev1.ConfigMap, rv string) bool {
	if cm == nil {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(cm.ResourceVersion, rv)
	return err == nil && c >= 0
}

// updates sends n updates, each setting a new value of writeAnnotation on
// the next of the objects at g mod conc, read-modify-write from the
// server's last answer.
func (ww *writeWorker) updates(ctx context.Context, g, conc, n int) opResult {
	var o opResult
	own := (len(ww.objs) - g + conc - 1) / conc
	for range n {
		i := g + conc*(ww.next%own)
		ww.next++
		cm := ww.objs[i].DeepCopy()
		if cm.Annotations == nil {
			cm.Annotations = make(map[string]string, 1)
		}
		cm.Annotations[writeAnnotation] = strconv.FormatInt(ww.seq.Add(1), 10)
		accepted := timed(&o, func() error { return ww.t.update(ctx, cm) },
			func() bool { return atOrAfter(ww.t.cached(cm.Namespace, cm.Name), cm.ResourceVersion) })
		if accepted {
			ww.objs[i] = cm
		} else if got, err := ww.admin.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{}); err == nil {
			ww.objs[i] = got // a conflict or a failure: start again from the server's object
		}
	}
	return o
}

// createDeletes creates n ConfigMaps, one after the other, each deleted
// right after it was created.
func (ww *writeWorker) createDeletes(ctx context.Context, n int) (created, deleted opResult) {
	value := strings.Repeat("x", 256)
	for range n {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", createPrefix, ww.seq.Add(1)), Namespace: writeNS},
			Data:       map[string]string{"value": value},
		}
		if !timed(&created, func() error { return ww.t.create(ctx, cm) },
			func() bool { return atOrAfter(ww.t.cached(cm.Namespace, cm.Name), cm.ResourceVersion) }) {
			continue
		}
		uid := cm.UID
		if !timed(&deleted, func() error { return ww.t.del(ctx, cm) },
			func() bool { got := ww.t.cached(cm.Namespace, cm.Name); return got == nil || got.UID != uid }) {
			_ = ww.admin.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{})
		}
	}
	return created, deleted
}

// background runs w open loop at rate, like churn, until the returned
// stop is called; stop waits for the writes in flight and says what was
// sent. w must not be used otherwise until then.
func (w *writer) background(ctx context.Context, rate int) (stop func() bgStats) {
	quit := make(chan struct{})
	result := make(chan bgStats, 1)
	go func() {
		interval := time.Second / time.Duration(rate)
		sem := make(chan struct{}, maxInFlight)
		var wg sync.WaitGroup
		var failed atomic.Int64
		var st bgStats
		timer := time.NewTimer(0)
		defer timer.Stop()
		start := time.Now()
	loop:
		for i := 0; ; i++ {
			// Pacing an open-loop writer: the schedule is the point.
			timer.Reset(time.Until(start.Add(time.Duration(i) * interval)))
			select {
			case <-quit:
				break loop
			case <-timer.C:
			}
			select {
			case <-quit:
				break loop
			case sem <- struct{}{}:
			}
			seq, idx := w.next()
			st.sent++
			wg.Go(func() {
				defer func() { <-sem }()
				if w.patch(ctx, seq, idx) != nil {
					failed.Add(1)
				}
			})
		}
		st.span = time.Since(start)
		wg.Wait()
		st.failed = int(failed.Load())
		result <- st
	}()
	return func() bgStats {
		close(quit)
		return <-result
	}
}
