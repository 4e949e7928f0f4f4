//go:build linux

package ha

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

// TestShardSharderStaysInItsNamespaces: replicas whose informers cache one
// namespace (informer.Options.Namespaces) shard that namespace's
// ConfigMaps only; the ConfigMaps of other namespaces, which the replicas
// neither cache nor reconcile, are not theirs to label.
//
// Found as a bug: the sharder listed, watched and labelled the sharded
// type in every namespace, so a namespaced operator wrote labels on
// objects of the whole cluster (and needed cluster-wide patch rights to),
// and when a member joined it drained the foreign objects the ring moved,
// which no member acknowledged: they stayed draining for good. It is why
// test/e2e's TestShardingHandsOverWithoutOverlap counted more drains than
// handovers (e.g. 58 for 20): the other e2e tests' ConfigMaps.
func TestShardSharderStaysInItsNamespaces(t *testing.T) {
	r := &shardRow{scenario: "namespaces"}
	s := newShardScenario(t, r, setupOf("mine", "r0"))
	foreign := newNamespace(t, s.c, "shard-foreign")
	others := createObjects(t, s.c, foreign, 20, true)
	s.settle("r0")
	s.start("r1")
	s.settle("r0", "r1")

	list, err := s.c.CoreV1().ConfigMaps(foreign).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var labelled, draining []string
	for _, cm := range list.Items {
		if cm.Labels[shard.ShardLabel(s.ring)] != "" {
			labelled = append(labelled, cm.Name)
		}
		if cm.Labels[shard.DrainLabel(s.ring)] != "" {
			draining = append(draining, cm.Name)
		}
	}
	if len(labelled) > 0 {
		t.Errorf("the sharder of ring %s, whose replicas cache namespace %s only, labelled %d of the %d ConfigMaps of namespace %s (%d of them left draining, never acknowledged): %s",
			s.ring, s.ns, len(labelled), len(others), foreign, len(draining), strings.Join(labelled, ", "))
	}
}
