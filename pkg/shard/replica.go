package shard

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// Options split the objects of chosen controllers among the
// replicas that run the same manager: each replica reconciles, and
// caches, only its share, and a key moves from one replica to another
// only after the first stopped reconciling it. The informers declared in
// Manager.ShardScope are narrowed to the replica's share, either by a
// label the replicas maintain or by the API server's hash ranges (Mode);
// every other informer sees every object. The protocols are in
// docs/sharding.md.
type Options struct {
	// Ring names the replicas that share the objects. Empty means
	// the manager's name.
	Ring string
	// Namespace holds the replicas' Leases. Empty means the pod's own
	// namespace (from its service account); outside a cluster it must be
	// set.
	Namespace string
	// Identity begins this replica's member name, to which a random
	// suffix is added for each process. Empty means the hostname.
	Identity string
	// Controllers names the sharded controllers. Each must watch its
	// primary type once with no Map (informer.ObjectKey), through an
	// informer declared in Manager.ShardScope, and reconcile keys of that
	// type; its watches and reads of the Primary and Children types must
	// be declared there too. They are fixed at Run: AddController refuses
	// one while Run runs, and RemoveController too.
	Controllers []string
	// Primary are example objects of the sharded controllers' primary
	// types, such as &v1alpha1.Website{}: each is assigned by its own
	// namespace/name. Required.
	Primary []runtime.Object
	// Children are example objects of the types the sharded controllers
	// own, such as &appsv1.Deployment{}: each lives with its controlling
	// owner. Their informers declared in Manager.ShardScope, like the
	// primaries', cache only this replica's share.
	Children []runtime.Object
	// Mode is how the replicas' informers are narrowed to their shares
	// and keys move: ModeAuto (the zero value), ModeLabels or
	// ModeServer. The ring's first replica decides for the ring (see
	// Manager.Run's log line "Sharding mode").
	Mode Mode
	// ServerKey is what the API server hashes in the server-side mode:
	// KeyUID (empty means it), which spreads objects evenly but
	// cannot keep Children with their owner, or KeyNamespace, which
	// puts each namespace on one replica.
	ServerKey Key
	// LeaseDuration, RenewDeadline and RetryPeriod time the Leases, as in
	// leader.Options; zero means its defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Env is what a Replica reads and writes through, given by the manager
// that runs it.
type Env struct {
	// Kube writes the member's acknowledgements and reads the ring's
	// record and Leases; Metadata writes the label mode's labels. Both
	// should be fenced (leader.FenceConfig): each term's writes end with it.
	Kube     kubernetes.Interface
	Metadata metadata.Interface
	// Dynamic asks the API server whether it honours shardSelector.
	Dynamic dynamic.Interface
	// Mapper and Scheme map Options.Primary and Children to resources.
	Mapper meta.RESTMapper
	Scheme *runtime.Scheme
	// Namespaces returns the namespaces the cache holds of obj's type
	// (none: all). The sharder labels those only.
	Namespaces func(obj runtime.Object) []string
	// FieldManager names the Replica's writes.
	FieldManager string
	Logger       logr.Logger
	// NewElector builds the member and sharder Electors.
	NewElector func(leader.Options) (*leader.Elector, error)
}

// Replica is one replica's part of a ring: its member Lease and the
// sharded controllers it runs while it holds it, the drainer (label mode)
// or follower (server-side mode) that hands keys over, and, while it
// holds the ring's sharder Lease, the Sharder or Coordinator. A manager
// with Options.Sharding builds and runs one; its methods are the hooks
// the manager calls.
type Replica struct {
	opts    Options
	env     Env
	log     logr.Logger
	ring    string
	member  string
	members *leader.Elector // this replica's member Lease
	sharder *leader.Elector // the ring's sharder Lease (the coordinator's, in the server-side mode)
	metrics *metrics
	// scope narrows the sharded controllers' informers (those declared
	// in it) to this member's share, once Resolve has chosen the mode.
	scope *informer.Scope

	mu    sync.Mutex
	ctrls []*shardedController

	// Set by Resolve, before the informers and controllers start, and not
	// changed after.
	mode          string // recordLabels or recordServer
	key           Key
	resources     []Resource
	clusterScoped bool // a sharded resource is
	// view is this member's reading of the ring's epochs, in the
	// server-side mode: what Owns permits.
	view atomic.Pointer[epochView]
}

// shardedController is a sharded controller of the Replica.
type shardedController struct {
	ctrl    *reconcile.Controller
	uses    []informer.Source
	drainer *drainer
}

// NewReplica validates o and builds the Replica of ring (o.Ring, or the
// manager's name when empty), with a member name new for this process.
func NewReplica(ring string, o Options, env Env) (*Replica, error) {
	switch {
	case len(o.Controllers) == 0:
		return nil, errors.New("shard: Options.Controllers is empty: name the controllers whose objects the replicas share")
	case len(o.Primary) == 0:
		return nil, errors.New("shard: Options.Primary is empty: give an example object of each sharded controller's primary type, e.g. &v1alpha1.Website{}")
	case env.Kube == nil || env.Metadata == nil || env.Dynamic == nil || env.Mapper == nil || env.Scheme == nil || env.NewElector == nil:
		return nil, errors.New("shard: Env.Kube, Metadata, Dynamic, Mapper, Scheme and NewElector are required")
	}
	if err := o.validateMode(); err != nil {
		return nil, err
	}
	for _, obj := range slices.Concat(o.Primary, o.Children) {
		if _, ok := obj.(metav1.Object); !ok {
			return nil, fmt.Errorf("shard: Options: %T is not an API object: give example objects such as &appsv1.Deployment{}", obj)
		}
	}
	if o.Ring != "" {
		ring = o.Ring
	}
	r := &Replica{opts: o, env: env, log: env.Logger, ring: ring, member: newMember(o.Identity),
		scope: informer.NewScope("shard ring " + ring)}
	r.metrics = newMetrics(r)
	timing := func(name string) leader.Options {
		return leader.Options{Name: name, Namespace: o.Namespace, Identity: r.member,
			LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
			ReleaseOnCancel: true, Logger: r.log}
	}
	var err error
	if r.members, err = env.NewElector(timing(LeaseName(ring, r.member))); err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	if r.sharder, err = env.NewElector(timing(ring + "-sharder")); err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	return r, nil
}

// Member is this replica's member name in the ring, new for every process.
func (r *Replica) Member() string { return r.member }

// Scope is the Scope in which to declare the sharded controllers'
// informers.
func (r *Replica) Scope() *informer.Scope { return r.scope }

// Collector is the ctrlkit_shard_* metrics.
func (r *Replica) Collector() prometheus.Collector { return r.metrics }

// Labels are the labels an object created by a sharded controller should
// carry so that it lands in this replica's cache at once, rather than
// after the sharder has labelled it; nil in the server-side mode, where
// an object lands by its hash.
func (r *Replica) Labels() map[string]string {
	if r.mode == recordServer {
		return nil
	}
	return map[string]string{ShardLabel(r.ring): r.member}
}

// Sharded reports whether the controller named name is sharded.
func (r *Replica) Sharded(name string) bool { return slices.Contains(r.opts.Controllers, name) }

// Primary returns the source of a sharded controller's primary watch,
// among the sources of its watches without a Map; it fails unless there is
// exactly one, declared in the Replica's Scope.
func (r *Replica) Primary(name string, unmapped []informer.Source) (informer.Source, error) {
	switch {
	case len(unmapped) == 0:
		return nil, fmt.Errorf("shard: sharded controller %q has no watch without a Map: watch its primary type with informer.ObjectKey", name)
	case len(unmapped) > 1:
		return nil, fmt.Errorf("shard: sharded controller %q watches %s and %s with no Map: a sharded controller watches its primary type once with informer.ObjectKey, and the others through a Map to that type",
			name, unmapped[0].Name(), unmapped[1].Name())
	case unmapped[0].Scope() != r.scope:
		return nil, fmt.Errorf("shard: sharded controller %q watches %s, which is not in the shard scope: declare it with informer.For[T](mgr.Cache(), mgr.ShardScope()), "+
			"so that it caches this replica's share only", name, unmapped[0].Name())
	}
	return unmapped[0], nil
}

// Owns is a sharded controller's reconcile.Options.Owns: the key's primary
// object is in this replica's cache and, in the label mode, labelled for
// it and not draining; in the server-side mode, its hash is permitted by
// this member's view of the epochs.
func (r *Replica) Owns(primary informer.Source) func(reconcile.Request) bool {
	shardLabel, drainLabel := ShardLabel(r.ring), DrainLabel(r.ring)
	return func(req reconcile.Request) bool {
		obj, ok := primary.Cached(req.Namespace, req.Name)
		if !ok {
			return false
		}
		if r.mode == recordServer {
			v := r.view.Load()
			return v != nil && v.Permits(r.member, ServerHash(r.key.Of(obj)))
		}
		l := obj.GetLabels()
		return l[shardLabel] == r.member && l[drainLabel] == ""
	}
}

// Add registers ctrl, a sharded controller whose primary watch is primary
// (see Primary) and which uses the informers uses: the Replica hands its
// keys over. It returns the registration of its handler on primary.
func (r *Replica) Add(ctrl *reconcile.Controller, primary informer.Source, uses []informer.Source) (*informer.Registration, error) {
	c := &shardedController{ctrl: ctrl, uses: uses, drainer: newDrainer(r, ctrl, primary)}
	reg, err := primary.AddEventHandler(c.drainer.handler())
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.ctrls = append(r.ctrls, c)
	r.mu.Unlock()
	return reg, nil
}

// Remove forgets ctrl, once it no longer runs.
func (r *Replica) Remove(ctrl *reconcile.Controller) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctrls = slices.DeleteFunc(r.ctrls, func(c *shardedController) bool { return c.ctrl == ctrl })
}

func (r *Replica) controllers() []*shardedController {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ctrls)
}

// RunMember holds this replica's member Lease until ctx ends, and during
// each term calls run with the term's ctx and the tasks (drainers or the
// follower) that must run beside the sharded controllers: run starts
// those controllers and the tasks, and returns once all have. When the
// Lease is lost, the term's ctx ends with a cause that wraps
// reconcile.ErrAborted and leader.ErrLeaseLost.
func (r *Replica) RunMember(ctx context.Context, run func(ctx context.Context, cancel context.CancelCauseFunc, tasks map[string]func(context.Context) error) error) error {
	err := r.members.Run(ctx, func(leadCtx context.Context) error {
		r.log.Info("Joined the sharding ring", "ring", r.ring, "member", r.member, "mode", r.mode)
		ctrls := r.controllers()
		tasks := make(map[string]func(context.Context) error)
		if r.mode == recordServer {
			tasks["ring epochs"] = newFollower(r, ctrls).run
		} else {
			for _, c := range ctrls {
				tasks["drainer of "+c.ctrl.Name()] = c.drainer.run
			}
		}
		ctx, cancel := context.WithCancelCause(context.WithoutCancel(leadCtx))
		defer cancel(nil)
		stop := context.AfterFunc(leadCtx, func() {
			cause := context.Cause(leadCtx)
			if errors.Is(cause, leader.ErrLeaseLost) {
				cause = fmt.Errorf("%w: %w", reconcile.ErrAborted, cause)
			}
			cancel(cause)
		})
		defer stop()
		return run(ctx, cancel, tasks)
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("shard: member %s: %w", r.member, err)
	}
	return nil
}

// RunSharder campaigns for the ring's sharder Lease until ctx ends, and
// while it holds it runs the ring's Sharder (label mode) or Coordinator
// (server-side mode).
func (r *Replica) RunSharder(ctx context.Context) error {
	for ctx.Err() == nil {
		err := r.sharder.Run(ctx, func(leadCtx context.Context) error {
			if r.mode == recordServer {
				c, err := newRingCoordinator(ringCoordinatorOptions{Ring: r.ring, Namespace: r.sharder.Options().Namespace,
					Kube: r.env.Kube, Interval: r.sharder.Options().RetryPeriod, Logger: r.log, Observe: r.metrics})
				if err != nil {
					return err
				}
				r.log.Info("Running the ring's coordinator", "ring", r.ring, "member", r.member)
				return c.Start(leadCtx)
			}
			sh, err := newLabelSharder(labelSharderOptions{Ring: r.ring, Namespace: r.sharder.Options().Namespace,
				Kube: r.env.Kube, Metadata: r.env.Metadata, Resources: r.resources, Interval: r.sharder.Options().RetryPeriod, Logger: r.log,
				Observe: r.metrics})
			if err != nil {
				return err
			}
			r.log.Info("Running the sharder", "ring", r.ring, "member", r.member)
			return sh.Start(leadCtx)
		})
		if err != nil && !errors.Is(err, leader.ErrLeaseLost) {
			return fmt.Errorf("shard: sharder: %w", err)
		}
	}
	return nil
}

// newMember returns identity (the hostname when empty) with a random
// suffix: a new member name for every process.
func newMember(identity string) string {
	if identity == "" {
		identity, _ = os.Hostname()
	}
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return strings.ToLower(identity) + "-" + string(b)
}

// drainer hands over the keys the sharder drains: it excludes the key
// from the controller, waits for its last Reconcile to return, and
// acknowledges by removing the labels, through the member term's fenced
// context.
type drainer struct {
	r       *Replica
	ctrl    *reconcile.Controller
	primary informer.Source

	mu      sync.Mutex
	pending map[reconcile.Request]time.Time // when the drain was seen
	busy    map[reconcile.Request]bool      // being handed over now
	wake    chan struct{}
}

func newDrainer(r *Replica, ctrl *reconcile.Controller, primary informer.Source) *drainer {
	return &drainer{r: r, ctrl: ctrl, primary: primary, pending: make(map[reconcile.Request]time.Time), busy: map[reconcile.Request]bool{}, wake: make(chan struct{}, 1)}
}

// handler is the event handler on the primary informer that notices drains.
func (d *drainer) handler() cache.ResourceEventHandler {
	drainLabel := DrainLabel(d.r.ring)
	note := func(obj any) {
		o, err := meta.Accessor(obj)
		if err != nil || o.GetLabels()[drainLabel] == "" {
			return
		}
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}
		d.mu.Lock()
		if _, ok := d.pending[req]; !ok {
			d.pending[req] = time.Now()
		}
		d.mu.Unlock()
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, obj any) { note(obj) }}
}

// drainerParallel is how many keys a drainer hands over at once: each
// waits for its own last Reconcile, so that one long Reconcile does not
// hold the others back.
const drainerParallel = 16

// run acknowledges drains until ctx, the member term's, ends.
func (d *drainer) run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, drainerParallel)
	for {
		d.mu.Lock()
		next := make(map[reconcile.Request]time.Time, len(d.pending))
		for req, seen := range d.pending {
			if !d.busy[req] {
				next[req] = seen
			}
		}
		d.mu.Unlock()
		for req, seen := range next {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			d.mu.Lock()
			d.busy[req] = true
			d.mu.Unlock()
			wg.Go(func() {
				defer func() {
					d.mu.Lock()
					delete(d.busy, req)
					if len(d.busy) == 0 {
						d.busy = map[reconcile.Request]bool{}
					}
					d.mu.Unlock()
					<-sem
				}()
				d.handOverOne(ctx, req, seen)
			})
		}
		t := time.NewTimer(time.Second) // retries of failed handovers
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-d.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// handOverOne hands req over, and forgets it once handed over or no
// longer this member's; it logs a failure, to be retried.
func (d *drainer) handOverOne(ctx context.Context, req reconcile.Request, seen time.Time) {
	handed, err := d.handOver(ctx, req)
	if err != nil {
		if ctx.Err() == nil {
			d.r.log.Error(err, "Could not hand a key over; retrying", "controller", d.ctrl.Name(), "namespace", req.Namespace, "name", req.Name)
		}
		return
	}
	if handed {
		d.r.metrics.handovers.WithLabelValues(d.ctrl.Name()).Inc()
		d.r.metrics.handoverSeconds.WithLabelValues(d.ctrl.Name()).Observe(time.Since(seen).Seconds())
	}
	d.mu.Lock()
	delete(d.pending, req)
	if len(d.pending) == 0 {
		// A Go map keeps its buckets when emptied: after a scale-up that
		// drained thousands of keys, give them back.
		d.pending = make(map[reconcile.Request]time.Time)
	}
	d.mu.Unlock()
}

// handOver excludes req, waits for its last Reconcile, and removes the
// shard and drain labels on the condition that the object is still
// labelled for this member (a JSON patch test). It reports whether it
// acknowledged: false when the object is gone or no longer this member's.
func (d *drainer) handOver(ctx context.Context, req reconcile.Request) (bool, error) {
	obj, ok := d.primary.Cached(req.Namespace, req.Name)
	if !ok || obj.GetLabels()[ShardLabel(d.r.ring)] != d.r.member {
		return false, nil // gone, or no longer ours
	}
	idle := d.ctrl.Exclude(req)
	defer d.ctrl.Include(req) // once acknowledged, Owns refuses it
	select {
	case <-idle:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if err := Acknowledge(ctx, d.r.env.Metadata, d.primary.GroupVersionResource(), req.Namespace, req.Name, d.r.ring, d.r.member, d.r.env.FieldManager); err != nil {
		return false, err
	}
	d.r.log.V(1).Info("Handed a key over", "controller", d.ctrl.Name(), "namespace", req.Namespace, "name", req.Name, "member", d.r.member)
	return true, nil
}
