package manager

import (
	"cmp"
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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// ShardingOptions split the objects of chosen controllers among the
// replicas that run the same manager: each replica reconciles, and
// caches, only its share, and a key moves from one replica to another
// only after the first stopped reconciling it. The informers declared in
// Manager.ShardScope are narrowed to the replica's share, either by a
// label the replicas maintain or by the API server's hash ranges (Mode);
// every other informer sees every object. The protocols are in
// docs/sharding.md.
type ShardingOptions struct {
	// Ring names the replicas that share the objects. Empty means
	// Options.Name.
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
	// and keys move: ShardingAuto (the zero value), ShardingLabels or
	// ShardingServer. The ring's first replica decides for the ring (see
	// Manager.Run's log line "Sharding mode").
	Mode ShardingMode
	// ServerKey is what the API server hashes in the server-side mode:
	// shard.KeyUID (empty means it), which spreads objects evenly but
	// cannot keep Children with their owner, or shard.KeyNamespace, which
	// puts each namespace on one replica.
	ServerKey shard.Key
	// LeaseDuration, RenewDeadline and RetryPeriod time the Leases, as in
	// leader.Options; zero means its defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// sharding is a manager's part of the ring.
type sharding struct {
	opts    ShardingOptions
	ring    string
	member  string
	md      metadata.Interface
	members *leader.Elector // this replica's member Lease
	sharder *leader.Elector // the ring's sharder Lease (the coordinator's, in the server-side mode)
	metrics *shardMetrics
	// scope narrows the sharded controllers' informers (those declared
	// in it) to this member's share, once start has chosen the mode.
	scope *informer.Scope

	// Set by start, before the informers and controllers start, and not
	// changed after.
	mode          string // shard.ModeLabels or shard.ModeServer
	key           shard.Key
	resources     []shard.Resource
	clusterScoped bool // a sharded resource is
	// view is this member's reading of the ring's epochs, in the
	// server-side mode: what Owns permits.
	view atomic.Pointer[shard.View]
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

// setUpSharding validates opts.Sharding, names this replica's member and
// makes the Scope of the sharded controllers' informers. Called by New.
func setUpSharding(opts *Options) (*sharding, error) {
	so := opts.Sharding
	if so == nil {
		return nil, nil
	}
	switch {
	case len(so.Controllers) == 0:
		return nil, errors.New("manager: Options.Sharding.Controllers is empty: name the controllers whose objects the replicas share")
	case len(so.Primary) == 0:
		return nil, errors.New("manager: Options.Sharding.Primary is empty: give an example object of each sharded controller's primary type, e.g. &v1alpha1.Website{}")
	}
	if err := so.validateMode(); err != nil {
		return nil, err
	}
	for _, obj := range slices.Concat(so.Primary, so.Children) {
		if _, ok := obj.(metav1.Object); !ok {
			return nil, fmt.Errorf("manager: Options.Sharding: %T is not an API object: give example objects such as &appsv1.Deployment{}", obj)
		}
	}
	ring := cmp.Or(so.Ring, opts.Name, DefaultName)
	return &sharding{opts: *so, ring: ring, member: newMember(so.Identity), scope: informer.NewScope("shard ring " + ring)}, nil
}

// startSharding resolves the sharding mode and narrows the scope; Run
// calls it before the informers start.
func (m *Manager) startSharding(ctx context.Context) error {
	if m.shard == nil {
		return nil
	}
	return m.shard.start(ctx, m)
}

// electors builds the member and sharder Electors.
func (s *sharding) electors(newElector func(leader.Options) (*leader.Elector, error), log logr.Logger) error {
	timing := func(name string) leader.Options {
		return leader.Options{Name: name, Namespace: s.opts.Namespace, Identity: s.member,
			LeaseDuration: s.opts.LeaseDuration, RenewDeadline: s.opts.RenewDeadline, RetryPeriod: s.opts.RetryPeriod,
			ReleaseOnCancel: true, Logger: log}
	}
	var err error
	if s.members, err = newElector(timing(shard.LeaseName(s.ring, s.member))); err != nil {
		return fmt.Errorf("manager: Options.Sharding: %w", err)
	}
	if s.sharder, err = newElector(timing(s.ring + "-sharder")); err != nil {
		return fmt.Errorf("manager: Options.Sharding: %w", err)
	}
	return nil
}

// Member is this replica's member name in its sharding ring, or "" without
// Options.Sharding. It is new for every process.
func (m *Manager) Member() string {
	if m.shard == nil {
		return ""
	}
	return m.shard.member
}

// ShardLabels are the labels an object created by a sharded controller
// should carry so that it lands in this replica's cache at once, rather
// than after the sharder has labelled it for its owner's member; nil
// without Options.Sharding, and in the server-side mode, where an object
// lands by its hash.
func (m *Manager) ShardLabels() map[string]string {
	if m.shard == nil || m.shard.mode == shard.ModeServer {
		return nil
	}
	return map[string]string{shard.ShardLabel(m.shard.ring): m.shard.member}
}

// ShardScope is the Scope in which to declare the informers of a sharded
// controller (informer.For[T](m.Cache(), m.ShardScope())): its primary
// type's, and those of the Children it watches. They then cache only this
// replica's share, and every other informer of those types sees every
// object. It is nil without Options.Sharding, which declares informers
// without a Scope.
func (m *Manager) ShardScope() *informer.Scope {
	if m.shard == nil {
		return nil
	}
	return m.shard.scope
}

// isSharded reports whether the controller name is sharded.
func (m *Manager) isSharded(name string) bool {
	return m.shard != nil && slices.Contains(m.shard.opts.Controllers, name)
}

// primaryOf returns the source of the one watch without a Map: a sharded
// controller's primary.
func primaryOf(name string, watches []Watch, scope *informer.Scope) (informer.Source, error) {
	var primary informer.Source
	for _, w := range watches {
		if w.Map != nil {
			continue
		}
		if primary != nil {
			return nil, fmt.Errorf("manager: sharded controller %q watches %s and %s with no Map: a sharded controller watches its primary type once with informer.ObjectKey, and the others through a Map to that type",
				name, primary.Name(), w.Source.Name())
		}
		primary = w.Source
	}
	if primary == nil {
		return nil, fmt.Errorf("manager: sharded controller %q has no watch without a Map: watch its primary type with informer.ObjectKey", name)
	}
	if primary.Scope() != scope {
		return nil, fmt.Errorf("manager: sharded controller %q watches %s, which is not in the shard scope: declare it with informer.For[T](mgr.Cache(), mgr.ShardScope()), "+
			"so that it caches this replica's share only", name, primary.Name())
	}
	return primary, nil
}

// owns is a sharded controller's reconcile.Options.Owns: the key's primary
// object is in this replica's cache and, in the label mode, labelled for
// it and not draining; in the server-side mode, its hash is permitted by
// this member's view of the epochs.
func (s *sharding) owns(primary informer.Source) func(reconcile.Request) bool {
	shardLabel, drainLabel := shard.ShardLabel(s.ring), shard.DrainLabel(s.ring)
	return func(req reconcile.Request) bool {
		obj, ok := primary.Cached(req.Namespace, req.Name)
		if !ok {
			return false
		}
		if s.mode == shard.ModeServer {
			v := s.view.Load()
			return v != nil && v.Permits(s.member, shard.ServerHash(s.key.Of(obj)))
		}
		l := obj.GetLabels()
		return l[shardLabel] == s.member && l[drainLabel] == ""
	}
}

// drainer hands over the keys the sharder drains: it excludes the key
// from the controller, waits for its last Reconcile to return, and
// acknowledges by removing the labels, through the member term's fenced
// context.
type drainer struct {
	s       *sharding
	m       *Manager
	ctrl    *reconcile.Controller
	primary informer.Source

	mu      sync.Mutex
	pending map[reconcile.Request]time.Time // when the drain was seen
	busy    map[reconcile.Request]bool      // being handed over now
	wake    chan struct{}
}

func newDrainer(s *sharding, m *Manager, ctrl *reconcile.Controller, primary informer.Source) *drainer {
	return &drainer{s: s, m: m, ctrl: ctrl, primary: primary, pending: make(map[reconcile.Request]time.Time), busy: map[reconcile.Request]bool{}, wake: make(chan struct{}, 1)}
}

// handler is the event handler on the primary informer that notices drains.
func (d *drainer) handler() cache.ResourceEventHandler {
	drainLabel := shard.DrainLabel(d.s.ring)
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
			d.m.log.Error(err, "Could not hand a key over; retrying", "controller", d.ctrl.Name(), "namespace", req.Namespace, "name", req.Name)
		}
		return
	}
	if handed {
		d.s.metrics.handovers.WithLabelValues(d.ctrl.Name()).Inc()
		d.s.metrics.handoverSeconds.WithLabelValues(d.ctrl.Name()).Observe(time.Since(seen).Seconds())
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
	if !ok || obj.GetLabels()[shard.ShardLabel(d.s.ring)] != d.s.member {
		return false, nil // gone, or no longer ours
	}
	idle := d.ctrl.Exclude(req)
	defer d.ctrl.Include(req) // once acknowledged, Owns refuses it
	select {
	case <-idle:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if err := shard.Acknowledge(ctx, d.s.md, d.primary.GroupVersionResource(), req.Namespace, req.Name, d.s.ring, d.s.member, d.m.opts.Name); err != nil {
		return false, err
	}
	d.m.log.V(1).Info("Handed a key over", "controller", d.ctrl.Name(), "namespace", req.Namespace, "name", req.Name, "member", d.s.member)
	return true, nil
}

// memberTerm runs the sharded controllers and their drainers while this
// replica holds its member Lease.
func (m *Manager) memberTerm(ctx context.Context) error {
	err := m.shard.members.Run(ctx, func(leadCtx context.Context) error {
		m.log.Info("Joined the sharding ring", "ring", m.shard.ring, "member", m.shard.member, "mode", m.shard.mode)
		m.mu.Lock()
		var members []member
		var sharded []*controller
		for _, c := range m.controllers {
			if c.drainer != nil {
				c.runs.Add(1)
				sharded = append(sharded, c)
				members = append(members, member{name: "controller " + c.ctrl.Name(), start: c.start, bounded: true})
				if m.shard.mode == shard.ModeLabels {
					members = append(members, member{name: "drainer of " + c.ctrl.Name(), start: c.drainer.run})
				}
			}
		}
		m.mu.Unlock()
		if m.shard.mode == shard.ModeServer {
			members = append(members, member{name: "ring epochs", start: newFollower(m.shard, m, sharded).run})
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
		return m.runAll(ctx, cancel, members)
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("manager: sharding member %s: %w", m.shard.member, err)
	}
	return nil
}

// sharderTerm runs the ring's Sharder (label mode) or Coordinator
// (server-side mode) while this replica holds the sharder Lease, and
// campaigns again after a loss.
func (m *Manager) sharderTerm(ctx context.Context) error {
	s := m.shard
	for ctx.Err() == nil {
		err := s.sharder.Run(ctx, func(leadCtx context.Context) error {
			if s.mode == shard.ModeServer {
				c, err := shard.NewCoordinator(shard.CoordinatorOptions{Ring: s.ring, Namespace: s.sharder.Options().Namespace,
					Kube: m.kube, Interval: s.sharder.Options().RetryPeriod, Logger: m.log, Observe: s.metrics})
				if err != nil {
					return err
				}
				m.log.Info("Running the ring's coordinator", "ring", s.ring, "member", s.member)
				return c.Start(leadCtx)
			}
			sh, err := shard.NewSharder(shard.SharderOptions{Ring: s.ring, Namespace: s.sharder.Options().Namespace,
				Kube: m.kube, Metadata: s.md, Resources: s.resources, Interval: s.sharder.Options().RetryPeriod, Logger: m.log,
				Observe: s.metrics})
			if err != nil {
				return err
			}
			m.log.Info("Running the sharder", "ring", s.ring, "member", s.member)
			return sh.Start(leadCtx)
		})
		if err != nil && !errors.Is(err, leader.ErrLeaseLost) {
			return fmt.Errorf("manager: sharder: %w", err)
		}
	}
	return nil
}
