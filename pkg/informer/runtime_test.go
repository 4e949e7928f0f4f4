package informer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// TestSeveralNamespaces: an informer over a list of namespaces caches those
// and no other, through one Lister, handler and index; reading another
// namespace is an error, not an empty answer.
func TestSeveralNamespaces(t *testing.T) {
	kube := newCluster(t,
		configMap("a", "x", nil), configMap("b", "x", nil), configMap("c", "x", nil), configMap("d", "x", nil),
	)
	c := newCache(t, kube, informer.Options{Namespaces: []string{"a", "b", "c"}})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	if err := informer.AddIndex(cms, "name", func(cm *corev1.ConfigMap) []string { return []string{cm.Name} }); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	if _, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, obj.(*corev1.ConfigMap).Namespace)
	}}); err != nil {
		t.Fatal(err)
	}
	start(t, c)

	all, err := cms.Lister().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := namespacesOf(all); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("List: namespaces %q, want a, b, c", got)
	}
	if got, err := cms.Lister().Get("b", "x"); err != nil || got.Namespace != "b" {
		t.Errorf("Get(b, x) = %v, %v", got, err)
	}
	if _, err := cms.Lister().Get("a", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing object in a cached namespace: %v, want NotFound", err)
	}
	for name, read := range map[string]func() error{
		"Get":                func() error { _, err := cms.Lister().Get("d", "x"); return err },
		"ListInNamespace":    func() error { _, err := cms.Lister().ListInNamespace("d", nil); return err },
		"ByIndexInNamespace": func() error { _, err := cms.Lister().ByIndexInNamespace("d", "name", "x"); return err },
	} {
		if err := read(); !errors.Is(err, informer.ErrNamespaceNotCached) {
			t.Errorf("%s in namespace d, not cached: %v, want ErrNamespaceNotCached", name, err)
		}
	}
	if got, err := cms.Lister().ListInNamespace("c", nil); err != nil || !slices.Equal(namespacesOf(got), []string{"c"}) {
		t.Errorf("ListInNamespace(c) = %q, %v", namespacesOf(got), err)
	}
	if got, err := cms.Lister().ByIndex("name", "x"); err != nil || len(got) != 3 {
		t.Errorf("ByIndex(name, x) = %d objects, %v; want 3", len(got), err)
	}
	if got, err := cms.Lister().ByIndexInNamespace("a", "name", "x"); err != nil || !slices.Equal(namespacesOf(got), []string{"a"}) {
		t.Errorf("ByIndexInNamespace(a, name, x) = %q, %v", namespacesOf(got), err)
	}
	if n := cms.Len(); n != 3 {
		t.Errorf("Len = %d, want 3", n)
	}
	mu.Lock()
	slices.Sort(seen)
	mu.Unlock()
	if !slices.Equal(seen, []string{"a", "b", "c"}) {
		t.Errorf("handler saw adds in %q, want a, b, c", seen)
	}

	// A new object in a cached namespace reaches the Lister (AwaitWrite
	// over several namespaces is tested in TestAwaitWriteOutOfScope).
	if _, err := kube.CoreV1().ConfigMaps("b").Create(t.Context(), configMap("b", "new", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b/new in the Lister", func() bool {
		_, err := cms.Lister().Get("b", "new")
		return err == nil
	})
}

func namespacesOf(cms []*corev1.ConfigMap) []string {
	var out []string
	for _, cm := range cms {
		out = append(out, cm.Namespace)
	}
	slices.Sort(out)
	return out
}

// TestUseAndRelease: an informer stops and is forgotten when its last use
// is released, not before; a new declaration gets a new informer.
func TestUseAndRelease(t *testing.T) {
	kube := newCluster(t, configMap("default", "x", nil))
	c := newCache(t, kube, informer.Options{})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	first, err := c.Use(cms)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Use(cms)
	if err != nil {
		t.Fatal(err)
	}
	first()
	first() // only the first call counts
	if _, err := cms.Lister().Get("default", "x"); err != nil {
		t.Fatalf("after releasing one of two uses: %v", err)
	}
	second()
	if got := c.Declared(); len(got) != 0 {
		t.Errorf("after the last release, Declared = %q", got)
	}
	if _, err := cms.Lister().Get("default", "x"); !errors.Is(err, informer.ErrRemoved) {
		t.Errorf("Lister after the last release: %v, want ErrRemoved", err)
	}
	if _, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{}); !errors.Is(err, informer.ErrRemoved) {
		t.Errorf("AddEventHandler after the last release: %v, want ErrRemoved", err)
	}
	if _, err := c.Use(cms); !errors.Is(err, informer.ErrRemoved) {
		t.Errorf("Use after the last release: %v, want ErrRemoved", err)
	}
	again, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	if again == cms {
		t.Fatal("For after the removal returned the removed informer")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := informer.WaitForSources(ctx, logr.Discard(), 0, again); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Lister().Get("default", "x"); err != nil {
		t.Errorf("the new informer: %v", err)
	}

	other := newCache(t, kube, informer.Options{})
	if _, err := other.Use(again); err == nil {
		t.Error("Use of another cache's informer succeeded")
	}
}

// BenchmarkHeapReturnedOnRemoval reports the live heap before an informer
// of 5,000 ConfigMaps is declared, while it holds them, and after its last
// use is released: the objects are freed with it.
//
//	go test -run '^$' -bench HeapReturnedOnRemoval -benchtime 3x ./pkg/informer/
func BenchmarkHeapReturnedOnRemoval(b *testing.B) {
	const n = 5000
	objs := make([]runtime.Object, n)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("cm-%05d", i)},
			Data: map[string]string{"v": string(make([]byte, 256))}}
	}
	cluster, err := fake.New(fake.Options{Scheme: kubescheme.Scheme, Objects: objs})
	if err != nil {
		b.Fatal(err)
	}
	heap := func() float64 {
		var m goruntime.MemStats
		goruntime.GC()
		goruntime.GC()
		goruntime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	var before, holding, after float64
	for b.Loop() {
		c, err := informer.New(informer.Clients{Config: cluster.Config(), Mapper: cluster.RESTMapper()}, informer.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		before = heap()
		cms, err := informer.For[*corev1.ConfigMap](c)
		if err != nil {
			b.Fatal(err)
		}
		release, err := c.Use(cms)
		if err != nil {
			b.Fatal(err)
		}
		syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
		if err := informer.WaitForSources(syncCtx, logr.Discard(), 0, cms); err != nil {
			b.Fatal(err)
		}
		cancelSync()
		if cms.Len() != n {
			b.Fatalf("cached %d of %d", cms.Len(), n)
		}
		holding = heap()
		release()
		after = heap()
		goruntime.KeepAlive(cms) // the user's value outlives the informer
		cancel()
		c.Wait()
	}
	b.ReportMetric((holding-before)/n, "B/object-held")
	b.ReportMetric((after-before)/n, "B/object-after-removal")
	b.ReportMetric(100*(holding-after)/(holding-before), "%-returned")
}

// TestResourceGoneAndBack: when a list finds the resource gone (404) and
// discovery agrees, as when a CRD is deleted, the informer stops, its
// handlers get a delete for each object it still held, Served turns
// false; when discovery serves the resource again, it starts again and
// delivers the objects anew.
func TestResourceGoneAndBack(t *testing.T) {
	kube := newCluster(t, configMap("default", "a", nil))
	var gone atomic.Bool
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "")
	ifGone := func(*http.Request) (*http.Response, error) {
		if gone.Load() {
			return statusResponse(notFound), nil
		}
		return nil, nil
	}
	kube.react("list", "v1", ifGone) // discovery
	kube.react("list", "configmaps", ifGone)
	// The watch is one the test ends: an empty JSON stream, open until
	// stop is called.
	var watches sync.Mutex
	var stop func()
	kube.react("watch", "configmaps", func(*http.Request) (*http.Response, error) {
		watches.Lock()
		defer watches.Unlock()
		if gone.Load() {
			return statusResponse(notFound), nil
		}
		r, w := io.Pipe()
		stop = func() { w.Close() }
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: r}, nil
	})
	c := newCache(t, kube, informer.Options{DiscoveryInterval: 10 * time.Millisecond})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []string
	if _, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, "add "+obj.(*corev1.ConfigMap).Name)
		},
		DeleteFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				events = append(events, "delete "+d.Key)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitFor(t, "the watch", func() bool { watches.Lock(); defer watches.Unlock(); return stop != nil })

	gone.Store(true)
	watches.Lock()
	stop() // the watch ends; the relist finds the resource gone
	watches.Unlock()
	waitFor(t, "the informer to stop", func() bool { return !cms.Served() })
	if cms.HasSynced() || cms.Len() != 0 {
		t.Errorf("stopped informer: HasSynced %v, Len %d; want false, 0", cms.HasSynced(), cms.Len())
	}
	if _, err := cms.Lister().Get("default", "a"); !apierrors.IsNotFound(err) {
		t.Errorf("Get from the stopped informer: %v, want NotFound", err)
	}
	mu.Lock()
	if !slices.Equal(events, []string{"add a", "delete default/a"}) {
		t.Errorf("events until the resource went: %q, want an add then a delete of the object it held", events)
	}
	mu.Unlock()

	gone.Store(false)
	waitFor(t, "the informer to start again and sync", cms.HasSynced)
	if _, err := cms.Lister().Get("default", "a"); err != nil {
		t.Errorf("Get after the restart: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(events, []string{"add a", "delete default/a", "add a"}) {
		t.Errorf("events: %q, want add, delete, add", events)
	}
}
