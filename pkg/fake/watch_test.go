package fake_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// waitTimeout bounds every wait for an event; nothing here sleeps.
const waitTimeout = 10 * time.Second

// recorder turns informer notifications into "verb namespace/name"
// strings on a channel.
func recorder(ch chan<- string) cache.ResourceEventHandlerFuncs {
	key := func(obj any) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return fmt.Sprintf("%T", obj)
		}
		return m.GetNamespace() + "/" + m.GetName()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ch <- "add " + key(obj) },
		UpdateFunc: func(_, obj any) { ch <- "update " + key(obj) },
		DeleteFunc: func(obj any) { ch <- "delete " + key(obj) },
	}
}

// expect reads the next notification and fails unless it is want.
func expect(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("notification %q, want %q", got, want)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("no notification within %v, want %q", waitTimeout, want)
	}
}

// TestInformer checks that client-go's shared informers, typed (JSON and
// protobuf) and dynamic, sync from the fake and see later writes.
func TestInformer(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			c := newCluster(t, configMap("ns", "seed", nil))
			cs := clientset(t, c, ct.contentType)
			ctx, cancel := context.WithCancel(t.Context())
			factory := informers.NewSharedInformerFactory(cs, 0)
			defer factory.Shutdown()
			defer cancel()
			inf := factory.Core().V1().ConfigMaps().Informer()
			events := make(chan string, 10)
			if _, err := inf.AddEventHandler(recorder(events)); err != nil {
				t.Fatal(err)
			}
			factory.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("informer did not sync")
			}
			expect(t, events, "add ns/seed")

			cms := cs.CoreV1().ConfigMaps("ns")
			cm, err := cms.Create(ctx, configMap("ns", "a", nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			expect(t, events, "add ns/a")
			cm.Data = map[string]string{"k": "v"}
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			expect(t, events, "update ns/a")
			if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			expect(t, events, "delete ns/a")
		})
	}
	t.Run("dynamic", func(t *testing.T) {
		c := newCluster(t, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "seed"}})
		dc := dynamicClient(t, c)
		ctx, cancel := context.WithCancel(t.Context())
		factory := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
		defer factory.Shutdown()
		defer cancel()
		inf := factory.ForResource(widgetGVR).Informer()
		events := make(chan string, 10)
		if _, err := inf.AddEventHandler(recorder(events)); err != nil {
			t.Fatal(err)
		}
		factory.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
		expect(t, events, "add ns/seed")
		if _, err := dc.Resource(widgetGVR).Namespace("ns").Create(ctx, widget("ns", "w", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		expect(t, events, "add ns/w")
	})
}

// next returns the next watch event, failing after waitTimeout.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return e
	case <-time.After(waitTimeout):
		t.Fatalf("no watch event within %v", waitTimeout)
	}
	return watch.Event{}
}

func describe(e watch.Event) string {
	m, err := meta.Accessor(e.Object)
	if err != nil {
		return fmt.Sprintf("%s %T", e.Type, e.Object)
	}
	return fmt.Sprintf("%s %s@%s", e.Type, m.GetName(), m.GetResourceVersion())
}

// TestWatchResumes checks that a watch from a resourceVersion replays the
// events after it, in order, then follows new ones.
func TestWatchResumes(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			c := newCluster(t, configMap("ns", "a", nil), configMap("ns", "b", nil)) // resourceVersions 1, 2
			cms := clientset(t, c, ct.contentType).CoreV1().ConfigMaps("ns")
			ctx := t.Context()
			if _, err := cms.Update(ctx, configMap("ns", "a", map[string]string{"k": "v"}), metav1.UpdateOptions{}); err != nil { // 3
				t.Fatal(err)
			}
			if err := cms.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil { // 4
				t.Fatal(err)
			}
			w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "2"})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if _, err := cms.Create(ctx, configMap("ns", "c", nil), metav1.CreateOptions{}); err != nil { // 5
				t.Fatal(err)
			}
			var got []string
			for range 3 {
				got = append(got, describe(next(t, w)))
			}
			if want := []string{"MODIFIED a@3", "DELETED b@4", "ADDED c@5"}; !slices.Equal(got, want) {
				t.Errorf("watch from resourceVersion 2 = %v, want %v", got, want)
			}
		})
	}
}

// TestWatchSelectors checks that a watch sees only its namespace and
// selectors, and that an object entering or leaving the label selector
// arrives as ADDED or DELETED.
func TestWatchSelectors(t *testing.T) {
	c := newCluster(t)
	cs := clientset(t, c, "application/vnd.kubernetes.protobuf")
	ctx := t.Context()
	w, err := cs.CoreV1().ConfigMaps("ns").Watch(ctx, metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "metadata.name!=skip"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	withLabel := func(ns, name, app string) *corev1.ConfigMap {
		cm := configMap(ns, name, nil)
		cm.Labels = map[string]string{"app": app}
		return cm
	}
	for _, cm := range []*corev1.ConfigMap{withLabel("other", "x", "web"), withLabel("ns", "skip", "web"), withLabel("ns", "x", "db")} {
		if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cms := cs.CoreV1().ConfigMaps("ns")
	for i, app := range []string{"web", "web", "db"} {
		cm := withLabel("ns", "x", app)
		cm.Annotations = map[string]string{"update": fmt.Sprint(i)} // every update changes something
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 3 {
		e := next(t, w)
		got = append(got, fmt.Sprintf("%s %s", e.Type, e.Object.(*corev1.ConfigMap).Name))
	}
	if want := []string{"ADDED x", "MODIFIED x", "DELETED x"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// TestWatchInitialEvents checks the initial events: ADDED for each object
// for resourceVersion "", then with sendInitialEvents=true the bookmark
// that ends them, as client-go's watch-list expects.
func TestWatchInitialEvents(t *testing.T) {
	c := newCluster(t, configMap("ns", "a", nil), configMap("ns", "b", nil), configMap("other", "c", nil))
	cms := clientset(t, c, "application/json").CoreV1().ConfigMaps("ns")
	ctx := t.Context()

	legacy, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Stop()
	watchList, err := cms.Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    ptr.To(true),
		AllowWatchBookmarks:  true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer watchList.Stop()
	if _, err := cms.Create(ctx, configMap("ns", "d", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var got []string
	for range 3 {
		got = append(got, describe(next(t, legacy)))
	}
	if want := []string{"ADDED a@1", "ADDED b@2", "ADDED d@4"}; !slices.Equal(got, want) {
		t.Errorf("watch from resourceVersion \"\" = %v, want %v", got, want)
	}
	got = nil
	var bookmark runtime.Object
	for range 4 {
		e := next(t, watchList)
		got = append(got, describe(e))
		if e.Type == watch.Bookmark {
			bookmark = e.Object
		}
	}
	if want := []string{"ADDED a@1", "ADDED b@2", "BOOKMARK @3", "ADDED d@4"}; !slices.Equal(got, want) {
		t.Errorf("watch with sendInitialEvents = %v, want %v", got, want)
	}
	if m, err := meta.Accessor(bookmark); err != nil || m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("bookmark %v does not carry %s: true", bookmark, metav1.InitialEventsAnnotationKey)
	}
}

// TestWatchCustomKind checks a watch of a custom kind through the dynamic
// client.
func TestWatchCustomKind(t *testing.T) {
	c := newCluster(t)
	ws := dynamicClient(t, c).Resource(widgetGVR).Namespace("ns")
	ctx := t.Context()
	w, err := ws.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := ws.Create(ctx, widget("ns", "w", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := next(t, w)
	if u, ok := e.Object.(*unstructured.Unstructured); !ok || e.Type != watch.Added || u.GetKind() != "Widget" || u.GetName() != "w" {
		t.Errorf("event %s %v, want ADDED Widget w", e.Type, e.Object)
	}
}
