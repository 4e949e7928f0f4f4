package manager

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// follower is a member's part of the server-side mode (package shard's
// epochs): it reads the ring's record and, for each newer state of it,
//
//  1. stores the new shard.View, which the sharded controllers' Owns
//     consults before each Reconcile;
//  2. for each key of a cached object that the new view no longer
//     permits, excludes it from its controller and waits for the
//     Reconciles of it that were running; enqueues the keys it permits
//     that the old view did not;
//  3. when the committed epoch moved, sets the shard scope to the new
//     ranges (the sharded informers list again, and switch);
//  4. acknowledges the target epoch in this member's Lease, through the
//     member term's fenced client: the coordinator commits once every
//     member of the committed epoch has.
//
// It runs in the member term; run returns when the term ends, without
// acknowledging what it has not drained.
type follower struct {
	s     *sharding
	m     *Manager
	ctrls []*controller // the sharded controllers
	wake  chan struct{}

	mu     sync.Mutex
	latest *shard.Epochs // the newest record seen; nil before the first
	acked  int64         // only run's goroutine uses it
}

func newFollower(s *sharding, m *Manager, ctrls []*controller) *follower {
	return &follower{s: s, m: m, ctrls: ctrls, wake: make(chan struct{}, 1)}
}

// run follows the ring's record until ctx, the member term's, ends. It
// runs an informer of the record (client-go's goroutines, joined before
// it returns) and does everything else on its own goroutine.
func (f *follower) run(ctx context.Context) error {
	namespace, name := f.s.members.Options().Namespace, shard.RecordName(f.s.ring)
	inf := informers.NewSharedInformerFactoryWithOptions(f.m.kube, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name })).
		Coordination().V1().Leases().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    f.note,
		UpdateFunc: func(_, obj any) { f.note(obj) },
	}); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { inf.RunWithContext(runCtx) })
	retry := time.NewTimer(time.Second) // an acknowledgement's retry
	retry.Stop()
	defer retry.Stop()
	for {
		f.mu.Lock()
		latest := f.latest
		f.mu.Unlock()
		if latest != nil && latest.Newer(f.s.view.Load().Epochs) {
			if !f.apply(ctx, *latest) {
				return nil
			}
		}
		var retrying <-chan time.Time
		if n := f.s.view.Load().Target.N; n > f.acked {
			if err := f.ack(ctx, n); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				f.m.log.Error(err, "Could not acknowledge a ring epoch; retrying", "ring", f.s.ring, "member", f.s.member, "epoch", n)
				retry.Reset(time.Second)
				retrying = retry.C
			} else {
				f.acked = n
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake:
		case <-retrying:
		}
	}
}

// note records the ring's record, if newer, and wakes run.
func (f *follower) note(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	e, err := shard.ParseEpochs(l.Annotations)
	if err != nil {
		f.m.log.Error(err, "The ring's record is unreadable", "ring", f.s.ring, "lease", l.Namespace+"/"+l.Name)
		return
	}
	f.mu.Lock()
	if f.latest == nil || e.Newer(*f.latest) {
		f.latest = &e
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// apply moves this member to the view of e: steps 1 to 3 of the type's
// doc. It returns false if ctx ended before the keys it lost were drained.
func (f *follower) apply(ctx context.Context, e shard.Epochs) bool {
	old, v := f.s.view.Load(), shard.NewView(e)
	f.s.view.Store(v)
	seen := time.Now()
	me := f.s.member
	handed := 0
	for _, c := range f.ctrls {
		var lost []reconcile.Request
		for _, obj := range c.drainer.primary.List() {
			o, err := meta.Accessor(obj)
			if err != nil {
				continue
			}
			h := shard.ServerHash(f.s.key.Of(o))
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}
			switch was, is := old.Permits(me, h), v.Permits(me, h); {
			case was && !is:
				lost = append(lost, req)
			case is && !was:
				c.ctrl.Enqueue(req)
			}
		}
		if !f.drain(ctx, c, lost, seen) {
			return false
		}
		handed += len(lost)
	}
	if e.Committed.N > old.Committed.N {
		if err := f.s.scope.Set("", shard.Selector(f.s.key, v.Ranges(me))); err != nil {
			f.m.log.Error(err, "Could not narrow the sharded informers to the new ranges", "ring", f.s.ring)
		}
		f.s.metrics.epoch.Set(float64(e.Committed.N))
	}
	f.m.log.Info("Following a ring epoch", "ring", f.s.ring, "member", me, "committed", e.Committed.N, "target", e.Target.N,
		"members", e.Target.Members, "keysHandedOver", handed, "duration", time.Since(seen))
	return true
}

// drain excludes the keys c lost and waits until none of them is being
// reconciled; false if ctx ended first. Owns refuses them from the moment
// the new view was stored; Exclude catches the Reconciles that began
// before.
func (f *follower) drain(ctx context.Context, c *controller, lost []reconcile.Request, seen time.Time) bool {
	idle := make([]<-chan struct{}, len(lost))
	for i, req := range lost {
		idle[i] = c.ctrl.Exclude(req)
	}
	defer func() {
		for _, req := range lost {
			c.ctrl.Include(req) // Owns refuses them from now on
		}
	}()
	for i := range lost {
		select {
		case <-idle[i]:
		case <-ctx.Done():
			return false
		}
		f.s.metrics.handovers.WithLabelValues(c.ctrl.Name()).Inc()
		f.s.metrics.handoverSeconds.WithLabelValues(c.ctrl.Name()).Observe(time.Since(seen).Seconds())
	}
	return true
}

// ack writes n into this member's Lease (shard.AckAnnotation), on the
// condition that this member still holds it (a JSON patch test), through
// the fenced client with ctx, the member term's.
func (f *follower) ack(ctx context.Context, n int64) error {
	leases := f.m.kube.CoordinationV1().Leases(f.s.members.Options().Namespace)
	name := shard.LeaseName(f.s.ring, f.s.member)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ops := []map[string]any{{"op": "test", "path": "/spec/holderIdentity", "value": f.s.member}}
	if l.Annotations == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{shard.AckAnnotation: strconv.FormatInt(n, 10)}})
	} else {
		esc := strings.NewReplacer("~", "~0", "/", "~1").Replace // JSON pointer
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + esc(shard.AckAnnotation), "value": strconv.FormatInt(n, 10)})
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = leases.Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: f.m.opts.Name})
	return err
}
