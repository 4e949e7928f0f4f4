package manager

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
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
// only after the first stopped reconciling it. The protocol is in
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
	// primary type once with no Map (informer.ObjectKey), and reconcile
	// keys of that type.
	Controllers []string
	// Primary are example objects of the sharded controllers' primary
	// types, such as &v1alpha1.Website{}: each is assigned by its own
	// namespace/name. Required.
	Primary []runtime.Object
	// Children are example objects of the types the sharded controllers
	// own, such as &appsv1.Deployment{}: each lives with its controlling
	// owner. Their informers, like the primaries', cache only this
	// replica's share: every controller of the manager that reads them
	// sees only that share.
	Children []runtime.Object
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
	sharder *leader.Elector // the ring's sharder Lease
	metrics *shardMetrics
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
// narrows the informers of the sharded types to its share. It changes
// opts.Informers.ByType (a copy). Called by New before the cache exists.
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
	s := &sharding{opts: *so, ring: cmp.Or(so.Ring, opts.Name, DefaultName), member: newMember(so.Identity)}
	byType := maps.Clone(opts.Informers.ByType)
	if byType == nil {
		byType = make(map[runtime.Object]informer.TypeOptions)
	}
	selector := shard.ShardLabel(s.ring) + "=" + s.member
	for _, obj := range slices.Concat(so.Primary, so.Children) {
		if _, ok := obj.(metav1.Object); !ok {
			return nil, fmt.Errorf("manager: Options.Sharding: %T is not an API object: give example objects such as &appsv1.Deployment{}", obj)
		}
		// ByType is keyed by example object: find the entry of this type.
		key := runtime.Object(obj)
		for k := range byType {
			if reflect.TypeOf(k) == reflect.TypeOf(obj) {
				key = k
			}
		}
		to := byType[key]
		if to.LabelSelector != "" {
			to.LabelSelector += ","
		}
		to.LabelSelector += selector
		byType[key] = to
	}
	opts.Informers.ByType = byType
	return s, nil
}

// electors builds the member and sharder Electors.
func (s *sharding) electors(newElector func(leader.Options) (*leader.Elector, error), log logr.Logger) error {
	timing := func(name string, recampaign bool) leader.Options {
		return leader.Options{Name: name, Namespace: s.opts.Namespace, Identity: s.member,
			LeaseDuration: s.opts.LeaseDuration, RenewDeadline: s.opts.RenewDeadline, RetryPeriod: s.opts.RetryPeriod,
			ReleaseOnCancel: true, Recampaign: recampaign, Logger: log}
	}
	var err error
	if s.members, err = newElector(timing(shard.LeaseName(s.ring, s.member), false)); err != nil {
		return fmt.Errorf("manager: Options.Sharding: %w", err)
	}
	if s.sharder, err = newElector(timing(s.ring+"-sharder", true)); err != nil {
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
// without Options.Sharding.
func (m *Manager) ShardLabels() map[string]string {
	if m.shard == nil {
		return nil
	}
	return map[string]string{shard.ShardLabel(m.shard.ring): m.shard.member}
}

// isSharded reports whether the controller name is sharded.
func (m *Manager) isSharded(name string) bool {
	return m.shard != nil && slices.Contains(m.shard.opts.Controllers, name)
}

// primaryOf returns the source of the one watch without a Map: a sharded
// controller's primary.
func primaryOf(name string, watches []Watch) (informer.Source, error) {
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
	return primary, nil
}

// owns is a sharded controller's reconcile.Options.Owns: the key's primary
// object is in this replica's cache, labelled for it, and not draining.
func (s *sharding) owns(primary informer.Source) func(reconcile.Request) bool {
	shardLabel, drainLabel := shard.ShardLabel(s.ring), shard.DrainLabel(s.ring)
	return func(req reconcile.Request) bool {
		obj, ok := primary.Cached(req.Namespace, req.Name)
		if !ok {
			return false
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
	wake    chan struct{}
}

func newDrainer(s *sharding, m *Manager, ctrl *reconcile.Controller, primary informer.Source) *drainer {
	return &drainer{s: s, m: m, ctrl: ctrl, primary: primary, pending: make(map[reconcile.Request]time.Time), wake: make(chan struct{}, 1)}
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

// run acknowledges drains until ctx, the member term's, ends.
func (d *drainer) run(ctx context.Context) error {
	for {
		d.mu.Lock()
		next := maps.Clone(d.pending)
		d.mu.Unlock()
		for req, seen := range next {
			handed, err := d.handOver(ctx, req)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				d.m.log.Error(err, "Could not hand a key over; retrying", "controller", d.ctrl.Name(), "namespace", req.Namespace, "name", req.Name)
				continue
			}
			if handed {
				d.s.metrics.handovers.WithLabelValues(d.ctrl.Name()).Inc()
				d.s.metrics.handoverSeconds.WithLabelValues(d.ctrl.Name()).Observe(time.Since(seen).Seconds())
			}
			d.mu.Lock()
			delete(d.pending, req)
			d.mu.Unlock()
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
		m.log.Info("Joined the sharding ring", "ring", m.shard.ring, "member", m.shard.member)
		m.mu.Lock()
		var members []member
		for _, c := range m.controllers {
			if c.drainer != nil {
				c.runs.Add(1)
				members = append(members, member{name: "controller " + c.ctrl.Name(), start: c.start, bounded: true},
					member{name: "drainer of " + c.ctrl.Name(), start: c.drainer.run})
			}
		}
		m.mu.Unlock()
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

// sharderTerm runs the ring's Sharder while this replica holds the
// sharder Lease, and campaigns again after a loss.
func (m *Manager) sharderTerm(ctx context.Context) error {
	scheme := m.opts.Informers.Scheme
	if scheme == nil {
		scheme = kubescheme.Scheme
	}
	var resources []shard.Resource
	for i, obj := range slices.Concat(m.shard.opts.Primary, m.shard.opts.Children) {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return fmt.Errorf("manager: Options.Sharding: %T is not in the scheme: %w", obj, err)
		}
		mapping, err := m.mapper.RESTMapping(gvks[0].GroupKind(), gvks[0].Version)
		if err != nil {
			return fmt.Errorf("manager: Options.Sharding: the resource of %s: %w", gvks[0], err)
		}
		resources = append(resources, shard.Resource{Resource: mapping.Resource, Kind: gvks[0].GroupKind(), Primary: i < len(m.shard.opts.Primary)})
	}
	for ctx.Err() == nil {
		err := m.shard.sharder.Run(ctx, func(leadCtx context.Context) error {
			s, err := shard.NewSharder(shard.SharderOptions{Ring: m.shard.ring, Namespace: m.shard.sharder.Options().Namespace,
				Kube: m.kube, Metadata: m.shard.md, Resources: resources, Interval: m.shard.sharder.Options().RetryPeriod, Logger: m.log,
				Observe: m.shard.metrics})
			if err != nil {
				return err
			}
			m.log.Info("Running the sharder", "ring", m.shard.ring, "member", m.shard.member)
			return s.Start(leadCtx)
		})
		if err != nil && !errors.Is(err, leader.ErrLeaseLost) {
			return fmt.Errorf("manager: sharder: %w", err)
		}
	}
	return nil
}
