package shard

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
)

// follower is a member's part of the server-side mode (package shard's
// epochs): it reads the ring's record and, for each newer state of it,
//
//  1. stores the new View, which the sharded controllers' Owns
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
	r     *Replica
	ctrls []*shardedController
	wake  chan struct{}

	mu     sync.Mutex
	latest *Epochs // the newest record seen; nil before the first
	acked  int64   // only run's goroutine uses it
}

func newFollower(r *Replica, ctrls []*shardedController) *follower {
	return &follower{r: r, ctrls: ctrls, wake: make(chan struct{}, 1)}
}

// run follows the ring's record until ctx, the member term's, ends. It
// runs an informer of the record (client-go's goroutines, joined before
// it returns) and does everything else on its own goroutine.
func (f *follower) run(ctx context.Context) error {
	namespace, name := f.r.members.Options().Namespace, RecordName(f.r.ring)
	inf := informers.NewSharedInformerFactoryWithOptions(f.r.env.Kube, 0, informers.WithNamespace(namespace),
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
		if latest != nil && latest.Newer(f.r.view.Load().Epochs) {
			if !f.apply(ctx, *latest) {
				return nil
			}
		}
		var retrying <-chan time.Time
		if n := f.r.view.Load().Target.N; n > f.acked {
			if err := f.ack(ctx, n); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				f.r.log.Error(err, "Could not acknowledge a ring epoch; retrying", "ring", f.r.ring, "member", f.r.member, "epoch", n)
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
	e, err := ParseEpochs(l.Annotations)
	if err != nil {
		f.r.log.Error(err, "The ring's record is unreadable", "ring", f.r.ring, "lease", l.Namespace+"/"+l.Name)
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
func (f *follower) apply(ctx context.Context, e Epochs) bool {
	old, v := f.r.view.Load(), newEpochView(e)
	f.r.view.Store(v)
	seen := time.Now()
	me := f.r.member
	handed := 0
	for _, c := range f.ctrls {
		var lost []reconcile.Request
		for _, obj := range c.drainer.primary.List() {
			o, err := meta.Accessor(obj)
			if err != nil {
				continue
			}
			h := ServerHash(f.r.key.Of(o))
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
		if err := f.r.scope.Set("", Selector(f.r.key, v.Ranges(me))); err != nil {
			f.r.log.Error(err, "Could not narrow the sharded informers to the new ranges", "ring", f.r.ring)
		}
		f.r.metrics.epoch.Set(float64(e.Committed.N))
	}
	f.r.log.Info("Following a ring epoch", "ring", f.r.ring, "member", me, "committed", e.Committed.N, "target", e.Target.N,
		"members", e.Target.Members, "keysHandedOver", handed, "duration", time.Since(seen))
	return true
}

// drain excludes the keys c lost and waits until none of them is being
// reconciled; false if ctx ended first. Owns refuses them from the moment
// the new view was stored; Exclude catches the Reconciles that began
// before.
func (f *follower) drain(ctx context.Context, c *shardedController, lost []reconcile.Request, seen time.Time) bool {
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
		f.r.metrics.handovers.WithLabelValues(c.ctrl.Name()).Inc()
		f.r.metrics.handoverSeconds.WithLabelValues(c.ctrl.Name()).Observe(time.Since(seen).Seconds())
	}
	return true
}

// ack writes n into this member's Lease (AckAnnotation), on the
// condition that this member still holds it (a JSON patch test), through
// the fenced client with ctx, the member term's.
func (f *follower) ack(ctx context.Context, n int64) error {
	leases := f.r.env.Kube.CoordinationV1().Leases(f.r.members.Options().Namespace)
	name := LeaseName(f.r.ring, f.r.member)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ops := []map[string]any{{"op": "test", "path": "/spec/holderIdentity", "value": f.r.member}}
	if l.Annotations == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{ackAnnotation: strconv.FormatInt(n, 10)}})
	} else {
		esc := strings.NewReplacer("~", "~0", "/", "~1").Replace // JSON pointer
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + esc(ackAnnotation), "value": strconv.FormatInt(n, 10)})
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = leases.Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: f.r.env.FieldManager})
	return err
}
