package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// The fault tests inject one fault each for real and end the same way: the
// cache equals what the API server lists, and every object's last write was
// seen by a Reconcile (the lister showed that write's resourceVersion), so
// no change was lost.

// gone is what a seen records for a key whose object was not in the cache.
const gone = "<gone>"

// seen records, per object name, the resourceVersions Reconcile found in
// the lister.
type seen struct {
	mu  sync.Mutex
	rvs map[string]map[string]bool
}

// reconciled records what the lister holds for req: call it from Reconcile.
func (s *seen) reconciled(l informer.Lister[*corev1.ConfigMap], req reconcile.Request) {
	rv := gone
	if cm, err := l.Get(req.Namespace, req.Name); err == nil {
		rv = cm.ResourceVersion
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rvs == nil {
		s.rvs = make(map[string]map[string]bool)
	}
	if s.rvs[req.Name] == nil {
		s.rvs[req.Name] = make(map[string]bool)
	}
	s.rvs[req.Name][rv] = true
}

func (s *seen) has(name, rv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rvs[name][rv]
}

// converged waits until the lister holds exactly the ConfigMaps the API
// server lists in ns, each at the server's resourceVersion, every one of
// them was reconciled at that resourceVersion by every tracker, and every
// name in deleted was reconciled after it left the cache.
func converged(t testing.TB, timeout time.Duration, c kubernetes.Interface, ns string, l informer.Lister[*corev1.ConfigMap], deleted []string, trackers ...*seen) {
	t.Helper()
	var why string
	check := func() bool {
		list, err := c.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			why = fmt.Sprintf("listing from the server: %v", err)
			return false
		}
		cached, err := l.ListInNamespace(ns, nil)
		if err != nil {
			why = fmt.Sprintf("listing the cache: %v", err)
			return false
		}
		server := make(map[string]string, len(list.Items))
		for _, o := range list.Items {
			server[o.Name] = o.ResourceVersion
		}
		cache := make(map[string]string, len(cached))
		for _, o := range cached {
			cache[o.Name] = o.ResourceVersion
		}
		for name, rv := range server {
			if cache[name] != rv {
				why = fmt.Sprintf("%s is at %s on the server, %q in the cache", name, rv, cache[name])
				return false
			}
			for i, s := range trackers {
				if !s.has(name, rv) {
					why = fmt.Sprintf("tracker %d never reconciled %s at its last write %s", i, name, rv)
					return false
				}
			}
		}
		for name, rv := range cache {
			if _, ok := server[name]; !ok {
				why = fmt.Sprintf("%s (%s) is in the cache but not on the server", name, rv)
				return false
			}
		}
		for _, name := range deleted {
			for i, s := range trackers {
				if !s.has(name, gone) {
					why = fmt.Sprintf("tracker %d never reconciled the deletion of %s", i, name)
					return false
				}
			}
		}
		return true
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("cache and server did not converge within %v: %s", timeout, why)
		}
		<-tick.C
	}
}

// createMany creates ConfigMaps name-000 .. name-(n-1) in ns, in parallel.
func createMany(t testing.TB, c kubernetes.Interface, ns, prefix string, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	parallel(t, names, func(name string) error {
		_, err := c.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data:       map[string]string{"gen": "0"},
		}, metav1.CreateOptions{})
		return err
	})
	return names
}

// updateAll writes data gen=gen to every named ConfigMap, in parallel.
func updateAll(t testing.TB, c kubernetes.Interface, ns string, names []string, gen int) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"data":{"gen":"%d"}}`, gen)
	parallel(t, names, func(name string) error {
		_, err := c.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// parallel calls f for each name on 16 goroutines and fails t on the first
// error.
func parallel(t testing.TB, names []string, f func(string) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make([]error, len(names))
	)
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(names); i = int(next.Add(1) - 1) {
				errs[i] = f(names[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestFaultErrorStorm: a reconciler that fails every time on 200 objects
// is retried no faster than the default rate limiter allows, and the
// retries cost the API server nothing: the manager's requests stay at the
// informer's list and watch.
func TestFaultErrorStorm(t *testing.T) {
	const (
		n      = 200
		window = 3 * time.Second
		// DefaultRateLimiter: the bucket (10 qps, burst 100) gives every
		// retry a token or, past DefaultBucketMaxDelay (10s), a delay
		// between 5s and 10s; so within a window shorter than 5s no more
		// than burst + qps*window retries start, whatever the per-item
		// backoff.
		burst, qps = 100, 10
	)
	ns := newNamespace(t)
	fast := fastClient(t, cfg)
	createMany(t, fast, ns, "storm", n)

	rc := &requestCounter{}
	// 200 objects failing make a log line each per retry: keep them out.
	mgr := newManager(t, rc.config(cfg), ns, manager.Options{Logger: quietLogger()})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var (
		tr    seen
		mu    sync.Mutex
		calls []time.Time
	)
	_, err = mgr.AddController("storm", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		tr.reconciled(cms.Lister(), req)
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		return reconcile.Result{}, errors.New("storm: always failing")
	}), manager.ControllerOptions{Workers: 4}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	callsNow := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
	eventually(t, waitTimeout, func() bool { return len(callsNow()) > 0 }, "the first Reconcile")
	t0 := callsNow()[0]
	atStart := rc.snapshot()
	eventually(t, window+waitTimeout, func() bool { return time.Since(t0) > window }, "the end of the window")
	inWindow := 0
	for _, at := range callsNow() {
		if at.Sub(t0) <= window {
			inWindow++
		}
	}
	during := rc.snapshot().sub(atStart)
	retries := inWindow - n
	limit := burst + int(qps*window.Seconds())
	// Without the bucket, the per-item backoff alone (5ms doubling) would
	// allow about log2(window/5ms)+1 = 10 attempts per object.
	unbucketed := n * 10
	t.Logf("in %v: %d Reconcile calls (%d first + %d retries; bucket allows %d retries, per-item backoff alone ~%d calls); API requests during the window: %+v, in all: %+v",
		window, inWindow, n, retries, limit, unbucketed, during, rc.snapshot())
	if retries < burst {
		t.Errorf("%d retries in %v, want at least the burst of %d: failures are not retried", retries, window, burst)
	}
	if retries > limit+limit/10 {
		t.Errorf("%d retries in %v, want at most %d (+10%%): the rate limiter does not cap a storm", retries, window, limit)
	}
	if during.total() > 4 {
		t.Errorf("the manager sent %d API requests (%+v) while retrying %d times, want at most a re-watch or two", during.total(), during, retries)
	}
	converged(t, waitTimeout, fast, ns, cms.Lister(), nil, &tr)
}

// trackConfigMaps declares mgr's ConfigMap informer and adds a controller
// named name, with 2 workers, whose Reconcile only records in the returned
// seen what the lister holds.
func trackConfigMaps(t testing.TB, mgr *manager.Manager, name string) (*informer.Informer[*corev1.ConfigMap], *seen) {
	t.Helper()
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	tr := &seen{}
	_, err = mgr.AddController(name, reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		tr.reconciled(cms.Lister(), req)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{Workers: 2}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	return cms, tr
}

func cmRV(t testing.TB, c kubernetes.Interface, ns, name string) string {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.ResourceVersion
}

// latencies collects how long after a write a Reconcile saw it.
type latencies struct {
	mu      sync.Mutex
	written map[string]time.Time // resourceVersion → when the write returned
	got     []time.Duration
	pending map[string]time.Time // seen before the write was recorded
}

func (l *latencies) wrote(rv string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seenAt, ok := l.pending[rv]; ok {
		l.got = append(l.got, max(0, seenAt.Sub(at)))
		delete(l.pending, rv)
		return
	}
	l.written[rv] = at
}

func (l *latencies) saw(rv string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.written[rv]; ok {
		l.got = append(l.got, at.Sub(w))
		delete(l.written, rv)
		return
	}
	l.pending[rv] = at
}

func (l *latencies) sorted() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.got)
	slices.Sort(out)
	return out
}

// TestFaultSlowReconcilerAndHandlerDoNotStallOthers: three controllers
// share one ConfigMap informer. One blocks in Reconcile, one blocks in its
// event handler (its MapFunc, which runs on the informer's delivery to that
// handler), and the third keeps reconciling every change with low
// latency. Once released, the other two catch up with no change lost.
func TestFaultSlowReconcilerAndHandlerDoNotStallOthers(t *testing.T) {
	const (
		n       = 20
		rounds  = 5
		maxP99  = time.Second
		maxWait = 5 * time.Second
	)
	ns := newNamespace(t)
	fast := fastClient(t, cfg)
	mgr := newManager(t, cfg, ns, manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	lister := cms.Lister()
	var (
		release             = make(chan struct{})
		releaseOnce         sync.Once
		blockedReconcile    = make(chan struct{}, 1)
		blockedHandler      = make(chan struct{}, 1)
		armed               atomic.Bool // the handler blocks only once the test has started
		slowR, slowH, fastR seen
		lat                 = &latencies{written: map[string]time.Time{}, pending: map[string]time.Time{}}
	)
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	_, err = mgr.AddController("slow-reconcile", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		select {
		case blockedReconcile <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
			return reconcile.Result{}, ctx.Err()
		}
		slowR.reconciled(lister, req)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	slowMap := func(obj metav1.Object) []types.NamespacedName {
		if armed.Load() {
			select {
			case blockedHandler <- struct{}{}:
			default:
			}
			<-release
		}
		return []types.NamespacedName{{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	}
	_, err = mgr.AddController("slow-handler", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		slowH.reconciled(lister, req)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms, Map: slowMap})
	if err != nil {
		t.Fatal(err)
	}
	_, err = mgr.AddController("fast", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		now := time.Now()
		fastR.reconciled(lister, req)
		if cm, err := lister.Get(req.Namespace, req.Name); err == nil {
			lat.saw(cm.ResourceVersion, now)
		}
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	// After start, so that it runs before the manager is stopped: a
	// handler still blocked would hold up the informer's shutdown.
	t.Cleanup(unblock)
	eventually(t, waitTimeout, mgr.Ready, "the manager to be ready")
	armed.Store(true)

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cm-%02d", i)
	}
	write := func(name string, gen int) {
		var (
			cm  *corev1.ConfigMap
			err error
		)
		if gen == 0 {
			cm, err = fast.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"gen": "0"}}, metav1.CreateOptions{})
		} else {
			cm, err = fast.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.MergePatchType,
				fmt.Appendf(nil, `{"data":{"gen":"%d"}}`, gen), metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		lat.wrote(cm.ResourceVersion, time.Now())
	}
	for gen := range rounds {
		for _, name := range names {
			write(name, gen)
			// One write at a time, each waited for, so a latency measures
			// the path through the informer and not a backlog of writes.
			eventually(t, maxWait, func() bool { return fastR.has(name, cmRV(t, fast, ns, name)) }, "the fast controller to reconcile %s gen %d", name, gen)
		}
	}
	select {
	case <-blockedReconcile:
	default:
		t.Error("the slow reconciler never blocked")
	}
	select {
	case <-blockedHandler:
	default:
		t.Error("the slow handler never blocked")
	}
	l := lat.sorted()
	if len(l) != n*rounds {
		t.Errorf("measured %d latencies, want %d", len(l), n*rounds)
	}
	if len(l) > 0 {
		p50, p99, worst := l[len(l)/2], l[len(l)*99/100], l[len(l)-1]
		t.Logf("fast controller, write → Reconcile over %d writes while the others were blocked: p50 %v, p99 %v, max %v", len(l), p50, p99, worst)
		if p99 > maxP99 {
			t.Errorf("p99 latency %v, want under %v: a blocked controller stalls the others", p99, maxP99)
		}
	}
	unblock()
	converged(t, waitTimeout, fast, ns, lister, nil, &slowR, &slowH, &fastR)
}

// TestFaultAPIServerRestart: the API server of a control plane of the
// test's own is stopped and started again while the manager runs; objects
// change during and after the restart. The manager keeps running, and its
// cache and reconciles catch up with every change.
func TestFaultAPIServerRestart(t *testing.T) {
	// Watches are closed within 1s of SIGTERM rather than drained for up
	// to a minute, so the stop is a clean one.
	e, c := startFaultEnv(t, map[string]string{"shutdown-watch-termination-grace-period": "1s"})
	admin := fastClient(t, c)
	ns := "restart"
	if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := createMany(t, admin, ns, "cm", 30)

	rc := &requestCounter{}
	mgr := newManager(t, rc.config(c), ns, manager.Options{})
	cms, tr := trackConfigMaps(t, mgr, "restart")
	r := start(t, mgr)
	converged(t, waitTimeout, admin, ns, cms.Lister(), nil, tr)
	before := rc.snapshot()

	api := e.ControlPlane.APIServer
	stopAt := time.Now()
	how := "stopped"
	if err := api.Stop(); err != nil {
		// SIGTERM was not enough within the stop timeout, and envtest sent
		// SIGKILL: a crash rather than a clean stop, which is a fault too.
		if !strings.Contains(err.Error(), "timeout waiting for process kube-apiserver to stop") {
			t.Fatalf("stopping the API server: %v", err)
		}
		how = "killed after the stop timeout"
	}
	hostPort := api.SecureServing.HostPort()
	eventually(t, waitTimeout, func() bool {
		conn, err := net.DialTimeout("tcp", hostPort, 100*time.Millisecond)
		if err == nil {
			conn.Close()
		}
		return err != nil
	}, "the API server's port %s to close", hostPort)
	if _, err := admin.CoreV1().ConfigMaps(ns).Get(t.Context(), names[0], metav1.GetOptions{}); err == nil {
		t.Fatal("the API server still answers after Stop")
	}
	stopped := time.Since(stopAt)
	startAt := time.Now()
	if err := api.Start(); err != nil {
		t.Fatalf("restarting the API server: %v", err)
	}
	down := rc.snapshot().sub(before)
	t.Logf("API server: %s in %v, started again in %v at the same address %s; the manager's requests meanwhile: %+v", how, stopped, time.Since(startAt), c.Host, down)
	// The reflector backs off (0.8s doubling): a few attempts, not a loop.
	if down.total() > 20 {
		t.Errorf("the manager sent %d requests (%+v) while the API server was down for %v, want a few retries with backoff", down.total(), down, time.Since(stopAt))
	}
	if r.returned() {
		t.Fatalf("Run returned %v while the API server was down, want it to keep running", r.err)
	}

	// Changes right after the restart, while the reflector is still in its
	// backoff, and a round more after that; some deletions and creations.
	updateAll(t, admin, ns, names, 1)
	deleted := names[:5]
	parallel(t, deleted, func(name string) error {
		return admin.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	createMany(t, admin, ns, "new", 5)
	updateAll(t, admin, ns, names[5:], 2)

	converged(t, 2*waitTimeout, admin, ns, cms.Lister(), deleted, tr)
	t.Logf("API requests by the manager after the restart: %+v", rc.snapshot().sub(before))
	if r.returned() {
		t.Fatalf("Run returned %v, want it still running", r.err)
	}
}

// TestFaultCompactionForcesRelist: while the manager's connections to the
// API server are cut (a TCP proxy in front of it), objects change and etcd
// is compacted past the last resourceVersion the informer saw. With the
// watch cache off, watches are served from etcd, so on reconnecting the
// informer's resume is answered 410 Gone and it relists; no final state is
// lost.
func TestFaultCompactionForcesRelist(t *testing.T) {
	e, c := startFaultEnv(t, map[string]string{"watch-cache": "false"})
	admin := fastClient(t, c)
	ns := "compaction"
	if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := createMany(t, admin, ns, "cm", 30)

	p := startProxy(t, e.ControlPlane.APIServer.SecureServing.HostPort())
	rc := &requestCounter{}
	mgr := newManager(t, rc.config(p.config(c)), ns, manager.Options{})
	cms, tr := trackConfigMaps(t, mgr, "compaction")
	r := start(t, mgr)
	converged(t, waitTimeout, admin, ns, cms.Lister(), nil, tr)
	// A watch that ends within a second of starting makes the reflector
	// relist at once; one that ran longer is resumed from where it was,
	// which is the path under test.
	eventually(t, waitTimeout, func() bool {
		reqs := rc.requests()
		return len(reqs) > 0 && time.Since(reqs[len(reqs)-1].at) > 1500*time.Millisecond
	}, "the informer's watch to be established for 1.5s")

	p.cut()
	cutAt := time.Now()
	before := rc.snapshot()
	for gen := 1; gen <= 5; gen++ {
		updateAll(t, admin, ns, names, gen)
	}
	deleted := names[:5]
	parallel(t, deleted, func(name string) error {
		return admin.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	createMany(t, admin, ns, "new", 5)
	etcdURL := e.ControlPlane.Etcd.URL.String()
	rev := etcdRevision(t, etcdURL)
	compactEtcd(t, etcdURL, rev)

	p.restore(t)
	converged(t, 2*waitTimeout, admin, ns, cms.Lister(), deleted, tr)
	after := rc.snapshot().sub(before)
	var trail []string
	var lastSeen string
	resumed, relisted := false, false
	for _, q := range rc.requests() {
		if q.at.Before(cutAt) {
			continue
		}
		kind := "watch"
		if q.list {
			kind = "list" // or a WatchList: a watch that streams the state first
		}
		trail = append(trail, fmt.Sprintf("%s@%s", kind, cmp.Or(q.rv, `""`)))
		// The informer's resume point is the resourceVersion of its
		// first watch after the cut that is not a list (an empty one
		// would be a WatchList).
		if q.watch && !q.list && q.rv != "" && !resumed {
			resumed, lastSeen = true, q.rv
		}
		if resumed && q.list {
			relisted = true
		}
	}
	t.Logf("requests by the manager after the cut: %+v; GETs in order: %v", after, trail)
	if !resumed || !relisted {
		t.Fatalf("want a watch resumed from the resourceVersion the informer last saw, then a relist; got %v", trail)
	}
	// The proof that the informer's resume point is gone: a watch from it
	// is refused with 410.
	w, err := admin.CoreV1().ConfigMaps(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: lastSeen})
	if err != nil {
		if !apierrors.IsGone(err) && !apierrors.IsResourceExpired(err) {
			t.Fatalf("watch from %s after compaction: %v, want 410 Gone", lastSeen, err)
		}
	} else {
		select {
		case ev := <-w.ResultChan():
			st, ok := ev.Object.(*metav1.Status)
			if ev.Type != watch.Error || !ok || st.Code != 410 {
				t.Fatalf("watch from %s after compaction: first event %v %#v, want an error with code 410", lastSeen, ev.Type, ev.Object)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("watch from %s after compaction: no event, want 410 Gone", lastSeen)
		}
		w.Stop()
	}
	t.Logf("informer last saw resourceVersion %s; etcd compacted at revision %d", lastSeen, rev)

	if r.returned() {
		t.Fatalf("Run returned %v, want it still running", r.err)
	}
}

// TestFaultMalformedKubeconfig: manager.GetConfig with KUBECONFIG pointing
// at a file that is not a kubeconfig fails with an error that names the
// file and says what is wrong.
func TestFaultMalformedKubeconfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		parts         []string // besides the file's path
	}{
		{"garbage", "\x00\x01 this is { not yaml: [", []string{"no cluster config", "error loading config file", "yaml"}},
		{"wrong kind", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n", []string{"no cluster config", "error loading config file", `kind "Pod"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".kubeconfig")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("KUBECONFIG", path)
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			c, err := manager.GetConfig()
			if err == nil {
				t.Fatalf("GetConfig returned a config for host %q, want an error", c.Host)
			}
			wantErr(t, err, append(tc.parts, path)...)
		})
	}
}
