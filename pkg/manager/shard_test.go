package manager_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

func shardedManager(t *testing.T, so *shard.Options) (*manager.Manager, error) {
	t.Helper()
	return manager.New(newCluster(t).Config(), manager.Options{Sharding: so})
}

// TestShardingOptions: invalid sharding options and sharded controllers
// that break its rules fail at construction, naming what to fix.
func TestShardingOptions(t *testing.T) {
	cm := []runtime.Object{&corev1.ConfigMap{}}
	for _, tc := range []struct {
		name string
		so   shard.Options
		want string
	}{
		{"no controllers", shard.Options{Namespace: "ns", Primary: []runtime.Object{&corev1.ConfigMap{}}}, "Options.Controllers is empty"},
		{"no primary", shard.Options{Namespace: "ns", Controllers: []string{"c"}}, "Options.Primary is empty"},
		{"not an object", shard.Options{Namespace: "ns", Controllers: []string{"c"}, Primary: []runtime.Object{&corev1.ConfigMapList{}}}, "is not an API object"},
		{"unknown mode", shard.Options{Namespace: "ns", Controllers: []string{"c"}, Primary: cm, Mode: "Hash"}, `Options.Mode is "Hash"`},
		{"unknown key", shard.Options{Namespace: "ns", Controllers: []string{"c"}, Primary: cm, ServerKey: "name"}, `ServerKey is "name"`},
		{"a key with labels", shard.Options{Namespace: "ns", Controllers: []string{"c"}, Primary: cm, Mode: shard.ModeLabels, ServerKey: shard.KeyNamespace},
			"ServerKey is set with Mode shard.ModeLabels"},
		{"children hashed by uid", shard.Options{Namespace: "ns", Controllers: []string{"c"}, Primary: cm, Children: []runtime.Object{&corev1.Secret{}}, Mode: shard.ModeServer},
			"needs ServerKey shard.KeyNamespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := shardedManager(t, &tc.so); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}

	if _, err := shardedManager(t, &shard.Options{Namespace: "ns", Controllers: []string{"c"}, Primary: cm, Children: []runtime.Object{&corev1.Secret{}},
		Mode: shard.ModeServer, ServerKey: shard.KeyNamespace}); err != nil {
		t.Errorf("children hashed by namespace: %v", err)
	}
	m, err := shardedManager(t, &shard.Options{Namespace: "ns", Identity: "Replica-A", Controllers: []string{"cms"}, Primary: []runtime.Object{&corev1.ConfigMap{}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Member(), "replica-a-") || len(m.Member()) != len("replica-a-")+5 {
		t.Errorf("Member = %q, want replica-a- and a 5-letter suffix", m.Member())
	}
	if got := m.ShardLabels()["shard.ctrlkit.io/ctrlkit"]; got != m.Member() {
		t.Errorf("ShardLabels = %v", m.ShardLabels())
	}
	cms := configMaps(t, m)
	all, err := informer.For[*corev1.ConfigMap](m.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if all == cms {
		t.Fatal("the informer declared in the shard scope is the one declared without it")
	}
	for _, tc := range []struct {
		name    string
		watches []manager.Watch
		want    string
	}{
		{"no primary watch", []manager.Watch{{Source: cms, Map: informer.ObjectKey()}}, "has no watch without a Map"},
		{"two primary watches", []manager.Watch{{Source: cms}, {Source: cms}}, "watches its primary type once"},
		{"primary outside the shard scope", []manager.Watch{{Source: all}}, "not in the shard scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.AddController("cms", newRecorder(), manager.ControllerOptions{}, tc.watches...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := m.AddController("cms", newRecorder(), manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Errorf("a valid sharded controller: %v", err)
	}
}

// TestShardedControllersAreFixedWhileRunning: while Run runs, a sharded
// controller can be neither added nor removed (the sharder would go on
// assigning the removed one's keys to this replica, and nobody would
// reconcile them); a controller that is not sharded still can, and a
// sharded one can be removed once Run has returned.
func TestShardedControllersAreFixedWhileRunning(t *testing.T) {
	m, err := shardedManager(t, &shard.Options{Namespace: "ns", Mode: shard.ModeLabels,
		Controllers: []string{"cms", "late"}, Primary: []runtime.Object{&corev1.ConfigMap{}}})
	if err != nil {
		t.Fatal(err)
	}
	cms := configMaps(t, m)
	if _, err := m.AddController("cms", newRecorder(), manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	r := run(t, m)
	eventually(t, "the manager to be ready", m.Ready)
	if _, err := m.AddController("late", newRecorder(), manager.ControllerOptions{}, manager.Watch{Source: cms}); err == nil || !strings.Contains(err.Error(), "add sharded controllers before Run") {
		t.Errorf("AddController of a sharded controller while Run runs: %v, want a refusal", err)
	}
	if err := m.RemoveController("cms"); err == nil || !strings.Contains(err.Error(), "a sharded controller cannot be removed while Run runs") {
		t.Errorf("RemoveController of a sharded controller while Run runs: %v, want a refusal", err)
	}
	if _, err := m.AddController("plain", newRecorder(), manager.ControllerOptions{EveryReplica: true}, manager.Watch{Source: cms}); err != nil {
		t.Fatalf("a controller that is not sharded, added while Run runs: %v", err)
	}
	if err := m.RemoveController("plain"); err != nil {
		t.Errorf("a controller that is not sharded, removed while Run runs: %v", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := m.RemoveController("cms"); err != nil {
		t.Errorf("RemoveController of a sharded controller after Run: %v", err)
	}
}
