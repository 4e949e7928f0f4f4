package shard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// The protocol tests run both halves of each mode's protocol together,
// each member a whole manager with Options.Sharding, on one in-memory API
// server (package fake), and judge every Reconcile each member ran: the
// label mode's Sharder and drainers, and the server-side mode's
// Coordinator and followers (the fake honouring shardSelector, as
// kube-apiserver with ShardedListAndWatch). The same scenario runs in
// both modes (testProtocol); so does a member that acknowledges too
// early, played by hand.

const (
	protoNS    = "ns"
	protoRing  = "ring"
	protoKeys  = 24
	leaseTime  = 2 * time.Second
	renewTime  = 1500 * time.Millisecond
	retryTime  = 250 * time.Millisecond
	protoWait  = 30 * time.Second
	reconcileT = 30 * time.Millisecond
	// slowT is how long a Reconcile takes while spans.slow is set: long
	// enough that a member which hands a key over without waiting for its
	// running Reconcile is caught at it.
	slowT = 1 * time.Second
)

// span is one Reconcile of a key by a member: when it ran, and the
// generation (data "gen") it read.
type span struct {
	member     string
	start, end time.Time
	gen        string
}

type spans struct {
	// slow, while set, makes every member's Reconcile take slowT.
	slow atomic.Bool

	mu    sync.Mutex
	byKey map[string][]span
}

func (s *spans) add(key string, sp span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = make(map[string][]span)
	}
	s.byKey[key] = append(s.byKey[key], sp)
}

// overlaps counts the pairs of Reconciles of one key by two members that
// ran at the same time.
func (s *spans) overlaps(t *testing.T) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for key, ss := range s.byKey {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
		for i := range ss {
			for j := i + 1; j < len(ss) && ss[j].start.Before(ss[i].end); j++ {
				if ss[j].member != ss[i].member {
					t.Logf("overlap on %s: %s %v-%v and %s %v-%v", key, ss[i].member, ss[i].start.Format("05.000"), ss[i].end.Format("05.000"),
						ss[j].member, ss[j].start.Format("05.000"), ss[j].end.Format("05.000"))
					n++
				}
			}
		}
	}
	return n
}

// reconciledAt reports whether every key's last Reconcile read gen.
func (s *spans) reconciledAt(gen string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range protoKeys {
		ss := s.byKey[protoNS+"/"+keyName(i)]
		found := false
		for _, sp := range ss {
			found = found || sp.gen == gen
		}
		if !found {
			return false
		}
	}
	return true
}

// reconciledBy reports whether member reconciled any of keys.
func (s *spans) reconciledBy(member string, keys []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range keys {
		if slices.ContainsFunc(s.byKey[key], func(sp span) bool { return sp.member == member }) {
			return true
		}
	}
	return false
}

// after reports whether member started a Reconcile after at.
func (s *spans) after(member string, at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.byKey {
		for _, sp := range ss {
			if sp.member == member && sp.start.After(at) {
				return true
			}
		}
	}
	return false
}

func keyName(i int) string { return fmt.Sprintf("cm-%02d", i) }

// protoMode is a sharding mode as the protocol tests run it.
type protoMode struct {
	mode shard.Mode
	// shardSelector is fake.Options.ShardSelector.
	shardSelector bool
	// owners returns each key's owner as the ring's state says.
	owners func(t *testing.T, cluster *fake.Cluster) map[string]string
}

var (
	labelMode  = protoMode{mode: shard.ModeLabels, owners: labelOwners}
	serverMode = protoMode{mode: shard.ModeServer, shardSelector: true, owners: epochOwners}
)

func newCluster(t *testing.T, pm protoMode) *fake.Cluster {
	t.Helper()
	var objs []runtime.Object
	for i := range protoKeys {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: protoNS, Name: keyName(i)}, Data: map[string]string{"gen": "0"}})
	}
	c, err := fake.New(fake.Options{Objects: objs, ShardSelector: pm.shardSelector})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var errCut = errors.New("protocol test: this member is cut off from the API server")

type cutTransport struct {
	next http.RoundTripper
	cut  *atomic.Bool
}

func (c cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.next.RoundTrip(req)
}

// member is a replica: a manager with Options.Sharding over the cluster,
// whose sharded controller records its Reconciles.
type member struct {
	mgr    *manager.Manager
	cut    atomic.Bool
	cancel context.CancelFunc
	done   chan error
	ended  time.Time // when Run returned
}

func startMember(t *testing.T, cluster *fake.Cluster, pm protoMode, identity string, rec *spans) *member {
	t.Helper()
	m := newMember(t, cluster, pm, identity, rec)
	m.start(t)
	return m
}

// newMember builds a member, whose name (m.mgr.Member()) is then known,
// and does not start it.
func newMember(t *testing.T, cluster *fake.Cluster, pm protoMode, identity string, rec *spans) *member {
	t.Helper()
	m := &member{done: make(chan error, 1)}
	cfg := cluster.Config()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cutTransport{next: rt, cut: &m.cut} })
	mgr, err := manager.New(cfg, manager.Options{Name: protoRing, Sharding: &shard.Options{
		Namespace: protoNS, Identity: identity, Controllers: []string{"cms"}, Primary: []runtime.Object{&corev1.ConfigMap{}},
		Mode: pm.mode, LeaseDuration: leaseTime, RenewDeadline: renewTime, RetryPeriod: retryTime,
	}})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache(), mgr.ShardScope())
	if err != nil {
		t.Fatal(err)
	}
	name := mgr.Member()
	if _, err := mgr.AddController("cms", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		start := time.Now()
		cm, err := cms.Lister().Get(req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, nil
		}
		if rec.slow.Load() {
			time.Sleep(slowT)
		} else {
			time.Sleep(reconcileT)
		}
		rec.add(req.String(), span{member: name, start: start, end: time.Now(), gen: cm.Data["gen"]})
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{Workers: protoKeys}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	m.mgr = mgr
	return m
}

// start runs the member's manager until the test ends or stop.
func (m *member) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		err := m.mgr.Run(ctx)
		m.ended = time.Now()
		m.done <- err
	}()
	t.Cleanup(func() { m.stop(t) })
}

// stop cancels Run and waits for it; it returns Run's error.
func (m *member) stop(t *testing.T) error {
	t.Helper()
	m.cancel()
	return m.wait(t)
}

func (m *member) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-m.done:
		m.done <- err // for a later wait
		return err
	case <-time.After(protoWait):
		t.Fatalf("member %s: Run did not return", m.mgr.Member())
		return nil
	}
}

func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(protoWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", protoWait, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// keyValues returns what of returns of each key, read from the cluster.
func keyValues(t *testing.T, cluster *fake.Cluster, of func(cm *corev1.ConfigMap) string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for i := range protoKeys {
		var cm corev1.ConfigMap
		if err := cluster.Get(types.NamespacedName{Namespace: protoNS, Name: keyName(i)}, &cm); err != nil {
			t.Fatal(err)
		}
		out[cm.Name] = of(&cm)
	}
	return out
}

// labelOwners returns each key's shard label.
func labelOwners(t *testing.T, cluster *fake.Cluster) map[string]string {
	t.Helper()
	return keyValues(t, cluster, func(cm *corev1.ConfigMap) string { return cm.Labels[shard.ShardLabel(protoRing)] })
}

// uids returns each key's uid.
func uids(t *testing.T, cluster *fake.Cluster) map[string]string {
	t.Helper()
	return keyValues(t, cluster, func(cm *corev1.ConfigMap) string { return shard.KeyUID.Of(cm) })
}

func countOwned(o map[string]string, member string) int {
	n := 0
	for _, m := range o {
		if m == member {
			n++
		}
	}
	return n
}

// writeGen sets every key's data gen, through its own client.
func writeGen(t *testing.T, kube kubernetes.Interface, gen string) {
	t.Helper()
	for i := range protoKeys {
		patch := fmt.Appendf(nil, `{"data":{"gen":%q}}`, gen)
		if _, err := kube.CoreV1().ConfigMaps(protoNS).Patch(context.Background(), keyName(i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// epochOwners returns each key's owner under the ring's committed epoch,
// from the ring's record and the keys' uids; none before the record is.
func epochOwners(t *testing.T, cluster *fake.Cluster) map[string]string {
	t.Helper()
	var record coordinationv1.Lease
	err := cluster.Get(types.NamespacedName{Namespace: protoNS, Name: shard.RecordName(protoRing)}, &record)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	e, err := shard.ParseEpochs(record.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	ring := shard.NewRing(e.Committed.Members...)
	out := make(map[string]string)
	for name, uid := range uids(t, cluster) {
		out[name] = ring.OwnerOfHash(shard.ServerHash(uid))
	}
	return out
}

// testProtocol: a second member joins (handover under churn), then dies
// without releasing its Lease (its keys come back once the Lease expired
// and the sharder or coordinator buried it). No key is ever reconciled by
// two members at once, every last write is reconciled, and the dead
// member starts no Reconcile once its Run has returned.
func testProtocol(t *testing.T, pm protoMode) {
	cluster := newCluster(t, pm)
	kube := kubernetes.NewForConfigOrDie(cluster.Config())
	rec := &spans{}
	a := startMember(t, cluster, pm, "a", rec)
	within(t, "every key on the first member", func() bool { return countOwned(pm.owners(t, cluster), a.mgr.Member()) == protoKeys })
	writeGen(t, kube, "1")
	within(t, "every key reconciled at gen 1", func() bool { return rec.reconciledAt("1") })

	// Every key's Reconcile runs long while keys move, so that the first
	// member has Reconciles of the keys it loses running when it learns.
	rec.slow.Store(true)
	writeGen(t, kube, "2")
	b := startMember(t, cluster, pm, "b", rec)
	for gen := 3; gen <= 6; gen++ { // churn while keys move
		writeGen(t, kube, fmt.Sprint(gen))
		time.Sleep(50 * time.Millisecond)
	}
	within(t, "keys to move to the second member", func() bool {
		o := pm.owners(t, cluster)
		return countOwned(o, b.mgr.Member()) > 0 && countOwned(o, a.mgr.Member())+countOwned(o, b.mgr.Member()) == protoKeys
	})
	rec.slow.Store(false)
	within(t, "every key reconciled at its last write", func() bool { return rec.reconciledAt("6") })
	o := pm.owners(t, cluster)
	t.Logf("after the join: %d keys on a, %d on b", countOwned(o, a.mgr.Member()), countOwned(o, b.mgr.Member()))

	// b dies: every request it sends fails, its Lease included; it
	// neither renews nor releases.
	b.cut.Store(true)
	t.Logf("the cut-off member's Run returned: %v", b.wait(t))
	diedAt := b.ended
	writeGen(t, kube, "7")
	within(t, "the dead member's keys back on the first", func() bool { return countOwned(pm.owners(t, cluster), a.mgr.Member()) == protoKeys })
	within(t, "every key reconciled at gen 7", func() bool { return rec.reconciledAt("7") })
	if rec.after(b.mgr.Member(), diedAt) {
		t.Errorf("the dead member started a Reconcile after its Run returned")
	}
	if n := rec.overlaps(t); n != 0 {
		t.Errorf("%d overlapping Reconciles of one key by two members, want 0", n)
	}
}

// TestLabelProtocol runs testProtocol in the label mode: the Sharder
// labels and drains, the members' drainers acknowledge.
func TestLabelProtocol(t *testing.T) { testProtocol(t, labelMode) }

// TestServerProtocol runs testProtocol in the server-side mode: the
// Coordinator moves the ring's epochs, the members' followers drain and
// acknowledge them, and each member lists and watches its hash ranges.
func TestServerProtocol(t *testing.T) { testProtocol(t, serverMode) }

// holdLease plays a member by hand: it holds the member Lease of name,
// and runs term while it does, until stop or the end of the test.
func holdLease(t *testing.T, cluster *fake.Cluster, name string, term func(ctx context.Context)) (stop func()) {
	t.Helper()
	el, err := leader.New(kubernetes.NewForConfigOrDie(cluster.Config()), leader.Options{Name: shard.LeaseName(protoRing, name), Namespace: protoNS, Identity: name,
		LeaseDuration: leaseTime, RenewDeadline: renewTime, RetryPeriod: retryTime, ReleaseOnCancel: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = el.Run(ctx, func(ctx context.Context) error {
			term(ctx)
			return nil
		})
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// TestEarlyAcknowledgementIsCaught: a member that acknowledges a drain
// while its Reconcile of the key still runs (played here by hand, over the
// member Lease and shard.Acknowledge) lets the key's new owner reconcile
// it at the same time, and the judge of TestLabelProtocol sees it.
func TestEarlyAcknowledgementIsCaught(t *testing.T) {
	cluster := newCluster(t, labelMode)
	rec := &spans{}
	a := startMember(t, cluster, labelMode, "a", rec)
	within(t, "every key on the first member", func() bool { return countOwned(labelOwners(t, cluster), a.mgr.Member()) == protoKeys })
	b := newMember(t, cluster, labelMode, "b", rec)
	bad, moving := badName(t, a.mgr.Member(), b.mgr.Member(), shard.Ring.Owner)
	t.Logf("%d keys will move from %s to %s: %v", len(moving), bad, b.mgr.Member(), moving)

	acker := &labelAcker{name: bad, kube: kubernetes.NewForConfigOrDie(cluster.Config()), md: metadata.NewForConfigOrDie(cluster.Config()), rec: rec}
	stopBad := holdLease(t, cluster, bad, acker.run)
	within(t, "the bad member reconciling every key it owns", func() bool {
		n := countOwned(labelOwners(t, cluster), bad)
		return n > 0 && int(acker.reconciling.Load()) == n
	})
	b.start(t)
	within(t, "the new member reconciling a key it took from the bad one", func() bool { return rec.reconciledBy(b.mgr.Member(), moving) })
	stopBad() // its Reconciles return, and are judged
	if n := rec.overlaps(t); n == 0 {
		t.Errorf("no overlapping Reconciles: the judge missed the early acknowledgement")
	}
}

// badName returns a member name for a member that joins a ring of first
// before next joins, chosen so that at least 3 keys move from it to next
// then, and those keys ("ns/name"): owner places a key on a ring as the
// mode does. Member names carry a random suffix, and a ring chosen at
// random could move none.
func badName(t *testing.T, first, next string, owner func(r shard.Ring, key string) string) (string, []string) {
	t.Helper()
	for i := range 1000 {
		name := fmt.Sprintf("bad-%d", i)
		before, after := shard.NewRing(first, name), shard.NewRing(first, name, next)
		var moving []string
		for k := range protoKeys {
			key := protoNS + "/" + keyName(k)
			if owner(before, key) == name && owner(after, key) == next {
				moving = append(moving, key)
			}
		}
		if len(moving) >= 3 {
			return name, moving
		}
	}
	t.Fatalf("no name among 1000 loses 3 keys to %s", next)
	return "", nil
}

// labelAcker plays a label-mode member that acknowledges too early: while
// it holds its member Lease it lists the keys labelled for it, starts a
// Reconcile of each that lasts until it stops, as a Reconcile that hangs
// would, and acknowledges every drain at once, as a drainer does only
// after the key's Reconcile returned.
type labelAcker struct {
	name        string
	kube        kubernetes.Interface
	md          metadata.Interface
	rec         *spans
	reconciling atomic.Int32 // keys whose Reconcile runs
}

func (m *labelAcker) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	started := map[string]bool{}
	acked := map[string]bool{}
	for ctx.Err() == nil {
		list, err := m.kube.CoreV1().ConfigMaps(protoNS).List(ctx, metav1.ListOptions{
			LabelSelector: labels.Set{shard.ShardLabel(protoRing): m.name}.String()})
		if err != nil {
			continue
		}
		for _, cm := range list.Items {
			if !started[cm.Name] {
				started[cm.Name] = true
				m.reconciling.Add(1)
				wg.Go(func() {
					start := time.Now()
					<-ctx.Done()
					m.rec.add(protoNS+"/"+cm.Name, span{member: m.name, start: start, end: time.Now(), gen: cm.Data["gen"]})
				})
			}
			if cm.Labels[shard.DrainLabel(protoRing)] != "" && !acked[cm.Name] &&
				shard.Acknowledge(ctx, m.md, corev1.SchemeGroupVersion.WithResource("configmaps"), protoNS, cm.Name, protoRing, m.name, "bad") == nil {
				acked[cm.Name] = true
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryTime):
		}
	}
}
