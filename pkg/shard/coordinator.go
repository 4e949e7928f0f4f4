package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// CoordinatorOptions configure a Coordinator.
type ringCoordinatorOptions struct {
	// Ring names the ring.
	Ring string
	// Namespace holds the members' Leases and the ring's record.
	Namespace string
	// Kube watches the Leases and writes the record and burials.
	Kube kubernetes.Interface
	// Interval is how often liveness is judged again, for Leases that
	// expire without an event. 0 means 2s.
	Interval time.Duration
	// Clock is the clock Leases are judged by; nil means the real one.
	Clock clock.WithTicker
	// Logger receives a line for every change of the live members and of
	// the epochs, and errors.
	Logger logr.Logger
	// Observe, when set, is told of every change of the live members. It
	// must not block.
	Observe observer
}

// Coordinator moves a ring in the server-side mode from one epoch to the
// next as members come and go (Next): it proposes the live members as a
// Target epoch, and commits it once every member of the Committed epoch
// has acknowledged it or is gone, burying a member whose Lease expired
// (as the Sharder does) before counting it gone. One Coordinator runs per
// ring, on the replica that holds the sharder's Lease, and writes the
// ring's record (RecordName) through conditional updates, so a deposed
// Coordinator whose view lags cannot overwrite a newer record. Create it
// with NewCoordinator.
type ringCoordinator struct {
	opts    ringCoordinatorOptions
	members *Members
	leases  cache.SharedIndexInformer
	wake    chan struct{}
	// Only Start's goroutine uses these.
	live  []string // last reported
	wrote Epochs   // last written: a record older than it is the informer lagging
}

// NewCoordinator validates opts and returns a Coordinator.
func newRingCoordinator(opts ringCoordinatorOptions) (*ringCoordinator, error) {
	switch {
	case opts.Ring == "":
		return nil, errors.New("shard: CoordinatorOptions.Ring is empty: name the ring")
	case opts.Namespace == "":
		return nil, errors.New("shard: CoordinatorOptions.Namespace is empty: name the namespace of the members' Leases")
	case opts.Kube == nil:
		return nil, errors.New("shard: CoordinatorOptions.Kube is required")
	case opts.Interval < 0:
		return nil, fmt.Errorf("shard: CoordinatorOptions.Interval is %v: use 0 for 2s, or a positive period", opts.Interval)
	}
	if opts.Interval == 0 {
		opts.Interval = 2 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &ringCoordinator{opts: opts, members: NewMembers(opts.Ring, opts.Clock), wake: make(chan struct{}, 1)}, nil
}

// Start coordinates until ctx ends. It blocks. It runs an informer of the
// namespace's Leases (client-go's goroutines, joined before it returns)
// and takes every step on its own goroutine: on each change of a Lease
// and every Interval, which is also when a failed write is tried again.
func (c *ringCoordinator) Start(ctx context.Context) error {
	c.leases = informers.NewSharedInformerFactoryWithOptions(c.opts.Kube, 0, informers.WithNamespace(c.opts.Namespace)).
		Coordination().V1().Leases().Informer()
	if _, err := c.leases.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(obj, false) },
		UpdateFunc: func(_, obj any) { c.observe(obj, false) },
		DeleteFunc: func(obj any) { c.observe(obj, true) },
	}); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { c.leases.RunWithContext(runCtx) })
	if !cache.WaitForCacheSync(ctx.Done(), c.leases.HasSynced) {
		return nil
	}
	t := c.opts.Clock.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		if err := c.step(ctx); err != nil && ctx.Err() == nil {
			c.opts.Logger.V(1).Info("Could not move the ring to its next epoch; retrying", "ring", c.opts.Ring, "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
		case <-t.C():
		}
	}
}

// observe records a member Lease and wakes the loop; any other Lease of
// the namespace (the ring's record among them) only wakes it.
func (c *ringCoordinator) observe(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if l, ok := obj.(*coordinationv1.Lease); ok {
		if member, ok := c.members.Observe(l); ok && deleted {
			c.members.Forget(member)
		}
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *ringCoordinator) lease(name string) *coordinationv1.Lease {
	obj, ok, err := c.leases.GetStore().GetByKey(c.opts.Namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	l, _ := obj.(*coordinationv1.Lease)
	return l
}

// Acknowledged returns the epoch a member Lease acknowledges
// (AckAnnotation), 0 for none.
func ackedEpoch(l *coordinationv1.Lease) int64 {
	if l == nil {
		return 0
	}
	n, _ := strconv.ParseInt(l.Annotations[ackAnnotation], 10, 64)
	return n
}

// step takes one step of Next and writes its result.
func (c *ringCoordinator) step(ctx context.Context) error {
	live := c.members.Live()
	if !slices.Equal(live, c.live) {
		c.live = live
		c.opts.Logger.Info("Ring members changed", "ring", c.opts.Ring, "members", live)
		if c.opts.Observe != nil {
			c.opts.Observe.Members(live)
		}
	}
	rec := c.lease(RecordName(c.opts.Ring))
	if rec == nil {
		return fmt.Errorf("the ring's record, Lease %s/%s, is missing: every replica creates it when it starts", c.opts.Namespace, RecordName(c.opts.Ring))
	}
	e, err := ParseEpochs(rec.Annotations)
	if err != nil {
		return fmt.Errorf("the ring's record, Lease %s/%s: %w", c.opts.Namespace, rec.Name, err)
	}
	if c.wrote.Newer(e) {
		return nil // the informer has not delivered the last write yet: it wakes us when it does
	}
	var buryErr error
	next, ok := nextEpochs(e, live,
		func(m string) int64 { return ackedEpoch(c.lease(LeaseName(c.opts.Ring, m))) },
		func(m string) bool {
			if c.members.Alive(m) {
				return false
			}
			err := buryMember(ctx, c.opts.Kube, c.leases.GetStore(), c.opts.Namespace, c.opts.Ring, m, c.opts.Logger)
			buryErr = errors.Join(buryErr, err)
			return err == nil
		})
	if !ok {
		return buryErr
	}
	rec = rec.DeepCopy()
	if rec.Annotations == nil {
		rec.Annotations = make(map[string]string)
	}
	rec.Annotations[committedAnnotation] = next.Committed.String()
	rec.Annotations[targetAnnotation] = next.Target.String()
	if _, err := c.opts.Kube.CoordinationV1().Leases(c.opts.Namespace).Update(ctx, rec, metav1.UpdateOptions{FieldManager: sharderFieldManager}); err != nil {
		return fmt.Errorf("writing epochs %v: %w", next, err)
	}
	c.wrote = next
	if next.Committed.N == next.Target.N {
		c.opts.Logger.Info("Committed a ring epoch: its members own their shares", "ring", c.opts.Ring, "epoch", next.Committed.N, "members", next.Committed.Members)
	} else {
		c.opts.Logger.Info("Proposed a ring epoch: waiting for the members of the committed one to hand over", "ring", c.opts.Ring,
			"epoch", next.Target.N, "members", next.Target.Members, "committed", next.Committed.N)
	}
	return nil
}
