package manager_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// TestCacheObjectsMetric checks that a manager serves
// ctrlkit_cache_objects on its registry: 0 for a declared informer before
// Run, the number of cached objects once it has synced.
func TestCacheObjectsMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newManager(t, newCluster(t, configMap("default", "a"), configMap("default", "b")), manager.Options{Registry: reg})
	cms, err := informer.For[*corev1.ConfigMap](m.Cache())
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]string{"informer": cms.Name()}
	count := func() float64 { n, _ := sum(t, reg, "ctrlkit_cache_objects", series); return n }
	if n := countSeries(t, reg, "ctrlkit_cache_objects"); n != 1 {
		t.Fatalf("ctrlkit_cache_objects has %d series before Run, want 1 for %s", n, cms.Name())
	}
	if got := count(); got != 0 {
		t.Errorf("ctrlkit_cache_objects before Run = %v, want 0", got)
	}
	r := run(t, m)
	eventually(t, "ctrlkit_cache_objects to count the 2 ConfigMaps", func() bool { return count() == 2 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// countSeries returns how many series family has in g.
func countSeries(t *testing.T, g prometheus.Gatherer, family string) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == family {
			return len(mf.GetMetric())
		}
	}
	return 0
}
