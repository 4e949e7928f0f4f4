package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// span is one Reconcile of a key by a replica, and the gen it read.
type span struct {
	replica    string
	start, end time.Time
	gen        string
}

// spans records every Reconcile of every replica.
type spans struct {
	mu  sync.Mutex
	all map[string][]span // by key
}

func (s *spans) add(key string, sp span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all == nil {
		s.all = make(map[string][]span)
	}
	s.all[key] = append(s.all[key], sp)
}

// overlaps returns the pairs of Reconciles of one key by two replicas that
// ran at the same time.
func (s *spans) overlaps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for key, ss := range s.all {
		for i, a := range ss {
			for _, b := range ss[i+1:] {
				if a.replica != b.replica && a.start.Before(b.end) && b.start.Before(a.end) {
					out = append(out, fmt.Sprintf("%s: %s and %s", key, a.replica, b.replica))
				}
			}
		}
	}
	return out
}

// returns lists the keys that went back to a replica they had left,
// looking at the Reconciles that began between from and to: during one
// membership change a key moves once, from its old owner to its new one,
// and the old owner never reconciles it again (a replica that kept
// reconciling keys it handed over would show as old, new, old).
func (s *spans) returns(from, to time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for key, ss := range s.all {
		ss = slices.Clone(ss)
		slices.SortFunc(ss, func(a, b span) int { return a.start.Compare(b.start) })
		var seq []string
		for _, sp := range ss {
			if sp.start.Before(from) || !sp.start.Before(to) {
				continue
			}
			if len(seq) > 0 && seq[len(seq)-1] == sp.replica {
				continue
			}
			if slices.Contains(seq, sp.replica) {
				out = append(out, fmt.Sprintf("%s: %s, then %s", key, strings.Join(seq, ", "), sp.replica))
				break
			}
			seq = append(seq, sp.replica)
		}
	}
	return out
}

// by counts the Reconciles of replica.
func (s *spans) by(replica string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ss := range s.all {
		for _, sp := range ss {
			if sp.replica == replica {
				n++
			}
		}
	}
	return n
}

// saw reports whether some replica reconciled key after reading gen.
func (s *spans) saw(key, gen string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range s.all[key] {
		if sp.gen == gen {
			return true
		}
	}
	return false
}

// shardedReplica describes a replica the sharding tests start.
type shardedReplica struct {
	cfg  *rest.Config // the control plane's
	ns   string
	name string // its identity: member names begin with it
	mode shard.Mode
	urls *urlLog // when set, records the ConfigMap lists and watches it sends
	// slow keys' Reconciles take slowWork rather than 20ms: long enough
	// to still run when a key's new owner could first reconcile it, were
	// the old one not to wait for them before handing over.
	slow     func(key string) bool
	slowWork time.Duration
	// offline, when set and true, fails every request the replica sends,
	// its Leases' included: it loses its API access.
	offline *atomic.Bool
	// setup, when set, is called with the manager before it runs.
	setup func(*manager.Manager)
}

// startShardedReplica runs a manager sharding the ConfigMaps of ns on the
// default control plane, in shard.ModeAuto, whose controller records into
// rec.
func startShardedReplica(t *testing.T, ns, name string, rec *spans) (*manager.Manager, *running) {
	t.Helper()
	return shardedReplica{cfg: cfg, ns: ns, name: name}.start(t, rec)
}

// start runs the replica: a manager sharding the ConfigMaps of its
// namespace, whose controller records into rec.
func (r shardedReplica) start(t *testing.T, rec *spans) (*manager.Manager, *running) {
	t.Helper()
	c := r.cfg
	if r.urls != nil {
		c = r.urls.config(c, "/api/v1/namespaces/"+r.ns+"/configmaps")
	}
	if r.offline != nil {
		c = rest.CopyConfig(c)
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(req *http.Request) (*http.Response, error) {
				if r.offline.Load() {
					return nil, errors.New("e2e: this replica has lost its API access")
				}
				return rt.RoundTrip(req)
			})
		})
	}
	mgr := newManager(t, c, r.ns, manager.Options{
		Name: "sharded",
		Sharding: &shard.Options{
			Namespace: r.ns, Identity: r.name, Controllers: []string{"cms"}, Mode: r.mode,
			Primary:       []runtime.Object{&corev1.ConfigMap{}},
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		},
	})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache(), mgr.ShardScope())
	if err != nil {
		t.Fatal(err)
	}
	lister := cms.Lister()
	name := r.name
	if _, err := mgr.AddController("cms", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		start := time.Now()
		cm, err := lister.Get(req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, nil
		}
		work := 20 * time.Millisecond // the Reconcile's work, so that overlaps have room to show
		if r.slow != nil && r.slow(req.String()) {
			work = r.slowWork
		}
		time.Sleep(work)
		rec.add(req.String(), span{replica: name, start: start, end: time.Now(), gen: cm.Data["gen"]})
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{Workers: 4}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	if r.setup != nil {
		r.setup(mgr)
	}
	return mgr, start(t, mgr)
}

// urlLog records the queries of the GET requests a manager sends for one
// path: its lists and watches.
type urlLog struct {
	mu      sync.Mutex
	queries []url.Values
}

// config returns a copy of c whose GETs of path l records, as they are
// sent (after the manager's own transport wrappers).
func (l *urlLog) config(c *rest.Config, path string) *rest.Config {
	c = rest.CopyConfig(c)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && req.URL.Path == path {
				l.mu.Lock()
				l.queries = append(l.queries, req.URL.Query())
				l.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return c
}

// all returns the queries recorded so far.
func (l *urlLog) all() []url.Values {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.queries)
}

// writeGen writes gen into every ConfigMap cm-00 … of ns through k,
// reading again on a conflict (with the sharder's labels, in the label
// mode).
func writeGen(t *testing.T, k kubernetes.Interface, ns string, n, gen int) {
	for i := range n {
		for attempt := 0; ; attempt++ {
			cm, err := k.CoreV1().ConfigMaps(ns).Get(t.Context(), fmt.Sprintf("cm-%02d", i), metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			cm.Data["gen"] = fmt.Sprint(gen)
			if _, err = k.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err == nil {
				break
			} else if !apierrors.IsConflict(err) || attempt == 20 {
				t.Error(err)
				return
			}
		}
	}
}

// reconciledAt waits until every ConfigMap of ns was reconciled at gen.
func reconciledAt(t *testing.T, rec *spans, ns string, n, gen int) {
	t.Helper()
	eventually(t, waitTimeout, func() bool {
		for i := range n {
			if !rec.saw(fmt.Sprintf("%s/cm-%02d", ns, i), fmt.Sprint(gen)) {
				return false
			}
		}
		return true
	}, "every ConfigMap reconciled at gen %d", gen)
}

// TestShardingHandsOverWithoutOverlap: two replicas in one process share
// 40 ConfigMaps, in the label mode, which shard.ModeAuto picks on the
// default control plane (its kube-apiserver has no ShardedListAndWatch). The second joins after the first owns them all, takes its
// share only through handovers, and leaves gracefully; writes churn
// throughout. No key is reconciled by both at once, and every last write is
// reconciled. (The process-level suite of issue 15, with kill -9 and
// SIGSTOP, is not written yet.)
func TestShardingHandsOverWithoutOverlap(t *testing.T) {
	ns := newNamespace(t)
	const n = 40
	for i := range n {
		createConfigMap(t, ns, fmt.Sprintf("cm-%02d", i), map[string]string{"gen": "0"}, nil)
	}
	rec := &spans{}
	a, ra := startShardedReplica(t, ns, "a", rec)
	owner := func(i int) string {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), fmt.Sprintf("cm-%02d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Labels[shard.ShardLabel("sharded")]
	}
	eventually(t, waitTimeout, func() bool {
		for i := range n {
			if owner(i) != a.Member() {
				return false
			}
		}
		return true
	}, "every ConfigMap labelled for the first replica")

	if mode := ringMode(t, kube, ns); mode != "labels" {
		t.Errorf("the ring's record names the mode %q, want %q: the default control plane has no ShardedListAndWatch", mode, "labels")
	}
	write := func(gen int) { writeGen(t, kube, ns, n, gen) }
	converged := func(gen int) { reconciledAt(t, rec, ns, n, gen) }
	write(1)
	converged(1)

	joined := time.Now()
	b, rb := startShardedReplica(t, ns, "b", rec)
	two := shard.NewRing(a.Member(), b.Member())
	done := make(chan struct{})
	go func() { // churn during the handovers
		defer close(done)
		for gen := 2; gen <= 4; gen++ {
			write(gen)
		}
	}()
	eventually(t, 3*waitTimeout, func() bool {
		for i := range n {
			if owner(i) != two.Owner(fmt.Sprintf("%s/cm-%02d", ns, i)) {
				return false
			}
		}
		return true
	}, "every ConfigMap on the member the two-member ring picks")
	<-done
	write(5)
	converged(5)
	if got := rec.by("b"); got == 0 {
		t.Fatal("the second replica reconciled nothing: no key was handed over")
	} else {
		t.Logf("the second replica reconciled %d times", got)
	}
	ma, mb := metricsOf(t, a), metricsOf(t, b)
	handed, _ := ma.get("ctrlkit_shard_handovers_total", "ring", "sharded", "controller", "cms")
	keysA, _ := ma.get("ctrlkit_shard_keys", "ring", "sharded", "controller", "cms")
	keysB, _ := mb.get("ctrlkit_shard_keys", "ring", "sharded", "controller", "cms")
	drains, _ := ma.get("ctrlkit_shard_labels_total", "ring", "sharded", "action", "drain")
	membersSeen, _ := ma.get("ctrlkit_shard_members", "ring", "sharded")
	t.Logf("metrics: a handed over %v keys after %v drains; keys owned a %v, b %v; members %v", handed, drains, keysA, keysB, membersSeen)
	if handed == 0 || keysA+keysB != n || membersSeen != 2 {
		t.Errorf("metrics: handovers %v (want > 0), keys %v + %v (want %d), members %v (want 2)", handed, keysA, keysB, n, membersSeen)
	}

	if r := rec.returns(joined, time.Now()); len(r) > 0 {
		t.Errorf("%d keys went back to a replica they had left while the second one joined: %v", len(r), r)
	}
	if err := rb.stop(t); err != nil {
		t.Fatalf("second replica: %v", err)
	}
	eventually(t, 3*waitTimeout, func() bool {
		for i := range n {
			if owner(i) != a.Member() {
				return false
			}
		}
		return true
	}, "every ConfigMap back on the first replica after the second left")
	write(6)
	converged(6)
	if err := ra.stop(t); err != nil {
		t.Fatalf("first replica: %v", err)
	}
	if o := rec.overlaps(); len(o) > 0 {
		t.Errorf("%d overlapping Reconciles of one key by two replicas: %v", len(o), o)
	}
}

// ringMode returns the mode the ring "sharded" of ns records.
func ringMode(t *testing.T, k kubernetes.Interface, ns string) string {
	t.Helper()
	l, err := k.CoordinationV1().Leases(ns).Get(t.Context(), shard.RecordName("sharded"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ring's record: %v", err)
	}
	return l.Annotations[shard.ModeAnnotation]
}

// TestShardingServerModeNeedsTheGate: Mode shard.ModeServer on a control
// plane whose kube-apiserver ignores shardSelector fails Run, saying why;
// it does not fall back to labels.
func TestShardingServerModeNeedsTheGate(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{Name: "sharded", Sharding: &shard.Options{
		Namespace: ns, Controllers: []string{"cms"}, Mode: shard.ModeServer, Primary: []runtime.Object{&corev1.ConfigMap{}},
	}})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache(), mgr.ShardScope())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.AddController("cms", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	err = start(t, mgr).wait(t, waitTimeout)
	if err == nil || !strings.Contains(err.Error(), "ignores shardSelector") || !strings.Contains(err.Error(), "ShardedListAndWatch") {
		t.Fatalf("Run = %v, want an error saying the API server ignores shardSelector and naming the feature gate", err)
	}
}

// TestShardingWriteOutsideTheShareDoesNotWait: in the label mode, a write
// through a replica's client to an object of a sharded type that another
// member owns returns at once. The replica's informers never see that
// object (the shard scope adds its own label to their lists and
// watches), so the write must not wait for them: it waited out the
// read-your-own-writes timeout (10s) and returned a CacheLagError.
func TestShardingWriteOutsideTheShareDoesNotWait(t *testing.T) {
	ns := newNamespace(t)
	rec := &spans{}
	a, _ := startShardedReplica(t, ns, "a", rec)
	b, _ := startShardedReplica(t, ns, "b", rec)
	eventually(t, waitTimeout, func() bool { return a.Ready() && b.Ready() && a.Member() != "" && b.Member() != "" },
		"both replicas ready")
	ring := shard.NewRing(a.Member(), b.Member())
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("theirs-%d", i); ring.Owner(ns+"/"+n) == b.Member() {
			name = n
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{shard.ShardLabel("sharded"): b.Member()}}}
	if err := a.Client().Create(t.Context(), cm); err != nil {
		t.Fatalf("creating %s, labelled for the other member, through the first replica's client: %v", name, err)
	}
	cm.Data = map[string]string{"gen": "1"}
	if err := a.Client().Update(t.Context(), cm); err != nil {
		t.Fatalf("updating it: %v", err)
	}
	// Inside the share, the write still waits for the cache.
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine", Labels: a.ShardLabels()}}
	if err := a.Client().Create(t.Context(), mine); err != nil {
		t.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](a.Cache(), a.ShardScope())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Lister().Get(ns, "mine"); err != nil {
		t.Errorf("right after creating a ConfigMap labelled for this replica: Get = %v, want it cached", err)
	}
}

// TestShardingLeavesOtherReadersWhole: only the sharded controller's
// informers, declared in the shard scope, are narrowed. On a replica that
// also runs a controller that is not sharded over the same ConfigMaps,
// that controller's informer holds every object while keys move to a
// second replica, and its handlers are never told of a delete.
func TestShardingLeavesOtherReadersWhole(t *testing.T) {
	ns := newNamespace(t)
	const objects = 30
	for i := range objects {
		createConfigMap(t, ns, fmt.Sprintf("cm-%02d", i), nil, nil)
	}
	rec := &spans{}
	var all *informer.Informer[*corev1.ConfigMap]
	var scoped *informer.Informer[*corev1.ConfigMap]
	var deletes atomic.Int64
	var plainKeys sync.Map
	setup := func(mgr *manager.Manager) {
		var err error
		if all, err = informer.For[*corev1.ConfigMap](mgr.Cache()); err != nil {
			t.Fatal(err)
		}
		if scoped, err = informer.For[*corev1.ConfigMap](mgr.Cache(), mgr.ShardScope()); err != nil {
			t.Fatal(err)
		}
		if _, err := all.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) { deletes.Add(1) }}); err != nil {
			t.Fatal(err)
		}
		if _, err := mgr.AddController("plain", reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			plainKeys.Store(req.String(), true)
			return reconcile.Result{}, nil
		}), manager.ControllerOptions{EveryReplica: true}, manager.Watch{Source: all}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := shardedReplica{cfg: cfg, ns: ns, name: "a", setup: setup}.start(t, rec)
	eventually(t, waitTimeout, func() bool { return a.Ready() && scoped.Len() == objects }, "the only replica to hold every key in its shard")
	onA := scoped
	b, _ := startShardedReplica(t, ns, "b", rec)
	bCMs, err := informer.For[*corev1.ConfigMap](b.Cache(), b.ShardScope())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, func() bool { return b.Ready() && bCMs.Len() > 0 && onA.Len()+bCMs.Len() == objects },
		"keys to move to the second replica")
	t.Logf("after the move: %d keys on the first replica, %d on the second", onA.Len(), bCMs.Len())
	if n := deletes.Load(); n != 0 {
		t.Errorf("the informer outside the shard scope was told of %d deletes while keys moved, want 0", n)
	}
	if n := all.Len(); n != objects {
		t.Errorf("the informer outside the shard scope holds %d ConfigMaps, want all %d", n, objects)
	}
	n := 0
	plainKeys.Range(func(any, any) bool { n++; return true })
	if n != objects {
		t.Errorf("the controller that is not sharded reconciled %d keys, want all %d", n, objects)
	}
}
