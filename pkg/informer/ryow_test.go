package informer_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

var configMapGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// versioned returns a ConfigMap with a UID and a resourceVersion: the fake
// clientset stores objects as given and never sets either.
func versioned(ns, name, uid, rv string, labels map[string]string) *corev1.ConfigMap {
	cm := configMap(ns, name, labels)
	cm.UID, cm.ResourceVersion = types.UID(uid), rv
	return cm
}

// wrote is the Write of cm, as the API server would have returned it.
func wrote(cm *corev1.ConfigMap) informer.Write {
	return informer.Write{Resource: configMapGVR, Namespace: cm.Namespace, Name: cm.Name,
		UID: cm.UID, ResourceVersion: cm.ResourceVersion, Labels: cm.Labels}
}

// deletedWrite is the Write of cm's deletion, answered with a Status.
func deletedWrite(cm *corev1.ConfigMap) informer.Write {
	return informer.Write{Resource: configMapGVR, Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID, Deleted: true}
}

// await calls AwaitWrite with a deadline far longer than any test needs.
func await(t *testing.T, c *informer.Cache, w informer.Write) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return c.AwaitWrite(ctx, w)
}

// mustNotReflect checks that AwaitWrite for w is still waiting when a short
// deadline ends, and that the error says what it waited for.
func mustNotReflect(t *testing.T, c *informer.Cache, w informer.Write, inErr ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := c.AwaitWrite(ctx, w)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitWrite(%+v) = %v, want an error wrapping context.DeadlineExceeded", w, err)
	}
	for _, s := range inErr {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

// done returns a context that has already ended: AwaitWrite with it returns
// nil only if it has nothing to wait for.
func done(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// handlersSynced blocks until AwaitWrite no longer waits for c's ConfigMap
// informers to deliver their initial list: a deletion of an object that was
// never there is reflected exactly then.
func handlersSynced(t *testing.T, c *informer.Cache) {
	t.Helper()
	if err := await(t, c, informer.Write{Resource: configMapGVR, Namespace: "none", Name: "none", Deleted: true}); err != nil {
		t.Fatal(err)
	}
}

// gateWatches makes kube's watches of resource hold each event until a
// value is sent on the returned channel, so a test writes through kube and
// decides when informers see the write.
func gateWatches(kube *fake.Clientset, resource string) chan<- struct{} {
	release := make(chan struct{}, 100)
	kube.PrependWatchReactor(resource, func(a k8stesting.Action) (bool, watch.Interface, error) {
		wa := a.(k8stesting.WatchActionImpl)
		in, err := kube.Tracker().Watch(wa.GetResource(), wa.GetNamespace(), wa.ListOptions)
		if err != nil {
			return true, nil, err
		}
		g := &gatedWatch{in: in, out: make(chan watch.Event), release: release, stop: make(chan struct{})}
		go g.run()
		return true, g, nil
	})
	return release
}

type gatedWatch struct {
	in      watch.Interface
	out     chan watch.Event
	release <-chan struct{}
	stop    chan struct{}
	once    sync.Once
}

func (g *gatedWatch) run() {
	defer close(g.out)
	for {
		var ev watch.Event
		select {
		case e, ok := <-g.in.ResultChan():
			if !ok {
				return
			}
			ev = e
		case <-g.stop:
			return
		}
		select {
		case <-g.release:
		case <-g.stop:
			return
		}
		select {
		case g.out <- ev:
		case <-g.stop:
			return
		}
	}
}

func (g *gatedWatch) Stop() {
	g.once.Do(func() {
		close(g.stop)
		g.in.Stop()
	})
}

func (g *gatedWatch) ResultChan() <-chan watch.Event { return g.out }

// startConfigMaps starts a Cache over kube with a ConfigMap informer.
func startConfigMaps(t *testing.T, kube *fake.Clientset, opts informer.Options) (*informer.Cache, informer.Lister[*corev1.ConfigMap]) {
	t.Helper()
	c := newCache(t, kube, opts)
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	handlersSynced(t, c)
	return c, cms.Lister()
}

// wantAtLeast fails unless the lister holds namespace/name at rv or later.
func wantAtLeast(t *testing.T, l informer.Lister[*corev1.ConfigMap], namespace, name, rv string) {
	t.Helper()
	got, err := l.Get(namespace, name)
	if err != nil {
		t.Fatalf("right after AwaitWrite: Get(%s/%s): %v", namespace, name, err)
	}
	if cmp, err := resourceversion.CompareResourceVersion(got.ResourceVersion, rv); err != nil || cmp < 0 {
		t.Fatalf("right after AwaitWrite: cached %s/%s at resourceVersion %s, want %s or later (%v)", namespace, name, got.ResourceVersion, rv, err)
	}
}

func TestAwaitWriteCreateAndUpdate(t *testing.T) {
	kube := fake.NewClientset()
	release := gateWatches(kube, "configmaps")
	c, cms := startConfigMaps(t, kube, informer.Options{})

	cm := versioned("default", "a", "uid-a", "10", map[string]string{"app": "web"})
	if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustNotReflect(t, c, wrote(cm), "configmaps.v1", "default/a", "resourceVersion 10")
	if _, err := cms.Get("default", "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get before the event was released = %v, want NotFound", err)
	}
	release <- struct{}{}
	if err := await(t, c, wrote(cm)); err != nil {
		t.Fatal(err)
	}
	wantAtLeast(t, cms, "default", "a", "10")

	cm = cm.DeepCopy()
	cm.ResourceVersion, cm.Data = "11", map[string]string{"k": "v"}
	if _, err := kube.CoreV1().ConfigMaps("default").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustNotReflect(t, c, wrote(cm), "resourceVersion 11")
	release <- struct{}{}
	if err := await(t, c, wrote(cm)); err != nil {
		t.Fatal(err)
	}
	wantAtLeast(t, cms, "default", "a", "11")
	// An older write is reflected by a newer object.
	if err := c.AwaitWrite(done(t), wrote(versioned("default", "a", "uid-a", "9", nil))); err != nil {
		t.Errorf("AwaitWrite of an older version = %v, want nil", err)
	}
}

func TestAwaitWriteDeletion(t *testing.T) {
	a := versioned("default", "a", "uid-a1", "5", nil)
	kube := fake.NewClientset(a)
	release := gateWatches(kube, "configmaps")
	c, cms := startConfigMaps(t, kube, informer.Options{})

	if err := kube.CoreV1().ConfigMaps("default").Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustNotReflect(t, c, deletedWrite(a), "default/a", "uid-a1")
	release <- struct{}{}
	if err := await(t, c, deletedWrite(a)); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get("default", "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("right after AwaitWrite: Get = %v, want NotFound", err)
	}

	// Recreated under another UID: the deleted object is gone all the same.
	again := versioned("default", "a", "uid-a2", "6", nil)
	if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release <- struct{}{}
	if err := await(t, c, wrote(again)); err != nil {
		t.Fatal(err)
	}
	if err := c.AwaitWrite(done(t), deletedWrite(a)); err != nil {
		t.Errorf("AwaitWrite(deletion of uid-a1) with uid-a2 cached = %v, want nil", err)
	}
	mustNotReflect(t, c, deletedWrite(again), "uid-a2")
}

func TestAwaitWriteReturnsAtOnce(t *testing.T) {
	kube := fake.NewClientset()
	never := versioned("default", "a", "uid-a", "99", nil) // never written

	t.Run("cache not started", func(t *testing.T) {
		c := newCache(t, kube, informer.Options{})
		if _, err := informer.For[*corev1.ConfigMap](c); err != nil {
			t.Fatal(err)
		}
		if err := c.AwaitWrite(done(t), wrote(never)); err != nil {
			t.Errorf("AwaitWrite = %v, want nil", err)
		}
	})

	c, _ := startConfigMaps(t, kube, informer.Options{})
	mustNotReflect(t, c, wrote(never)) // the control: the cases below would wait
	for _, tt := range []struct {
		name string
		edit func(*informer.Write)
	}{
		{"no informer of the resource", func(w *informer.Write) { w.Resource = corev1.SchemeGroupVersion.WithResource("secrets") }},
		{"other version of the resource", func(w *informer.Write) { w.Resource.Version = "v2" }},
		{"no resourceVersion", func(w *informer.Write) { w.ResourceVersion = "" }},
		{"resourceVersion not an integer", func(w *informer.Write) { w.ResourceVersion = "abc" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := wrote(never)
			tt.edit(&w)
			if err := c.AwaitWrite(done(t), w); err != nil {
				t.Errorf("AwaitWrite(%+v) = %v, want nil", w, err)
			}
		})
	}
}

func TestAwaitWriteOutOfScope(t *testing.T) {
	web := map[string]string{"app": "web"}
	for _, tt := range []struct {
		name     string
		opts     informer.Options
		in, out  informer.Write // both never written
		outWaits bool           // the informer cannot tell out is out of its scope
	}{
		{
			name: "other namespace",
			opts: informer.Options{Namespaces: []string{"team-a"}},
			in:   wrote(versioned("team-a", "a", "u", "99", nil)),
			out:  wrote(versioned("team-b", "a", "u", "99", nil)),
		},
		{
			name: "one of several namespaces",
			opts: informer.Options{Namespaces: []string{"team-a", "team-c"}},
			in:   wrote(versioned("team-a", "a", "u", "99", nil)),
			out:  wrote(versioned("team-b", "a", "u", "99", nil)),
		},
		{
			name: "ByType namespace",
			opts: informer.Options{ByType: map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {Namespaces: []string{"team-a"}}}},
			in:   wrote(versioned("team-a", "a", "u", "99", nil)),
			out:  wrote(versioned("team-b", "a", "u", "99", nil)),
		},
		{
			name: "ByType label selector",
			opts: informer.Options{ByType: map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {LabelSelector: "app=web"}}},
			in:   wrote(versioned("default", "a", "u", "99", web)),
			out:  wrote(versioned("default", "a", "u", "99", map[string]string{"app": "db"})),
		},
		{
			name: "TweakListOptions label selector",
			opts: informer.Options{TweakListOptions: func(o *metav1.ListOptions) { o.LabelSelector = "app=web" }},
			in:   wrote(versioned("default", "a", "u", "99", web)),
			out:  wrote(versioned("default", "a", "u", "99", nil)),
		},
		{
			name: "metadata.name field selector",
			opts: informer.Options{ByType: map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {FieldSelector: "metadata.name!=b"}}},
			in:   wrote(versioned("default", "a", "u", "99", nil)),
			out:  wrote(versioned("default", "b", "u", "99", nil)),
		},
		{
			name:     "other field selector",
			opts:     informer.Options{ByType: map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {FieldSelector: "immutable=true"}}},
			in:       wrote(versioned("default", "a", "u", "99", nil)),
			out:      wrote(versioned("default", "b", "u", "99", nil)),
			outWaits: true,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := startConfigMaps(t, fake.NewClientset(), tt.opts)
			mustNotReflect(t, c, tt.in)
			if tt.outWaits {
				mustNotReflect(t, c, tt.out)
				return
			}
			if err := c.AwaitWrite(done(t), tt.out); err != nil {
				t.Errorf("AwaitWrite(%+v) = %v, want nil", tt.out, err)
			}
		})
	}

	t.Run("still cached, same object", func(t *testing.T) {
		a := versioned("default", "a", "uid-a", "5", web)
		kube := fake.NewClientset(a)
		release := gateWatches(kube, "configmaps")
		c, cms := startConfigMaps(t, kube, informer.Options{
			ByType: map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {LabelSelector: "app=web"}},
		})
		a = a.DeepCopy()
		a.ResourceVersion, a.Labels = "6", nil
		if _, err := kube.CoreV1().ConfigMaps("default").Update(t.Context(), a, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		mustNotReflect(t, c, wrote(a)) // out of scope now, but cached at 5
		release <- struct{}{}
		if err := await(t, c, wrote(a)); err != nil {
			t.Fatal(err)
		}
		// The fake clientset does not filter watches by label, so the
		// informer caches the update rather than deleting the object.
		wantAtLeast(t, cms, "default", "a", "6")
	})

	t.Run("still cached, object it replaced", func(t *testing.T) {
		old := versioned("default", "a", "uid-old", "5", web)
		kube := fake.NewClientset(old)
		release := gateWatches(kube, "configmaps")
		c, cms := startConfigMaps(t, kube, informer.Options{
			ByType: map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {LabelSelector: "app=web"}},
		})
		if err := kube.CoreV1().ConfigMaps("default").Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ours := versioned("default", "a", "uid-new", "7", nil) // out of scope
		if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), ours, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		mustNotReflect(t, c, wrote(ours)) // uid-old is cached
		release <- struct{}{}             // its deletion; our create stays held
		if err := await(t, c, wrote(ours)); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Get("default", "a"); !apierrors.IsNotFound(err) {
			t.Fatalf("right after AwaitWrite: Get = %v, want NotFound", err)
		}
	})
}

// TestAwaitWriteHighWaterMark awaits a create that another client deleted
// again: the informer never holds the object at its version, but has
// handled a later event.
func TestAwaitWriteHighWaterMark(t *testing.T) {
	kube := fake.NewClientset()
	c, cms := startConfigMaps(t, kube, informer.Options{})
	ours := versioned("default", "a", "uid-a", "40", nil)
	later := versioned("default", "z", "uid-z", "41", nil)
	if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), ours, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().ConfigMaps("default").Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), later, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := await(t, c, wrote(later)); err != nil {
		t.Fatal(err)
	}
	// Events arrive in order: the informer has handled all three.
	if _, err := cms.Get("default", "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get(default/a) = %v, want NotFound", err)
	}
	if err := c.AwaitWrite(done(t), wrote(ours)); err != nil {
		t.Errorf("AwaitWrite(create at 40) after an event at 41 = %v, want nil", err)
	}
	beyond := wrote(ours)
	beyond.ResourceVersion = "42"
	mustNotReflect(t, c, beyond, "resourceVersion 42")

	// The mark does not count while the informer holds the written object
	// at an older version: that object's own event is still to come.
	other := versioned("default", "y", "uid-y", "45", nil)
	if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := await(t, c, wrote(other)); err != nil {
		t.Fatal(err)
	}
	stale := wrote(later)
	stale.ResourceVersion = "43" // z is cached at 41, the mark is 45
	mustNotReflect(t, c, stale, "default/z", "resourceVersion 43")
}

// TestAwaitWriteBeforeSync awaits writes while the informer lists: an
// object missing from a store that is still being filled proves nothing.
func TestAwaitWriteBeforeSync(t *testing.T) {
	a := versioned("default", "a", "uid-a", "5", nil)
	kube := fake.NewClientset(a)
	unblock := make(chan struct{})
	release := sync.OnceFunc(func() { close(unblock) })
	kube.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-unblock
		return false, nil, nil // on to the clientset's tracker
	})
	c := newCache(t, kube, informer.Options{})
	if _, err := informer.For[*corev1.ConfigMap](c); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		c.Wait()
	})
	t.Cleanup(release) // runs first: the fake list ignores ctx

	mustNotReflect(t, c, deletedWrite(a))
	mustNotReflect(t, c, wrote(versioned("default", "b", "uid-b", "6", nil)))
	release()
	if err := await(t, c, wrote(a)); err != nil {
		t.Fatal(err)
	}
	mustNotReflect(t, c, deletedWrite(a))
}

// TestAwaitWriteEveryInformer declares ConfigMaps typed (through the
// clientset) and unstructured (through the dynamic client): a write is
// reflected once both hold it.
func TestAwaitWriteEveryInformer(t *testing.T) {
	kube := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{configMapGVR: "ConfigMapList"})
	c, err := informer.New(informer.Clients{Kube: kube, Dynamic: dyn, Mapper: newMapper()}, informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := informer.ForResource(c, configMapGVR); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	handlersSynced(t, c)

	cm := versioned("default", "a", "uid-a", "7", nil)
	if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inTyped := func(context.Context) (bool, error) {
		_, err := typed.Lister().Get("default", "a")
		return err == nil, nil
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, inTyped); err != nil {
		t.Fatalf("typed informer never cached default/a: %v", err)
	}
	mustNotReflect(t, c, wrote(cm), "configmaps.v1 (unstructured)")
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("default")
	u.SetName("a")
	u.SetUID("uid-a")
	u.SetResourceVersion("7")
	if _, err := dyn.Resource(configMapGVR).Namespace("default").Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := await(t, c, wrote(cm)); err != nil {
		t.Fatal(err)
	}
}

// TestAwaitWriteConcurrent awaits writes to many keys from many goroutines
// while one client writes them, in resourceVersion order as an API server
// does.
func TestAwaitWriteConcurrent(t *testing.T) {
	const keys, rounds = 40, 3
	kube := fake.NewClientset()
	c, cms := startConfigMaps(t, kube, informer.Options{})
	last := func(i int) string { return strconv.Itoa(100 + (rounds-1)*keys + i) } // each key's final version

	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			cm := versioned("default", fmt.Sprintf("cm-%d", i), fmt.Sprintf("uid-%d", i), last(i), nil)
			if err := await(t, c, wrote(cm)); err != nil {
				t.Error(err)
				return
			}
			got, err := cms.Get("default", cm.Name)
			if err != nil {
				t.Errorf("right after AwaitWrite: %v", err)
				return
			}
			if cmp, _ := resourceversion.CompareResourceVersion(got.ResourceVersion, last(i)); cmp < 0 {
				t.Errorf("right after AwaitWrite: cached %s at %s, want %s", cm.Name, got.ResourceVersion, last(i))
			}
		})
	}
	rv := 100
	for round := range rounds {
		for i := range keys {
			cm := versioned("default", fmt.Sprintf("cm-%d", i), fmt.Sprintf("uid-%d", i), strconv.Itoa(rv), nil)
			rv++
			var err error
			if round == 0 {
				_, err = kube.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{})
			} else {
				_, err = kube.CoreV1().ConfigMaps("default").Update(t.Context(), cm, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			// The fake watch panics beyond 100 unread events: keep the
			// informer close behind.
			if rv%20 == 0 {
				if err := await(t, c, wrote(cm)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	wg.Wait()
}

// TestAwaitWriteDuringStart awaits a write while the Cache starts: either
// it has not started (nil at once) or it lists the object.
func TestAwaitWriteDuringStart(t *testing.T) {
	cm := versioned("default", "a", "uid-a", "7", nil)
	c := newCache(t, fake.NewClientset(cm), informer.Options{})
	if _, err := informer.For[*corev1.ConfigMap](c); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := await(t, c, wrote(cm)); err != nil {
				t.Error(err)
			}
		})
	}
	start(t, c)
	wg.Wait()
}

func TestNewLister(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, cm := range []*corev1.ConfigMap{configMap("team-a", "web", nil), configMap("team-b", "web", nil)} {
		if err := indexer.Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	l := informer.NewLister[*corev1.ConfigMap](indexer, configMapGVR.GroupResource())
	if got, err := keyOfGet(l.Get("team-b", "web")); err != nil || got != "team-b/web" {
		t.Errorf("Get(team-b, web) = %q, %v; want team-b/web", got, err)
	}
	_, err := l.Get("team-a", "db")
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `configmaps "db" not found`) {
		t.Errorf("Get(team-a, db) error = %v, want NotFound naming configmaps", err)
	}
	got, err := keys(l.ListInNamespace("team-a", nil))
	if err != nil || len(got) != 1 || got[0] != "team-a/web" {
		t.Errorf("ListInNamespace(team-a) = %q, %v; want [team-a/web]", got, err)
	}
}
