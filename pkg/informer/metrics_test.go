package informer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

const cacheObjectsHelp = `# HELP ctrlkit_cache_objects Number of objects each declared informer's cache holds, counted at scrape time; it rises from 0 as the informer's initial list is delivered. 'informer' names the informer as in logs, e.g. "configmaps.v1 (*v1.ConfigMap)".
# TYPE ctrlkit_cache_objects gauge
`

// TestCollector checks ctrlkit_cache_objects: one series per declared
// informer, from its declaration on, counting what its store holds at
// each scrape.
func TestCollector(t *testing.T) {
	kube := newCluster(t, configMap("team-a", "a", nil), configMap("team-b", "b", nil), namespace("team-a"))
	kube.add(t, unstructuredWidget("team-a", "w", 1))
	c, err := informer.New(kube.withMapper(newMapper(widgetGVK)),
		informer.Options{Scheme: builtinAndWidgetScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry() // checks the collected series against Describe
	reg.MustRegister(c.Collector())
	expect := func(t *testing.T, series ...string) {
		t.Helper()
		want := cacheObjectsHelp + strings.Join(series, "\n") + "\n"
		if len(series) == 0 {
			want = ""
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ctrlkit_cache_objects"); err != nil {
			t.Error(err)
		}
	}

	t.Run("nothing declared", func(t *testing.T) { expect(t) })

	if _, err := informer.For[*corev1.ConfigMap](c); err != nil {
		t.Fatal(err)
	}
	if _, err := informer.For[*corev1.Namespace](c); err != nil {
		t.Fatal(err)
	}
	if _, err := informer.ForResource(c, widgetGVR); err != nil {
		t.Fatal(err)
	}
	t.Run("declared, not started", func(t *testing.T) {
		expect(t,
			`ctrlkit_cache_objects{informer="configmaps.v1 (*v1.ConfigMap)"} 0`,
			`ctrlkit_cache_objects{informer="namespaces.v1 (*v1.Namespace)"} 0`,
			`ctrlkit_cache_objects{informer="widgets.v1.test.ctrlkit.io (unstructured)"} 0`,
		)
	})

	start(t, c)
	t.Run("synced", func(t *testing.T) {
		expect(t,
			`ctrlkit_cache_objects{informer="configmaps.v1 (*v1.ConfigMap)"} 2`,
			`ctrlkit_cache_objects{informer="namespaces.v1 (*v1.Namespace)"} 1`,
			`ctrlkit_cache_objects{informer="widgets.v1.test.ctrlkit.io (unstructured)"} 1`,
		)
	})

	// The informer sees writes asynchronously: scrape until the series
	// shows them, or a deadline passes.
	eventually := func(t *testing.T, series string) {
		t.Helper()
		want := cacheObjectsHelp + series + "\n" +
			`ctrlkit_cache_objects{informer="namespaces.v1 (*v1.Namespace)"} 1` + "\n" +
			`ctrlkit_cache_objects{informer="widgets.v1.test.ctrlkit.io (unstructured)"} 1` + "\n"
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ctrlkit_cache_objects")
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 10s: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Run("after a create", func(t *testing.T) {
		if _, err := kube.CoreV1().ConfigMaps("team-a").Create(t.Context(), configMap("team-a", "c", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, `ctrlkit_cache_objects{informer="configmaps.v1 (*v1.ConfigMap)"} 3`)
	})
	t.Run("after deletes", func(t *testing.T) {
		for _, key := range [][2]string{{"team-a", "a"}, {"team-b", "b"}} {
			if err := kube.CoreV1().ConfigMaps(key[0]).Delete(t.Context(), key[1], metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, `ctrlkit_cache_objects{informer="configmaps.v1 (*v1.ConfigMap)"} 1`)
	})
}
