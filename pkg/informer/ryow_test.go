package informer_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
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

// gateWatches makes the watches of resource that c's Caches open hold
// each event until a value is sent on the returned channel, so a test
// writes through c and decides when informers see the write. The watches
// are asked for in JSON, one event a line.
func gateWatches(c *cluster, resource string) chan<- struct{} {
	release := make(chan struct{}, 100)
	c.react("watch", resource, func(req *http.Request) (*http.Response, error) {
		req = req.Clone(req.Context())
		req.Header.Set("Accept", "application/json")
		resp, err := c.Cluster.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		resp.Body = &gatedBody{lines: bufio.NewReader(resp.Body), body: resp.Body, release: release, closed: make(chan struct{})}
		return resp, nil
	})
	return release
}

// gatedBody passes on a JSON watch stream one event (line) per value
// received from release.
type gatedBody struct {
	lines   *bufio.Reader
	body    io.Closer
	release <-chan struct{}
	pending []byte

	closed chan struct{}
	once   sync.Once
}

func (g *gatedBody) Read(p []byte) (int, error) {
	if len(g.pending) == 0 {
		line, err := g.lines.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		select {
		case <-g.release:
		case <-g.closed:
			return 0, io.EOF
		}
		g.pending = line
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

func (g *gatedBody) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.body.Close()
}

// startConfigMaps starts a Cache over kube with a ConfigMap informer.
func startConfigMaps(t *testing.T, kube *cluster, opts informer.Options) (*informer.Cache, informer.Lister[*corev1.ConfigMap]) {
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
	kube := newCluster(t)
	release := gateWatches(kube, "configmaps")
	c, cms := startConfigMaps(t, kube, informer.Options{})

	cm, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), configMap("default", "a", map[string]string{"app": "web"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := cm.ResourceVersion
	mustNotReflect(t, c, wrote(cm), "configmaps.v1", "default/a", "resourceVersion "+created)
	if _, err := cms.Get("default", "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get before the event was released = %v, want NotFound", err)
	}
	release <- struct{}{}
	if err := await(t, c, wrote(cm)); err != nil {
		t.Fatal(err)
	}
	wantAtLeast(t, cms, "default", "a", created)

	cm = cm.DeepCopy()
	cm.Data = map[string]string{"k": "v"}
	if cm, err = kube.CoreV1().ConfigMaps("default").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustNotReflect(t, c, wrote(cm), "resourceVersion "+cm.ResourceVersion)
	release <- struct{}{}
	if err := await(t, c, wrote(cm)); err != nil {
		t.Fatal(err)
	}
	wantAtLeast(t, cms, "default", "a", cm.ResourceVersion)
	// An older write is reflected by a newer object.
	older := cm.DeepCopy()
	older.ResourceVersion = created
	if err := c.AwaitWrite(done(t), wrote(older)); err != nil {
		t.Errorf("AwaitWrite of an older version = %v, want nil", err)
	}
}

func TestAwaitWriteDeletion(t *testing.T) {
	kube := newCluster(t, configMap("default", "a", nil))
	a := &corev1.ConfigMap{}
	if err := kube.Get(types.NamespacedName{Namespace: "default", Name: "a"}, a); err != nil {
		t.Fatal(err)
	}
	release := gateWatches(kube, "configmaps")
	c, cms := startConfigMaps(t, kube, informer.Options{})

	if err := kube.CoreV1().ConfigMaps("default").Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustNotReflect(t, c, deletedWrite(a), "default/a", string(a.UID))
	release <- struct{}{}
	if err := await(t, c, deletedWrite(a)); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get("default", "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("right after AwaitWrite: Get = %v, want NotFound", err)
	}

	// Recreated under another UID: the deleted object is gone all the same.
	again, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), configMap("default", "a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	release <- struct{}{}
	if err := await(t, c, wrote(again)); err != nil {
		t.Fatal(err)
	}
	if err := c.AwaitWrite(done(t), deletedWrite(a)); err != nil {
		t.Errorf("AwaitWrite(deletion of the first UID) with the second cached = %v, want nil", err)
	}
	mustNotReflect(t, c, deletedWrite(again), string(again.UID))
}

func TestAwaitWriteReturnsAtOnce(t *testing.T) {
	kube := newCluster(t)
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
		name    string
		opts    informer.Options
		in, out informer.Write // both never written
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
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := startConfigMaps(t, newCluster(t), tt.opts)
			mustNotReflect(t, c, tt.in)
			if err := c.AwaitWrite(done(t), tt.out); err != nil {
				t.Errorf("AwaitWrite(%+v) = %v, want nil", tt.out, err)
			}
		})
	}

	t.Run("still cached, same object", func(t *testing.T) {
		kube := newCluster(t, configMap("default", "a", web))
		a := &corev1.ConfigMap{}
		if err := kube.Get(types.NamespacedName{Namespace: "default", Name: "a"}, a); err != nil {
			t.Fatal(err)
		}
		release := gateWatches(kube, "configmaps")
		c, cms := startConfigMaps(t, kube, informer.Options{
			ByType: map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {LabelSelector: "app=web"}},
		})
		a.Labels = nil
		a, err := kube.CoreV1().ConfigMaps("default").Update(t.Context(), a, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mustNotReflect(t, c, wrote(a)) // out of scope now, but cached as it was
		release <- struct{}{}          // the watch's deletion: it left the selector
		if err := await(t, c, wrote(a)); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Get("default", "a"); !apierrors.IsNotFound(err) {
			t.Fatalf("right after AwaitWrite: Get = %v, want NotFound", err)
		}
	})

	t.Run("still cached, object it replaced", func(t *testing.T) {
		kube := newCluster(t, configMap("default", "a", web))
		release := gateWatches(kube, "configmaps")
		c, cms := startConfigMaps(t, kube, informer.Options{
			ByType: map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {LabelSelector: "app=web"}},
		})
		if err := kube.CoreV1().ConfigMaps("default").Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ours, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), configMap("default", "a", nil), metav1.CreateOptions{}) // out of scope
		if err != nil {
			t.Fatal(err)
		}
		mustNotReflect(t, c, wrote(ours)) // the old UID is cached
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
	kube := newCluster(t)
	c, cms := startConfigMaps(t, kube, informer.Options{})
	api := kube.CoreV1().ConfigMaps("default")
	ours, err := api.Create(t.Context(), configMap("default", "a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	later, err := api.Create(t.Context(), configMap("default", "z", nil), metav1.CreateOptions{})
	if err != nil {
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
		t.Errorf("AwaitWrite(create at %s) after an event at %s = %v, want nil", ours.ResourceVersion, later.ResourceVersion, err)
	}
	beyond := wrote(ours)
	beyond.ResourceVersion = rvPlus(t, later.ResourceVersion, 1)
	mustNotReflect(t, c, beyond, "resourceVersion "+beyond.ResourceVersion)

	// The mark does not count while the informer holds the written object
	// at an older version: that object's own event is still to come. A
	// Secret, which the informer does not see, takes the version between.
	if _, err := kube.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other, err := api.Create(t.Context(), configMap("default", "y", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := await(t, c, wrote(other)); err != nil {
		t.Fatal(err)
	}
	stale := wrote(later)
	stale.ResourceVersion = rvPlus(t, later.ResourceVersion, 1) // z is cached older, the mark is newer
	if stale.ResourceVersion == other.ResourceVersion {
		t.Fatalf("the Secret took no resourceVersion: z at %s, y at %s", later.ResourceVersion, other.ResourceVersion)
	}
	mustNotReflect(t, c, stale, "default/z", "resourceVersion "+stale.ResourceVersion)
}

// rvPlus returns resourceVersion rv plus n: the fake's, like
// kube-apiserver's over etcd, are integers.
func rvPlus(t *testing.T, rv string, n int64) string {
	t.Helper()
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return strconv.FormatInt(v+n, 10)
}

// TestAwaitWriteBeforeSync awaits writes while the informer lists: an
// object missing from a store that is still being filled proves nothing.
func TestAwaitWriteBeforeSync(t *testing.T) {
	kube := newCluster(t, configMap("default", "a", nil))
	a := &corev1.ConfigMap{}
	if err := kube.Get(types.NamespacedName{Namespace: "default", Name: "a"}, a); err != nil {
		t.Fatal(err)
	}
	unblock := make(chan struct{})
	release := sync.OnceFunc(func() { close(unblock) })
	kube.react("list", "configmaps", func(*http.Request) (*http.Response, error) {
		<-unblock
		return nil, nil // on to the fake
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
	mustNotReflect(t, c, wrote(versioned("default", "b", "uid-b", rvPlus(t, a.ResourceVersion, 1), nil)))
	release()
	if err := await(t, c, wrote(a)); err != nil {
		t.Fatal(err)
	}
	mustNotReflect(t, c, deletedWrite(a))
}

// TestAwaitWriteEveryInformer declares ConfigMaps typed (in protobuf) and
// unstructured (through the dynamic client, in JSON): a write is
// reflected once both hold it.
func TestAwaitWriteEveryInformer(t *testing.T) {
	kube := newCluster(t)
	// The unstructured informer's watch (JSON; the typed one asks for
	// protobuf) holds each event until released.
	release := make(chan struct{}, 1)
	kube.react("watch", "configmaps", func(req *http.Request) (*http.Response, error) {
		if strings.Contains(req.Header.Get("Accept"), "protobuf") {
			return nil, nil
		}
		resp, err := kube.Cluster.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		resp.Body = &gatedBody{lines: bufio.NewReader(resp.Body), body: resp.Body, release: release, closed: make(chan struct{})}
		return resp, nil
	})
	c, err := informer.New(kube.withMapper(newMapper()), informer.Options{})
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

	cm, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), configMap("default", "a", nil), metav1.CreateOptions{})
	if err != nil {
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
	release <- struct{}{}
	if err := await(t, c, wrote(cm)); err != nil {
		t.Fatal(err)
	}
}

// TestAwaitWriteConcurrent awaits writes to many keys from many goroutines
// while one client writes them, in resourceVersion order as an API server
// does.
func TestAwaitWriteConcurrent(t *testing.T) {
	const keys, rounds = 40, 3
	kube := newCluster(t)
	c, cms := startConfigMaps(t, kube, informer.Options{})
	api := kube.CoreV1().ConfigMaps("default")

	// Each key's writer writes it rounds times and, after each write,
	// awaits it and reads it back, all keys at once.
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			cm := configMap("default", fmt.Sprintf("cm-%d", i), nil)
			for round := range rounds {
				var err error
				if round == 0 {
					cm, err = api.Create(t.Context(), cm, metav1.CreateOptions{})
				} else {
					cm.Data = map[string]string{"round": strconv.Itoa(round)}
					cm, err = api.Update(t.Context(), cm, metav1.UpdateOptions{})
				}
				if err != nil {
					t.Error(err)
					return
				}
				if err := await(t, c, wrote(cm)); err != nil {
					t.Error(err)
					return
				}
				got, err := cms.Get("default", cm.Name)
				if err != nil {
					t.Errorf("right after AwaitWrite: %v", err)
					return
				}
				if cmp, _ := resourceversion.CompareResourceVersion(got.ResourceVersion, cm.ResourceVersion); cmp < 0 {
					t.Errorf("right after AwaitWrite: cached %s at %s, want %s", cm.Name, got.ResourceVersion, cm.ResourceVersion)
				}
			}
		})
	}
	wg.Wait()
}

// TestAwaitWriteDuringStart awaits a write while the Cache starts: either
// it has not started (nil at once) or it lists the object.
func TestAwaitWriteDuringStart(t *testing.T) {
	kube := newCluster(t, configMap("default", "a", nil))
	cm := &corev1.ConfigMap{}
	if err := kube.Get(types.NamespacedName{Namespace: "default", Name: "a"}, cm); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, kube, informer.Options{})
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

// TestAwaitWriteDeregisters checks that AwaitWrite leaves no waiter behind,
// whether it returns nil or ctx ends: the event handler then returns after
// one atomic load.
func TestAwaitWriteDeregisters(t *testing.T) {
	fc := newCluster(t, configMap("default", "a", nil))
	c := newCache(t, fc, informer.Options{})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	var cm corev1.ConfigMap
	if err := fc.Get(types.NamespacedName{Namespace: "default", Name: "a"}, &cm); err != nil {
		t.Fatal(err)
	}
	w := informer.Write{Resource: cms.GroupVersionResource(), Namespace: "default", Name: "a", UID: cm.UID, ResourceVersion: cm.ResourceVersion}
	long, cancelLong := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancelLong()
	if err := c.AwaitWrite(long, w); err != nil {
		t.Fatal(err)
	}
	w.ResourceVersion += "0" // a later version, never written
	short, cancelShort := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancelShort()
	if err := c.AwaitWrite(short, w); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitWrite of a version never written = %v, want context.DeadlineExceeded", err)
	}
	if n, left := informer.Waiting(cms); n != 0 || left != 0 {
		t.Errorf("after AwaitWrite returned: waiting = %d, %d waiters registered; want 0, 0", n, left)
	}
}
