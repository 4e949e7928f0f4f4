//go:build linux

package ha

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// shardConfig makes a replica a member of a sharding ring
// (manager.Options.Sharding) whose sharded controller is the probe.
type shardConfig struct {
	// Ring names the ring: one per scenario, so that the labels of one
	// scenario's ring mean nothing to the next one's.
	Ring string
	// Work is how long each Reconcile that has a write to make works
	// between reading its object and writing it, as a Reconcile that calls
	// something slow would: it gives an overlap room to show.
	Work time.Duration
	// QPS and Burst of the replica's client, which the probe's writes, the
	// sharder's labels and the acknowledgements share.
	QPS   float32
	Burst int
	// Mutations, by replica name, break the protocol on purpose, so that
	// TestShardMutations can show that each judge catches its breach.
	Mutations map[string][]string `json:",omitempty"`
}

// Mutations of a sharded replica.
const (
	// mutateAckEarly: the replica acknowledges every drain of its keys the
	// moment it sees it, without waiting for its Reconcile of the key to
	// return (the wait the drainer's Exclude gives): the overlap judge and
	// the non-owner write judge must catch it.
	mutateAckEarly = "ack-early"
	// mutateStale: when a key leaves the replica (its object leaves the
	// replica's label selector), the replica reconciles it once more,
	// bypassing the controller's ownership check: the non-owner start judge
	// must catch it.
	mutateStale = "stale"
	// mutateRefuse: the replica's Reconciles return at once without
	// writing, so the keys it owns are never brought up to date: the lost
	// judge must catch it.
	mutateRefuse = "refuse"
)

// kindMember is a sharded replica's first record: its member name in the
// ring (Result), which is the value of the shard label on its objects.
const kindMember = "member"

// shardProbe is the probe as a sharded controller: it reads its object
// from the cache and, unless its observed annotation is its gen already,
// works for Work and writes the object it read with the annotation set to
// its gen (an update conditional on the resourceVersion read). Reading before the work and writing after it is
// what makes a Reconcile that outlives its ownership visible: its write
// goes out after the handover.
type shardProbe struct {
	*probe
	work   time.Duration
	refuse bool
}

func (p *shardProbe) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	id := p.seq.Add(1)
	p.rec.add(record{Kind: kindStart, ID: id, Key: req.Name, Result: startResult(ctx)})
	res, gen, err := p.update(ctx, req.Name)
	p.rec.add(record{Kind: kindEnd, ID: id, Key: req.Name, Result: res, Gen: gen, Err: errString(err)})
	return reconcile.Result{}, err
}

func (p *shardProbe) update(ctx context.Context, name string) (result, gen string, err error) {
	cached, err := p.lister.Get(p.ns, name)
	if apierrors.IsNotFound(err) {
		return "gone", "", nil
	} else if err != nil {
		return "error", "", err
	}
	cm := cached.DeepCopy() // cached objects are shared: never mutate them
	gen = cm.Data[genKey]
	if cm.Annotations[observedKey] == gen {
		return "unchanged", gen, nil
	}
	if p.refuse {
		return "refused", gen, nil
	}
	if p.work > 0 {
		t := time.NewTimer(p.work) // the Reconcile's work, not a wait for a condition
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "aborted", gen, ctx.Err()
		}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[observedKey] = gen
	if err := p.c.Update(ctx, cm); err != nil {
		return "error", gen, err
	}
	return "updated", gen, nil
}

// shardReplicaMain runs the sharded replica name until SIGTERM or until
// Run fails (as it does when the replica loses its member Lease), and
// returns the exit code.
func shardReplicaMain(name string, c replicaConfig, rc *rest.Config, rec *recorder, log logr.Logger) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "ha replica %s: %v\n", name, err)
		return 2
	}
	sc := c.Shard
	rc.QPS, rc.Burst = sc.QPS, sc.Burst
	mgr, err := manager.New(rc, manager.Options{
		Name:      "ha-shard",
		Informers: informer.Options{Namespaces: []string{c.Namespace}},
		Logger:    log,
		Sharding: &shard.Options{
			Ring: sc.Ring, Namespace: c.Namespace, Identity: name,
			Controllers:   []string{"probe"},
			Primary:       []runtime.Object{&corev1.ConfigMap{}},
			LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod,
		},
	})
	if err != nil {
		return fail(err)
	}
	member := mgr.Member()
	rec.add(record{Kind: kindMember, Result: member})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache(), mgr.ShardScope())
	if err != nil {
		return fail(err)
	}
	mutations := sc.Mutations[name]
	p := &shardProbe{probe: &probe{ns: c.Namespace, lister: cms.Lister(), c: mgr.Client(), rec: rec},
		work: sc.Work, refuse: slices.Contains(mutations, mutateRefuse)}
	if _, err := mgr.AddController("probe", p, manager.ControllerOptions{Workers: c.Workers}, manager.Watch{Source: cms}); err != nil {
		return fail(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	sideCtx, stopSide := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { pollReady(sideCtx, mgr, rec) })
	if slices.Contains(mutations, mutateAckEarly) || slices.Contains(mutations, mutateStale) {
		r := rogue{ns: c.Namespace, ring: sc.Ring, member: member, p: p, log: log,
			ackEarly: slices.Contains(mutations, mutateAckEarly), stale: slices.Contains(mutations, mutateStale)}
		wg.Go(func() {
			if err := r.run(sideCtx, rc); err != nil {
				log.Error(err, "The mutation could not run")
			}
		})
	}
	err = mgr.Run(ctx)
	stopSide()
	wg.Wait()
	rec.add(record{Kind: kindExit, Err: errString(err)})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "ha replica %s: Run: %v\n", name, err)
		return 3
	}
	return 0
}

// pollReady records when the caches first synced, sampled every
// millisecond, until ctx ends.
func pollReady(ctx context.Context, mgr *manager.Manager, rec *recorder) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !mgr.Ready() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	rec.add(record{Kind: kindReady})
}

// rogue breaks the protocol as the replica's mutations ask, from outside
// the manager: an informer of its own over the replica's share, and
// clients no fence guards.
type rogue struct {
	ns, ring, member string
	p                *shardProbe
	log              logr.Logger
	ackEarly, stale  bool
}

// run blocks until ctx ends.
func (r rogue) run(ctx context.Context, rc *rest.Config) error {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return err
	}
	selector := shard.ShardLabel(r.ring) + "=" + r.member
	inf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(r.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector })).Core().V1().ConfigMaps().Informer()
	var wg sync.WaitGroup
	defer wg.Wait()
	var h cache.ResourceEventHandlerFuncs
	if r.ackEarly {
		ack := func(obj any) {
			cm, ok := obj.(*corev1.ConfigMap)
			if !ok || cm.Labels[shard.DrainLabel(r.ring)] == "" || ctx.Err() != nil {
				return
			}
			wg.Go(func() {
				err := shard.Acknowledge(ctx, md, corev1.SchemeGroupVersion.WithResource("configmaps"), cm.Namespace, cm.Name, r.ring, r.member, "ha-rogue")
				if err != nil {
					r.log.Info("Early acknowledgement failed", "name", cm.Name, "err", err.Error())
				}
			})
		}
		h.AddFunc, h.UpdateFunc = ack, func(_, obj any) { ack(obj) }
	}
	if r.stale {
		h.DeleteFunc = func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			cm, ok := obj.(*corev1.ConfigMap)
			if !ok || ctx.Err() != nil {
				return
			}
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}}
			wg.Go(func() { _, _ = r.p.Reconcile(ctx, req) })
		}
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		return err
	}
	inf.RunWithContext(ctx)
	return nil
}
