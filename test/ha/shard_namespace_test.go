//go:build linux

package ha

import (
	"os"
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
// Known bug: the sharder lists, watches and labels the sharded type in
// every namespace (shard.Sharder's informers use metav1.NamespaceAll), so a
// namespaced operator writes labels on objects of the whole cluster (and
// needs cluster-wide patch rights to), and when a member joins it drains
// the foreign objects the ring moves, which no member acknowledges: they
// stay draining for good. This is why the sharder counted more drains
// than handovers in test/e2e's TestShardingHandsOverWithoutOverlap (e.g.
// 58 for 20): the other e2e tests' ConfigMaps. Skipped unless
// CTRLKIT_KNOWN_BUGS is set, until the fix.
func TestShardSharderStaysInItsNamespaces(t *testing.T) {
	if os.Getenv("CTRLKIT_KNOWN_BUGS") == "" {
		t.Skip("known bug: the sharder labels the sharded type in every namespace; set CTRLKIT_KNOWN_BUGS=1 to run")
	}
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
