package manager

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// ShardingMode is how the replicas of a ring narrow their informers of
// the sharded types to their shares, and move keys between them. The
// trade-off is in docs/sharding.md.
type ShardingMode string

// The sharding modes.
const (
	// ShardingAuto, the zero value, uses the server-side mode when the API
	// server honours shardSelector and the options allow it (no Children,
	// or ServerKey shard.KeyNamespace), and the label mode otherwise.
	ShardingAuto ShardingMode = ""
	// ShardingLabels labels every object of the sharded types with its
	// member (shard.ShardLabel), and each replica's informers select its
	// label: it works on any cluster, at the price of label writes.
	ShardingLabels ShardingMode = "Labels"
	// ShardingServer has the API server filter each replica's lists and
	// watches by hash ranges of the objects' uids or namespaces (KEP-5866
	// shardSelector, feature gate ShardedListAndWatch): no writes per
	// object, and ranges move by ring epochs. Run fails if the API server
	// does not honour shardSelector.
	ShardingServer ShardingMode = "Server"
)

// validateMode checks the mode and key options; New calls it.
func (so *ShardingOptions) validateMode() error {
	switch {
	case so.Mode != ShardingAuto && so.Mode != ShardingLabels && so.Mode != ShardingServer:
		return fmt.Errorf("manager: Options.Sharding.Mode is %q: use ShardingAuto (empty), ShardingLabels or ShardingServer", so.Mode)
	case so.ServerKey != "" && !so.ServerKey.Valid():
		return fmt.Errorf("manager: Options.Sharding.ServerKey is %q: use shard.KeyUID (empty) or shard.KeyNamespace", so.ServerKey)
	case so.ServerKey != "" && so.Mode == ShardingLabels:
		return errors.New("manager: Options.Sharding.ServerKey is set with Mode ShardingLabels: the key is the server-side mode's; remove it, or use ShardingAuto or ShardingServer")
	case so.Mode == ShardingServer && len(so.Children) > 0 && so.serverKey() == shard.KeyUID:
		return errors.New("manager: Options.Sharding: Mode ShardingServer with Children needs ServerKey shard.KeyNamespace: hashed by uid, a child lands on another replica than its owner; " +
			"set ServerKey to shard.KeyNamespace (each namespace on one replica), or Mode to ShardingLabels")
	}
	return nil
}

func (so *ShardingOptions) serverKey() shard.Key {
	if so.ServerKey == "" {
		return shard.KeyUID
	}
	return so.ServerKey
}

// modeServer is how the ring's record names the server-side mode with key.
func modeServer(key shard.Key) string { return shard.ModeServer + "/" + string(key) }

// start resolves the sharded resources and the ring's filtering mode, and
// sets the filter up; Run calls it before the informers start. The mode
// is the ring's: the first replica to start decides it by its options
// and, in ShardingAuto, by asking the API server (probe), and writes it in
// the ring's record; every replica after it follows the record, or fails
// if its options forbid that mode. So the replicas of a ring never mix
// modes, whatever each would have detected.
func (s *sharding) start(ctx context.Context, m *Manager) error {
	if err := s.resolve(m); err != nil {
		return err
	}
	if err := s.checkScopes(m); err != nil {
		return err
	}
	namespace := s.members.Options().Namespace
	leases := m.kube.CoordinationV1().Leases(namespace)
	name := shard.RecordName(s.ring)
	rec, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		mode, why, err := s.decide(ctx, m)
		if err != nil {
			return err
		}
		rec = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Annotations: map[string]string{shard.ModeAnnotation: mode}}}
		created, err := leases.Create(ctx, rec, metav1.CreateOptions{FieldManager: m.opts.Name})
		switch {
		case err == nil:
			return s.follow(m, created, why)
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("manager: sharding: creating the ring's record, Lease %s/%s: %w", namespace, name, err)
		}
		// Another replica was first: follow its choice.
		rec, err = leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("manager: sharding: reading the ring's record, Lease %s/%s: %w", namespace, name, err)
		}
		return s.follow(m, rec, "the ring's mode, which its first replica chose")
	}
	if err != nil {
		return fmt.Errorf("manager: sharding: reading the ring's record, Lease %s/%s: %w", namespace, name, err)
	}
	return s.follow(m, rec, "the ring's mode, which its first replica chose")
}

// resolve maps the sharded types to their resources.
func (s *sharding) resolve(m *Manager) error {
	scheme := m.opts.Informers.Scheme
	if scheme == nil {
		scheme = kubescheme.Scheme
	}
	s.resources, s.clusterScoped = nil, false
	for i, obj := range slices.Concat(s.opts.Primary, s.opts.Children) {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return fmt.Errorf("manager: Options.Sharding: %T is not in the scheme: %w", obj, err)
		}
		mapping, err := m.mapper.RESTMapping(gvks[0].GroupKind(), gvks[0].Version)
		if err != nil {
			return fmt.Errorf("manager: Options.Sharding: the resource of %s: %w", gvks[0], err)
		}
		r := shard.Resource{Resource: mapping.Resource, Kind: gvks[0].GroupKind(), Primary: i < len(s.opts.Primary)}
		if mapping.Scope.Name() == meta.RESTScopeNameRoot {
			s.clusterScoped = true
		} else {
			// The sharder shards what the members cache, no more.
			r.Namespaces = m.opts.Informers.Namespaces
			for k, to := range m.opts.Informers.ByType { // keyed by example objects
				if reflect.TypeOf(k) == reflect.TypeOf(obj) && len(to.Namespaces) > 0 {
					r.Namespaces = to.Namespaces
				}
			}
		}
		s.resources = append(s.resources, r)
	}
	return nil
}

// checkScopes fails if a sharded controller watches or reads a sharded
// resource through an informer outside the shard scope: that informer
// would cache every object, not this replica's share.
func (s *sharding) checkScopes(m *Manager) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.controllers {
		if c.drainer == nil {
			continue
		}
		for _, src := range c.sources {
			gvr := src.GroupVersionResource()
			if src.Scope() != s.scope && slices.ContainsFunc(s.resources, func(r shard.Resource) bool { return r.Resource == gvr }) {
				return fmt.Errorf("manager: sharded controller %q uses %s, a sharded resource, outside the shard scope: declare it with informer.For[T](mgr.Cache(), mgr.ShardScope())",
					c.ctrl.Name(), src.Name())
			}
		}
	}
	return nil
}

// decide chooses the mode of a ring that has none yet, and says why.
func (s *sharding) decide(ctx context.Context, m *Manager) (mode, why string, err error) {
	key := s.opts.serverKey()
	switch {
	case s.opts.Mode == ShardingLabels:
		return shard.ModeLabels, "Options.Sharding.Mode is ShardingLabels", nil
	case key == shard.KeyNamespace && s.clusterScoped:
		if s.opts.Mode == ShardingServer {
			return "", "", errors.New("manager: Options.Sharding: ServerKey shard.KeyNamespace puts every cluster-scoped object on one replica: use shard.KeyUID, or Mode ShardingLabels")
		}
		return shard.ModeLabels, "a sharded type is cluster-scoped, and ServerKey is namespace", nil
	case s.opts.Mode == ShardingAuto && len(s.opts.Children) > 0 && key == shard.KeyUID:
		return shard.ModeLabels, "hashed by uid, children would land on other replicas than their owners (set ServerKey to shard.KeyNamespace to filter at the server)", nil
	}
	ok, err := s.probe(ctx, m, key)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("manager: sharding: asking the API server whether it honours shardSelector: %w", err)
	case ok:
		return modeServer(key), "the API server honours shardSelector (feature gate ShardedListAndWatch)", nil
	case s.opts.Mode == ShardingServer:
		return "", "", errors.New("manager: Options.Sharding.Mode is ShardingServer, but the API server ignores shardSelector: " +
			"enable its feature gate ShardedListAndWatch (Kubernetes 1.36 or later), or use ShardingAuto or ShardingLabels")
	}
	return shard.ModeLabels, "the API server ignores shardSelector (its feature gate ShardedListAndWatch is off)", nil
}

// probe lists one object of the first primary resource with a
// shardSelector of every hash, and reports whether the API server applied
// it: it then echoes the selector in the list's metadata.shardInfo. A
// server without the feature gate ignores the field silently, so only
// this echo tells.
func (s *sharding) probe(ctx context.Context, m *Manager, key shard.Key) (bool, error) {
	r := s.resources[0]
	var namespace string
	if len(r.Namespaces) > 0 {
		namespace = r.Namespaces[0] // the replica may list there only
	}
	list, err := m.dyn.Resource(r.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{
		Limit: 1, ShardSelector: shard.Selector(key, []shard.Range{{First: 0, Last: ^uint64(0)}}),
	})
	if err != nil {
		return false, err
	}
	_, found, _ := unstructured.NestedMap(list.Object, "metadata", "shardInfo")
	return found, nil
}

// follow takes the mode rec names, checks the options allow it, sets up
// the filter, and logs the choice.
func (s *sharding) follow(m *Manager, rec *coordinationv1.Lease, why string) error {
	mode := rec.Annotations[shard.ModeAnnotation]
	where := fmt.Sprintf("Lease %s/%s", rec.Namespace, rec.Name)
	switch {
	case mode == shard.ModeLabels:
		if s.opts.Mode == ShardingServer {
			return fmt.Errorf("manager: Options.Sharding.Mode is ShardingServer, but ring %q runs in the label mode (%s): use ShardingAuto or ShardingLabels, "+
				"or, to change the ring's mode, stop every replica and delete that Lease", s.ring, where)
		}
		s.mode = shard.ModeLabels
		if err := s.scope.Set(shard.ShardLabel(s.ring)+"="+s.member, ""); err != nil {
			return err
		}
	case strings.HasPrefix(mode, shard.ModeServer+"/"):
		key := shard.Key(strings.TrimPrefix(mode, shard.ModeServer+"/"))
		switch {
		case !key.Valid():
			return fmt.Errorf("manager: sharding: ring %q's record (%s) names the mode %q, which this version does not know", s.ring, where, mode)
		case s.opts.Mode == ShardingLabels:
			return fmt.Errorf("manager: Options.Sharding.Mode is ShardingLabels, but ring %q runs in the server-side mode (%s): use ShardingAuto or ShardingServer, "+
				"or, to change the ring's mode, stop every replica and delete that Lease", s.ring, where)
		case key != s.opts.serverKey():
			return fmt.Errorf("manager: Options.Sharding.ServerKey is %q, but ring %q hashes %q (%s): set ServerKey to %q", s.opts.serverKey(), s.ring, key, where, key)
		}
		e, err := shard.ParseEpochs(rec.Annotations)
		if err != nil {
			return fmt.Errorf("manager: sharding: ring %q's record (%s): %w", s.ring, where, err)
		}
		s.mode, s.key = shard.ModeServer, key
		v := shard.NewView(e)
		s.view.Store(v)
		s.metrics.epoch.Set(float64(e.Committed.N))
		if err := s.scope.Set("", shard.Selector(key, v.Ranges(s.member))); err != nil {
			return err
		}
	default:
		return fmt.Errorf("manager: sharding: ring %q's record (%s) names the mode %q, which this version does not know", s.ring, where, mode)
	}
	m.log.Info("Sharding mode", "ring", s.ring, "member", s.member, "mode", mode, "why", why)
	return nil
}
