package manager

import (
	"cmp"
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// newReplica builds the manager's shard.Replica (Options.Sharding), over
// md for its label writes.
func (m *Manager) newReplica(md metadata.Interface, newElector func(leader.Options) (*leader.Elector, error)) error {
	io := m.opts.Informers
	r, err := shard.NewReplica(cmp.Or(m.opts.Name, DefaultName), *m.opts.Sharding, shard.Env{
		Kube: m.kube, Metadata: md, Dynamic: m.dyn, Mapper: m.mapper, Scheme: cmp.Or(m.opts.Scheme, kubescheme.Scheme),
		Namespaces: func(obj runtime.Object) []string {
			for k, to := range io.ByType { // keyed by example objects
				if reflect.TypeOf(k) == reflect.TypeOf(obj) && len(to.Namespaces) > 0 {
					return to.Namespaces
				}
			}
			return io.Namespaces
		},
		FieldManager: cmp.Or(m.opts.Name, DefaultName), Logger: m.log, NewElector: newElector,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := m.registry.Register(r.Collector()); err != nil {
		return fmt.Errorf("manager: registering ctrlkit_shard_* metrics: %w", err)
	}
	m.shard = r
	return nil
}

// Member is this replica's member name in its sharding ring, or "" without
// Options.Sharding. It is new for every process.
func (m *Manager) Member() string {
	if m.shard == nil {
		return ""
	}
	return m.shard.Member()
}

// ShardLabels are the labels an object created by a sharded controller
// should carry so that it lands in this replica's cache at once, rather
// than after the sharder has labelled it for its owner's member; nil
// without Options.Sharding, and in the server-side mode, where an object
// lands by its hash.
func (m *Manager) ShardLabels() map[string]string {
	if m.shard == nil {
		return nil
	}
	return m.shard.Labels()
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
	return m.shard.Scope()
}

// memberTerm runs the sharded controllers, and the Replica's tasks beside
// them, while this replica holds its member Lease.
func (m *Manager) memberTerm(ctx context.Context) error {
	return m.shard.RunMember(ctx, func(ctx context.Context, cancel context.CancelCauseFunc, tasks map[string]func(context.Context) error) error {
		m.mu.Lock()
		var members []member
		for _, c := range m.controllers {
			if c.sharded {
				c.runs.Add(1)
				members = append(members, member{name: "controller " + c.ctrl.Name(), start: c.start, bounded: true})
			}
		}
		m.mu.Unlock()
		for name, run := range tasks {
			members = append(members, member{name: name, start: run})
		}
		return m.runAll(ctx, cancel, members)
	})
}
