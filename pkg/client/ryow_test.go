package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// startCache starts an informer cache of ConfigMaps and Gizmos that lists
// and watches cluster, as a manager's would, and stops it when the test
// ends.
func startCache(t *testing.T, cluster *fake.Cluster) (*informer.Cache, informer.Lister[*corev1.ConfigMap], informer.Lister[*Gizmo]) {
	t.Helper()
	cache, err := informer.New(informer.Clients{Config: cluster.Config(), Mapper: cluster.RESTMapper()}, informer.Options{Scheme: newScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](cache)
	if err != nil {
		t.Fatal(err)
	}
	gizmos, err := informer.For[*Gizmo](cache)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := cache.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cache.Wait()
	})
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if err := cache.WaitForSync(sctx, logr.Discard(), time.Second); err != nil {
		t.Fatal(err)
	}
	return cache, cms.Lister(), gizmos.Lister()
}

// TestReadYourWrites checks that, with a Cache, a lister read right after
// each write sees it: 250 writes of every verb on a built-in and a custom
// type, each read back at once, with no polling. (That the same reads are
// stale without the wait is shown under envtest, by
// TestReadYourWritesUnderChurn in test/e2e.)
func TestReadYourWrites(t *testing.T) {
	ctx := context.Background()
	s := newScheme(t)
	cluster, err := fake.New(fake.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	cache, cms, gizmos := startCache(t, cluster)
	c, err := client.New(cluster.Config(), client.Options{Scheme: s, Mapper: cluster.RESTMapper(), Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	atLeast := func(i int, what string, got, want client.Object, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("round %d, %s: read back: %v", i, what, err)
		}
		if cmp, err := resourceversion.CompareResourceVersion(got.GetResourceVersion(), want.GetResourceVersion()); err != nil || cmp < 0 {
			t.Fatalf("round %d, %s: the lister holds resourceVersion %s, the write returned %s", i, what, got.GetResourceVersion(), want.GetResourceVersion())
		}
	}
	for i := range 50 {
		name := fmt.Sprintf("o%d", i)
		cm := configMap(name, map[string]string{"i": "0"})
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		got, err := cms.Get("ns", name)
		atLeast(i, "create", got, cm, err)
		cm.Data["i"] = "1"
		if err := c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		got, err = cms.Get("ns", name)
		atLeast(i, "update", got, cm, err)
		if got.Data["i"] != "1" {
			t.Fatalf("round %d: the lister holds data %v after the update", i, got.Data)
		}

		if err := c.Apply(ctx, newGizmoAC("ns", name).withSize(int32(i))); err != nil {
			t.Fatal(err)
		}
		g, err := gizmos.Get("ns", name)
		if err != nil || g.Spec.Size != int32(i) {
			t.Fatalf("round %d: after the apply the lister holds %+v (%v)", i, g, err)
		}
		g = g.DeepCopyObject().(*Gizmo)
		g.Status.Seen = int32(i)
		if err := c.Status().Update(ctx, g); err != nil {
			t.Fatal(err)
		}
		got2, err := gizmos.Get("ns", name)
		atLeast(i, "status", got2, g, err)

		if err := c.Delete(ctx, cm, client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Get("ns", name); !apierrors.IsNotFound(err) {
			t.Fatalf("round %d: the lister still holds the deleted ConfigMap (%v)", i, err)
		}
	}
}
