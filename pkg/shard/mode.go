package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Mode is how the replicas of a ring narrow their informers of
// the sharded types to their shares, and move keys between them. The
// trade-off is in docs/sharding.md.
type Mode string

// The sharding modes.
const (
	// ModeAuto, the zero value, uses the server-side mode when the API
	// server honours shardSelector and the options allow it (no Children,
	// or ServerKey KeyNamespace), and the label mode otherwise.
	ModeAuto Mode = ""
	// ModeLabels labels every object of the sharded types with its
	// member (ShardLabel), and each replica's informers select its
	// label: it works on any cluster, at the price of label writes.
	ModeLabels Mode = "Labels"
	// ModeServer has the API server filter each replica's lists and
	// watches by hash ranges of the objects' uids or namespaces (KEP-5866
	// shardSelector, feature gate ShardedListAndWatch): no writes per
	// object, and ranges move by ring epochs. Run fails if the API server
	// does not honour shardSelector.
	ModeServer Mode = "Server"
)

// validateMode checks the mode and key options; New calls it.
func (so *Options) validateMode() error {
	switch {
	case so.Mode != ModeAuto && so.Mode != ModeLabels && so.Mode != ModeServer:
		return fmt.Errorf("shard: Options.Mode is %q: use shard.ModeAuto (empty), shard.ModeLabels or shard.ModeServer", so.Mode)
	case so.ServerKey != "" && !so.ServerKey.Valid():
		return fmt.Errorf("shard: Options.ServerKey is %q: use shard.KeyUID (empty) or shard.KeyNamespace", so.ServerKey)
	case so.ServerKey != "" && so.Mode == ModeLabels:
		return errors.New("shard: Options.ServerKey is set with Mode shard.ModeLabels: the key is the server-side mode's; remove it, or use shard.ModeAuto or shard.ModeServer")
	case so.Mode == ModeServer && len(so.Children) > 0 && so.serverKey() == KeyUID:
		return errors.New("shard: Options: Mode shard.ModeServer with Children needs ServerKey shard.KeyNamespace: hashed by uid, a child lands on another replica than its owner; " +
			"set ServerKey to shard.KeyNamespace (each namespace on one replica), or Mode to shard.ModeLabels")
	}
	return nil
}

func (so *Options) serverKey() Key {
	if so.ServerKey == "" {
		return KeyUID
	}
	return so.ServerKey
}

// modeServer is how the ring's record names the server-side mode with key.
func modeServer(key Key) string { return recordServer + "/" + string(key) }

// Resolve resolves the sharded resources and the ring's filtering mode,
// and narrows the Scope; a manager calls it before the informers start. The mode
// is the ring's: the first replica to start decides it by its options
// and, in ModeAuto, by asking the API server (probe), and writes it in
// the ring's record; every replica after it follows the record, or fails
// if its options forbid that mode. So the replicas of a ring never mix
// modes, whatever each would have detected.
func (s *Replica) Resolve(ctx context.Context) error {
	if err := s.resolve(); err != nil {
		return err
	}
	if err := s.checkScopes(); err != nil {
		return err
	}
	namespace := s.members.Options().Namespace
	leases := s.env.Kube.CoordinationV1().Leases(namespace)
	name := RecordName(s.ring)
	rec, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		mode, why, err := s.decide(ctx)
		if err != nil {
			return err
		}
		rec = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Annotations: map[string]string{ModeAnnotation: mode}}}
		created, err := leases.Create(ctx, rec, metav1.CreateOptions{FieldManager: s.env.FieldManager})
		switch {
		case err == nil:
			return s.follow(created, why)
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("shard: creating the ring's record, Lease %s/%s: %w", namespace, name, err)
		}
		// Another replica was first: follow its choice.
		rec, err = leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("shard: reading the ring's record, Lease %s/%s: %w", namespace, name, err)
		}
		return s.follow(rec, "the ring's mode, which its first replica chose")
	}
	if err != nil {
		return fmt.Errorf("shard: reading the ring's record, Lease %s/%s: %w", namespace, name, err)
	}
	return s.follow(rec, "the ring's mode, which its first replica chose")
}

// resolve maps the sharded types to their resources.
func (s *Replica) resolve() error {
	scheme := s.env.Scheme
	s.resources, s.clusterScoped = nil, false
	for i, obj := range slices.Concat(s.opts.Primary, s.opts.Children) {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return fmt.Errorf("shard: Options: %T is not in the scheme: %w", obj, err)
		}
		mapping, err := s.env.Mapper.RESTMapping(gvks[0].GroupKind(), gvks[0].Version)
		if err != nil {
			return fmt.Errorf("shard: Options: the resource of %s: %w", gvks[0], err)
		}
		r := Resource{Resource: mapping.Resource, Kind: gvks[0].GroupKind(), Primary: i < len(s.opts.Primary)}
		if mapping.Scope.Name() == meta.RESTScopeNameRoot {
			s.clusterScoped = true
		} else {
			// The sharder shards what the members cache, no more.
			if s.env.Namespaces != nil {
				r.Namespaces = s.env.Namespaces(obj)
			}
		}
		s.resources = append(s.resources, r)
	}
	return nil
}

// checkScopes fails if a sharded controller watches or reads a sharded
// resource through an informer outside the shard scope: that informer
// would cache every object, not this replica's share.
func (s *Replica) checkScopes() error {
	for _, c := range s.controllers() {
		for _, src := range c.uses {
			gvr := src.GroupVersionResource()
			if src.Scope() != s.scope && slices.ContainsFunc(s.resources, func(r Resource) bool { return r.Resource == gvr }) {
				return fmt.Errorf("shard: sharded controller %q uses %s, a sharded resource, outside the shard scope: declare it with informer.For[T](mgr.Cache(), mgr.ShardScope())",
					c.ctrl.Name(), src.Name())
			}
		}
	}
	return nil
}

// decide chooses the mode of a ring that has none yet, and says why.
func (s *Replica) decide(ctx context.Context) (mode, why string, err error) {
	key := s.opts.serverKey()
	switch {
	case s.opts.Mode == ModeLabels:
		return recordLabels, "Options.Mode is shard.ModeLabels", nil
	case key == KeyNamespace && s.clusterScoped:
		if s.opts.Mode == ModeServer {
			return "", "", errors.New("shard: Options: ServerKey shard.KeyNamespace puts every cluster-scoped object on one replica: use shard.KeyUID, or Mode shard.ModeLabels")
		}
		return recordLabels, "a sharded type is cluster-scoped, and ServerKey is namespace", nil
	case s.opts.Mode == ModeAuto && len(s.opts.Children) > 0 && key == KeyUID:
		return recordLabels, "hashed by uid, children would land on other replicas than their owners (set ServerKey to shard.KeyNamespace to filter at the server)", nil
	}
	ok, err := s.probe(ctx, key)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("shard: asking the API server whether it honours shardSelector: %w", err)
	case ok:
		return modeServer(key), "the API server honours shardSelector (feature gate ShardedListAndWatch)", nil
	case s.opts.Mode == ModeServer:
		return "", "", errors.New("shard: Options.Mode is shard.ModeServer, but the API server ignores shardSelector: " +
			"enable its feature gate ShardedListAndWatch (Kubernetes 1.36 or later), or use shard.ModeAuto or shard.ModeLabels")
	}
	return recordLabels, "the API server ignores shardSelector (its feature gate ShardedListAndWatch is off)", nil
}

// probe lists one object of the first primary resource with a
// shardSelector of every hash, and reports whether the API server applied
// it: it then echoes the selector in the list's metadata.shardInfo. A
// server without the feature gate ignores the field silently, so only
// this echo tells.
func (s *Replica) probe(ctx context.Context, key Key) (bool, error) {
	r := s.resources[0]
	var namespace string
	if len(r.Namespaces) > 0 {
		namespace = r.Namespaces[0] // the replica may list there only
	}
	list, err := s.env.Dynamic.Resource(r.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{
		Limit: 1, ShardSelector: Selector(key, []Range{{First: 0, Last: ^uint64(0)}}),
	})
	if err != nil {
		return false, err
	}
	_, found, _ := unstructured.NestedMap(list.Object, "metadata", "shardInfo")
	return found, nil
}

// follow takes the mode rec names, checks the options allow it, narrows
// the Scope, and logs the choice.
func (s *Replica) follow(rec *coordinationv1.Lease, why string) error {
	mode := rec.Annotations[ModeAnnotation]
	where := fmt.Sprintf("Lease %s/%s", rec.Namespace, rec.Name)
	switch {
	case mode == recordLabels:
		if s.opts.Mode == ModeServer {
			return fmt.Errorf("shard: Options.Mode is shard.ModeServer, but ring %q runs in the label mode (%s): use shard.ModeAuto or shard.ModeLabels, "+
				"or, to change the ring's mode, stop every replica and delete that Lease", s.ring, where)
		}
		s.mode = recordLabels
		if err := s.scope.Set(ShardLabel(s.ring)+"="+s.member, ""); err != nil {
			return err
		}
	case strings.HasPrefix(mode, recordServer+"/"):
		key := Key(strings.TrimPrefix(mode, recordServer+"/"))
		switch {
		case !key.Valid():
			return fmt.Errorf("shard: ring %q's record (%s) names the mode %q, which this version does not know", s.ring, where, mode)
		case s.opts.Mode == ModeLabels:
			return fmt.Errorf("shard: Options.Mode is shard.ModeLabels, but ring %q runs in the server-side mode (%s): use shard.ModeAuto or shard.ModeServer, "+
				"or, to change the ring's mode, stop every replica and delete that Lease", s.ring, where)
		case key != s.opts.serverKey():
			return fmt.Errorf("shard: Options.ServerKey is %q, but ring %q hashes %q (%s): set ServerKey to %q", s.opts.serverKey(), s.ring, key, where, key)
		}
		e, err := ParseEpochs(rec.Annotations)
		if err != nil {
			return fmt.Errorf("shard: ring %q's record (%s): %w", s.ring, where, err)
		}
		s.mode, s.key = recordServer, key
		v := newEpochView(e)
		s.view.Store(v)
		s.metrics.epoch.Set(float64(e.Committed.N))
		if err := s.scope.Set("", Selector(key, v.Ranges(s.member))); err != nil {
			return err
		}
	default:
		return fmt.Errorf("shard: ring %q's record (%s) names the mode %q, which this version does not know", s.ring, where, mode)
	}
	s.log.Info("Sharding mode", "ring", s.ring, "member", s.member, "mode", mode, "why", why)
	return nil
}
