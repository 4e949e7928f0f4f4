package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// startGatedPlane starts a control plane of its own whose kube-apiserver
// runs with the feature gate ShardedListAndWatch (KEP-5866), stopped when
// the test ends, and returns its admin config and clientset.
func startGatedPlane(t *testing.T) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	e := &envtest.Environment{}
	e.ControlPlane.GetAPIServer().Configure().Append("feature-gates", "ShardedListAndWatch=true")
	c, err := e.Start()
	if err != nil {
		t.Fatalf("starting a control plane with ShardedListAndWatch: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Logf("stopping the control plane with ShardedListAndWatch: %v", err)
		}
	})
	k, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// epochsOf returns the epochs the ring "sharded" of ns records; none
// before its first replica has written the record.
func epochsOf(t *testing.T, k kubernetes.Interface, ns string) shard.Epochs {
	t.Helper()
	l, err := k.CoordinationV1().Leases(ns).Get(t.Context(), shard.RecordName("sharded"), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return shard.Epochs{}
	}
	if err != nil {
		t.Fatalf("the ring's record: %v", err)
	}
	e, err := shard.ParseEpochs(l.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestShardingServerSide: on a control plane whose kube-apiserver has
// ShardedListAndWatch, replicas in shard.ModeAuto pick the server-side mode.
// Each lists and watches only the hash ranges of its share (its requests
// carry its shardSelector, and its cache holds exactly the ConfigMaps the
// ring gives it by uid). A second replica joins while writes churn, then
// leaves; a third joins and loses its API access. Keys move by ring
// epochs, no key is reconciled by two replicas at once, and every last
// write is reconciled, by the key's owner.
func TestShardingServerSide(t *testing.T) {
	pcfg, pkube := startGatedPlane(t)
	nsObj, err := pkube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sharded"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	const n = 40
	uids := map[string]string{} // by key
	for i := range n {
		cm, err := pkube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"gen": "0"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[ns+"/"+cm.Name] = string(cm.UID)
	}
	rec := &spans{}
	urlsA, urlsB := &urlLog{}, &urlLog{}
	// While the second replica joins, the keys it is to take take 2.5s to
	// reconcile on the first: longer than the new owner takes to list the
	// ranges it gains and reconcile them, so that a replica handing over
	// without waiting for its running Reconciles shows overlaps (a
	// follower that did not wait for them: overlaps in 3 runs of 4).
	var slowKeys atomic.Pointer[map[string]bool]
	slow := func(key string) bool { m := slowKeys.Load(); return m != nil && (*m)[key] }
	a, ra := shardedReplica{cfg: pcfg, ns: ns, name: "a", urls: urlsA, slow: slow, slowWork: 2500 * time.Millisecond}.start(t, rec)
	keysOf := func(m *manager.Manager) float64 {
		v, _ := metricsOf(t, m).get("ctrlkit_shard_keys", "ring", "sharded", "controller", "cms")
		return v
	}
	// settled reports whether the ring's record has committed exactly
	// members, and each replica caches the keys the ring gives it.
	settled := func(replicas ...*manager.Manager) bool {
		var members []string
		for _, m := range replicas {
			members = append(members, m.Member())
		}
		slices.Sort(members)
		e := epochsOf(t, pkube, ns)
		if e.Committed.N != e.Target.N || !slices.Equal(e.Committed.Members, members) {
			return false
		}
		ring := shard.NewRing(members...)
		for _, m := range replicas {
			want := 0
			for _, uid := range uids {
				if ring.OwnerOfHash(shard.ServerHash(uid)) == m.Member() {
					want++
				}
			}
			if keysOf(m) != float64(want) {
				return false
			}
		}
		return true
	}
	eventually(t, waitTimeout, func() bool { return settled(a) }, "the first replica owning and caching every ConfigMap")
	if mode := ringMode(t, pkube, ns); mode != "server/uid" {
		t.Fatalf("the ring's record names the mode %q, want server/uid", mode)
	}
	write := func(gen int) { writeGen(t, pkube, ns, n, gen) }
	converged := func(gen int) { reconciledAt(t, rec, ns, n, gen) }
	write(1)
	converged(1)
	before := epochsOf(t, pkube, ns).Committed.N

	// Writes churn until the handover is over, so that events about the
	// keys that move reach both replicas while they move.
	stopChurn, done := make(chan struct{}), make(chan int)
	go func() {
		gen := 2
		defer func() { done <- gen }()
		for ; ; gen++ {
			select {
			case <-stopChurn:
				return
			default:
			}
			write(gen)
		}
	}()
	joined := time.Now()
	b, rb := shardedReplica{cfg: pcfg, ns: ns, name: "b", urls: urlsB}.start(t, rec)
	two := shard.NewRing(a.Member(), b.Member())
	moving := map[string]bool{}
	for key, uid := range uids {
		moving[key] = two.OwnerOfHash(shard.ServerHash(uid)) == b.Member()
	}
	slowKeys.Store(&moving)
	eventually(t, 3*waitTimeout, func() bool { return settled(a, b) }, "the two replicas each caching the ConfigMaps the two-member ring gives it")
	t.Logf("from the second replica's start to both caching their shares (its cache sync, two epochs, a relist): %v", time.Since(joined).Round(time.Millisecond))
	close(stopChurn)
	slowKeys.Store(nil)
	last := <-done + 1
	write(last)
	converged(last)
	who := map[string]string{a.Member(): "a", b.Member(): "b"}
	rec.mu.Lock()
	for key, uid := range uids {
		owner := who[two.OwnerOfHash(shard.ServerHash(uid))]
		for _, sp := range rec.all[key] {
			if sp.gen == fmt.Sprint(last) && sp.replica != owner {
				t.Errorf("%s (owned by %s) was reconciled at gen %d by %s", key, owner, last, sp.replica)
			}
		}
	}
	rec.mu.Unlock()
	ma, mb := metricsOf(t, a), metricsOf(t, b)
	handed, _ := ma.get("ctrlkit_shard_handovers_total", "ring", "sharded", "controller", "cms")
	epochA, _ := ma.get("ctrlkit_shard_epoch", "ring", "sharded")
	epochB, _ := mb.get("ctrlkit_shard_epoch", "ring", "sharded")
	committed := epochsOf(t, pkube, ns).Committed.N
	t.Logf("a handed over %v keys; keys a %v, b %v; epochs: before %d, committed %d, a follows %v, b %v; b reconciled %d times",
		handed, keysOf(a), keysOf(b), before, committed, epochA, epochB, rec.by("b"))
	if handed == 0 || epochA != float64(committed) || epochB != float64(committed) || committed <= before || rec.by("b") == 0 {
		t.Errorf("handovers %v (want > 0), epochs followed %v and %v (want %d, past %d), b's Reconciles %d (want > 0)",
			handed, epochA, epochB, committed, before, rec.by("b"))
	}

	// The requests show the filtering: every list and watch carried a
	// shardSelector over uids, and a's changed when b joined.
	selectors := map[string]bool{}
	for _, q := range urlsA.all() {
		sel := q.Get("shardSelector")
		if !strings.HasPrefix(sel, "shardRange(object.metadata.uid, ") || q.Has("labelSelector") {
			t.Fatalf("a sent a ConfigMap list or watch without its shardSelector: %v", q)
		}
		selectors[sel] = true
	}
	if len(selectors) < 2 {
		t.Errorf("a listed and watched with %d shardSelectors, want at least 2: one for the whole ring, one for its share of two", len(selectors))
	}
	for _, q := range urlsB.all() {
		if !strings.HasPrefix(q.Get("shardSelector"), "shardRange(object.metadata.uid, ") {
			t.Fatalf("b sent a ConfigMap list or watch without its shardSelector: %v", q)
		}
	}

	if r := rec.returns(joined, time.Now()); len(r) > 0 {
		t.Errorf("%d keys went back to a replica they had left while the second one joined: %v", len(r), r)
	}
	left := time.Now()
	if err := rb.stop(t); err != nil {
		t.Fatalf("second replica: %v", err)
	}
	eventually(t, 3*waitTimeout, func() bool { return settled(a) }, "every ConfigMap back on the first replica after the second left")
	t.Logf("from the second replica's stop to the first caching every ConfigMap again: %v", time.Since(left).Round(time.Millisecond))
	write(last + 1)
	converged(last + 1)

	// A third replica joins, then loses its API access: it cannot renew
	// its Lease, so it stops reconciling, and once its Lease has expired
	// the coordinator buries it and commits an epoch without it; its keys
	// come back to the first replica, which never reconciles one while
	// the third still could.
	var offline atomic.Bool
	c, rc := shardedReplica{cfg: pcfg, ns: ns, name: "c", offline: &offline}.start(t, rec)
	eventually(t, 3*waitTimeout, func() bool { return settled(a, c) }, "the first and third replicas caching their shares")
	write(last + 2)
	converged(last + 2)
	lost := time.Now()
	offline.Store(true)
	eventually(t, 3*waitTimeout, func() bool { return settled(a) }, "every ConfigMap back on the first replica after the third lost its API access")
	t.Logf("from the third replica's loss of API access to the first caching every ConfigMap again (its 4s Lease included): %v", time.Since(lost).Round(time.Millisecond))
	l, err := pkube.CoordinationV1().Leases(ns).Get(t.Context(), shard.LeaseName("sharded", c.Member()), metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == c.Member() {
		t.Errorf("the third replica's Lease %v (%v): want it buried, held by someone else", l.Spec.HolderIdentity, err)
	}
	if err := rc.wait(t, waitTimeout); err == nil || !errors.Is(err, leader.ErrLeaseLost) {
		t.Errorf("the third replica's Run returned %v, want an error wrapping leader.ErrLeaseLost", err)
	}
	write(last + 3)
	converged(last + 3)
	if err := ra.stop(t); err != nil {
		t.Fatalf("first replica: %v", err)
	}
	if o := rec.overlaps(); len(o) > 0 {
		t.Errorf("%d overlapping Reconciles of one key by two replicas: %v", len(o), o)
	}
}
