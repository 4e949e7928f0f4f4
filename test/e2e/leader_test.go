package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// Short leader-election timings keep the suite fast while keeping
// pkg/leader's rule LeaseDuration (whole seconds) ≥ 1.1 × (RenewDeadline +
// RetryPeriod): 2s ≥ 1.925s.
const (
	leaseDuration = 2 * time.Second
	renewDeadline = 1500 * time.Millisecond
	retryPeriod   = 250 * time.Millisecond
)

// interval is one Reconcile on one replica.
type interval struct {
	replica    string
	req        reconcile.Request
	start, end time.Time
}

// timeline records every Reconcile of every replica.
type timeline struct {
	mu    sync.Mutex
	calls []interval
}

func (tl *timeline) begin(replica string, req reconcile.Request) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.calls = append(tl.calls, interval{replica: replica, req: req, start: time.Now()})
	return len(tl.calls) - 1
}

func (tl *timeline) finish(i int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.calls[i].end = time.Now()
}

func (tl *timeline) snapshot() []interval {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]interval(nil), tl.calls...)
}

// byReplica counts reconciles per replica.
func (tl *timeline) byReplica() map[string]int {
	out := map[string]int{}
	for _, c := range tl.snapshot() {
		out[c.replica]++
	}
	return out
}

// firstStartAfter is the first Reconcile start by replica at or after t.
func (tl *timeline) firstStartAfter(replica string, t time.Time) (time.Time, bool) {
	for _, c := range tl.snapshot() {
		if c.replica == replica && !c.start.Before(t) {
			return c.start, true
		}
	}
	return time.Time{}, false
}

// checkNoOverlap fails if two replicas reconciled the same key at the same
// time, from the recorded timestamps. An unfinished interval counts as
// running until now.
func checkNoOverlap(t *testing.T, tl *timeline) {
	t.Helper()
	calls := tl.snapshot()
	byKey := map[reconcile.Request][]interval{}
	for _, c := range calls {
		if c.end.IsZero() {
			c.end = time.Now()
		}
		byKey[c.req] = append(byKey[c.req], c)
	}
	for k, cs := range byKey {
		sort.Slice(cs, func(i, j int) bool { return cs[i].start.Before(cs[j].start) })
		for i := 1; i < len(cs); i++ {
			if cs[i].replica != cs[i-1].replica && cs[i].start.Before(cs[i-1].end) {
				t.Errorf("%s reconciled by %s from %v and by %s from %v, overlapping (first ended %v)",
					k, cs[i-1].replica, cs[i-1].start.Format(time.StampMicro), cs[i].replica, cs[i].start.Format(time.StampMicro), cs[i-1].end.Format(time.StampMicro))
			}
		}
	}
	t.Logf("checked %d reconciles on %d keys: no two replicas overlapped on a key", len(calls), len(byKey))
}

// cutTransport fails every request once cut is set: a replica whose
// process hangs or whose network is gone, without releasing anything.
type cutTransport struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (c cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("e2e: this replica is cut off from the API server")
	}
	return c.rt.RoundTrip(r)
}

// replica is one manager of a leader-elected operator.
type replica struct {
	id     string
	mgr    *manager.Manager
	cms    *informer.Informer[*corev1.ConfigMap]
	run    *running
	cut    atomic.Bool
	called atomic.Int64
}

// newReplica builds a manager with its own client and identity whose
// controller records into tl. block, when not nil, is called inside every
// Reconcile (after recording its start).
func newReplica(t *testing.T, ns, lease, id string, tl *timeline, block func(ctx context.Context, req reconcile.Request)) *replica {
	t.Helper()
	return newReplicaWith(t, ns, lease, id, tl, block, false)
}

func newReplicaWith(t *testing.T, ns, lease, id string, tl *timeline, block func(ctx context.Context, req reconcile.Request), recampaign bool) *replica {
	t.Helper()
	r := &replica{id: id}
	c := rest.CopyConfig(cfg)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return cutTransport{rt: rt, cut: &r.cut} }
	c.QPS, c.Burst = -1, 0 // no client-side throttling: timings are the elector's
	r.mgr = newManager(t, c, ns, manager.Options{
		Logger: testLogger(t).WithValues("replica", id),
		LeaderElection: &leader.Options{
			Name: lease, Namespace: ns, Identity: id,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			ReleaseOnCancel: true,
		},
		OnLeaseLost:     map[bool]manager.LeaseLostPolicy{true: manager.RecampaignOnLeaseLost}[recampaign],
		ShutdownTimeout: 5 * time.Second,
	})
	var err error
	if r.cms, err = informer.For[*corev1.ConfigMap](r.mgr.Cache()); err != nil {
		t.Fatal(err)
	}
	_, err = r.mgr.AddController("leader-test", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		i := tl.begin(id, req)
		defer tl.finish(i)
		r.called.Add(1)
		if block != nil {
			block(ctx, req)
		}
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{Workers: 2}, manager.Watch{Source: r.cms})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// leaderOf returns the one replica that leads, failing if there are two.
func leaderOf(t *testing.T, rs []*replica) *replica {
	t.Helper()
	var out *replica
	for _, r := range rs {
		if r.run.returned() {
			continue
		}
		if r.mgr.Elector().IsLeader() {
			if out != nil {
				t.Fatalf("%s and %s both lead", out.id, r.id)
			}
			out = r
		}
	}
	return out
}

func TestLeaderElectionFailover(t *testing.T) {
	ns := newNamespace(t)
	const objects = 20
	for i := range objects {
		createConfigMap(t, ns, fmt.Sprintf("cm-%02d", i), map[string]string{"v": "0"}, nil)
	}
	tl := &timeline{}
	var rs []*replica
	for _, id := range []string{"r0", "r1", "r2"} {
		r := newReplica(t, ns, "failover", id, tl, nil)
		r.run = start(t, r.mgr)
		rs = append(rs, r)
	}

	// 1. Exactly one replica reconciles; the standbys have synced caches
	// and run no Reconcile.
	var first *replica
	eventually(t, waitTimeout, func() bool { first = leaderOf(t, rs); return first != nil }, "a leader")
	eventually(t, waitTimeout, func() bool { return first.called.Load() >= objects }, "the leader to reconcile all %d objects", objects)
	for _, r := range rs {
		eventually(t, waitTimeout, func() bool { return r.mgr.Ready() }, "%s to sync its caches", r.id)
		got, err := r.cms.Lister().ListInNamespace(ns, labels.Everything())
		if err != nil || len(got) != objects {
			t.Fatalf("%s lister holds %d objects (err %v), want %d: a standby's cache must be warm", r.id, len(got), err, objects)
		}
	}
	// A write after the leader is established reaches only the leader.
	createConfigMap(t, ns, "after-election", nil, nil)
	eventually(t, waitTimeout, func() bool { return tl.byReplica()[first.id] > objects }, "the leader to reconcile the new object")
	for _, r := range rs {
		if r != first && r.called.Load() != 0 {
			t.Fatalf("standby %s ran %d reconciles", r.id, r.called.Load())
		}
	}
	t.Logf("leader %s reconciled %d times; standbys none", first.id, first.called.Load())

	// 2. Graceful handover: the leader's ctx is cancelled and it releases
	// the lease before Run returns, so a standby need not wait for it to
	// expire.
	cancelled := time.Now()
	if err := first.run.stop(t); err != nil {
		t.Fatalf("leader's Run after graceful shutdown = %v, want nil", err)
	}
	lease, err := kube.CoordinationV1().Leases(ns).Get(t.Context(), "failover", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h == first.id {
		t.Fatalf("after %s's Run returned, the Lease still names it as holder: a graceful stop must release the Lease", first.id)
	}
	var second *replica
	eventually(t, waitTimeout, func() bool { second = leaderOf(t, rs); return second != nil }, "a new leader after the graceful stop")
	var took time.Time
	eventually(t, waitTimeout, func() bool {
		var ok bool
		took, ok = tl.firstStartAfter(second.id, cancelled)
		return ok
	}, "the new leader %s to reconcile", second.id)
	graceful := took.Sub(cancelled)
	t.Logf("FAILOVER graceful: %s cancelled -> %s reconciling: %v (RetryPeriod %v, LeaseDuration %v)", first.id, second.id, graceful.Round(time.Millisecond), retryPeriod, leaseDuration)
	eventually(t, waitTimeout, func() bool { return second.called.Load() >= objects+1 }, "the new leader to reconcile every object (replay on acquire)")

	// 3. Hard failure: the leader stops renewing without releasing. A
	// standby takes over once the lease expires.
	cutAt := time.Now()
	second.cut.Store(true)
	var third *replica
	eventually(t, 4*leaseDuration+waitTimeout, func() bool {
		for _, r := range rs {
			if r != first && r != second && !r.run.returned() && r.mgr.Elector().IsLeader() {
				third = r
				return true
			}
		}
		return false
	}, "the last standby to lead after the leader was cut off")
	eventually(t, waitTimeout, func() bool {
		var ok bool
		took, ok = tl.firstStartAfter(third.id, cutAt)
		return ok
	}, "the new leader %s to reconcile", third.id)
	hard := took.Sub(cutAt)
	t.Logf("FAILOVER hard: %s cut off -> %s reconciling: %v (LeaseDuration %v, RenewDeadline %v)", second.id, third.id, hard.Round(time.Millisecond), leaseDuration, renewDeadline)
	if hard < renewDeadline {
		t.Errorf("a standby led %v after the leader was cut off, before the leader could have given up (RenewDeadline %v)", hard, renewDeadline)
	}
	// The cut-off leader gives up: Run returns an error saying so.
	err = second.run.wait(t, waitTimeout)
	if !errors.Is(err, leader.ErrLeaseLost) {
		t.Fatalf("cut-off leader's Run = %v, want an error wrapping leader.ErrLeaseLost", err)
	}
	lostAt := second.run.at
	if start, ok := tl.firstStartAfter(second.id, lostAt); ok {
		t.Fatalf("cut-off replica started a Reconcile at %v, after its Run returned at %v", start, lostAt)
	}

	// 4. Across all of it, no two replicas ever reconciled the same key at
	// the same time.
	checkNoOverlap(t, tl)
}

// A Reconcile that ignores its ctx must not hold up the handling of a lost
// lease: no new Reconcile starts, and Run returns within RenewDeadline of
// the loss even though the stuck Reconcile never returns.
func TestLeaseLossWithStuckReconcile(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "stuck", nil, nil)
	createConfigMap(t, ns, "other", nil, nil)
	tl := &timeline{}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	entered := make(chan struct{}, 1)
	r := newReplica(t, ns, "stuck", "only", tl, func(_ context.Context, req reconcile.Request) {
		if req.Name == "stuck" {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release // ignores ctx on purpose
		}
	})
	r.run = start(t, r.mgr)
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatal("the stuck Reconcile never started")
	}
	eventually(t, waitTimeout, func() bool { return r.called.Load() == 2 }, "both objects to be in Reconcile")
	// Watch for the moment the replica knows it lost the lease.
	var lostAt atomic.Pointer[time.Time]
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		tick := time.NewTicker(time.Millisecond) // sampling rate of the flag
		defer tick.Stop()
		for ; !r.run.returned(); <-tick.C {
			if !r.mgr.Elector().IsLeader() {
				now := time.Now()
				lostAt.Store(&now)
				return
			}
		}
	}()
	cutAt := time.Now()
	r.cut.Store(true)
	err := r.run.wait(t, renewDeadline+leaseDuration+waitTimeout)
	<-watchDone
	if !errors.Is(err, leader.ErrLeaseLost) {
		t.Fatalf("Run = %v, want an error wrapping leader.ErrLeaseLost", err)
	}
	lost := lostAt.Load()
	if lost == nil {
		t.Fatal("the replica never observed that it lost the lease")
	}
	handled := r.run.at.Sub(*lost)
	t.Logf("lease loss with a stuck Reconcile: loss observed %v after the cut, Run returned %v after that (RenewDeadline %v)",
		lost.Sub(cutAt).Round(time.Millisecond), handled.Round(time.Millisecond), renewDeadline)
	if handled > renewDeadline {
		t.Errorf("Run returned %v after the loss was observed; the stuck Reconcile held up loss handling past RenewDeadline (%v)", handled, renewDeadline)
	}
	if start, ok := tl.firstStartAfter("only", *lost); ok {
		t.Errorf("a Reconcile started at %v, after the loss was observed at %v", start, *lost)
	}
}

func TestLeaderElectionInvalidOptions(t *testing.T) {
	_, err := manager.New(cfg, manager.Options{LeaderElection: &leader.Options{
		Name: "x", Namespace: "default", LeaseDuration: time.Second, RenewDeadline: 2 * time.Second,
	}})
	wantErr(t, err, "Options.LeaderElection", "LeaseDuration (1s) must be greater than Options.RenewDeadline (2s)")
	_, err = manager.New(cfg, manager.Options{LeaderElection: &leader.Options{Name: "x"}})
	wantErr(t, err, "Options.Namespace is empty")
}

// With RecampaignOnLeaseLost, a replica that lost the lease keeps running, campaigns
// again with its warm caches, and reconciles again once it leads.
func TestLeaseLossRecampaign(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "a", nil, nil)
	tl := &timeline{}
	r := newReplicaWith(t, ns, "recampaign", "phoenix", tl, nil, true)
	r.run = start(t, r.mgr)
	eventually(t, waitTimeout, func() bool { return r.called.Load() >= 1 }, "the first reconcile")
	r.cut.Store(true)
	eventually(t, 2*leaseDuration+waitTimeout, func() bool { return !r.mgr.Elector().IsLeader() }, "the cut-off replica to give up leading")
	if r.run.returned() {
		t.Fatalf("Run returned %v after a loss with RecampaignOnLeaseLost; want it to keep running", r.run.err)
	}
	healed := time.Now()
	r.cut.Store(false)
	eventually(t, 2*leaseDuration+waitTimeout, func() bool { _, ok := tl.firstStartAfter("phoenix", healed); return ok },
		"the replica to lead and reconcile again after the cut healed")
	took, _ := tl.firstStartAfter("phoenix", healed)
	t.Logf("re-campaign: reconciling again %v after the cut healed", took.Sub(healed).Round(time.Millisecond))
}
