package informer_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// events records what a handler was told, as "add ns/name", "update
// ns/name", "delete ns/name".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) handler() cache.ResourceEventHandler {
	rec := func(what string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		cm := obj.(*corev1.ConfigMap)
		e.mu.Lock()
		e.got = append(e.got, what+" "+cm.Namespace+"/"+cm.Name)
		e.mu.Unlock()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { rec("add", obj) },
		UpdateFunc: func(_, obj any) { rec("update", obj) },
		DeleteFunc: func(obj any) { rec("delete", obj) },
	}
}

func (e *events) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.got
	e.got = nil
	slices.Sort(out)
	return out
}

func names(t *testing.T, l informer.Lister[*corev1.ConfigMap]) []string {
	t.Helper()
	cms, err := l.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cm := range cms {
		out = append(out, cm.Name)
	}
	slices.Sort(out)
	return out
}

func scopedCluster(t *testing.T, objs ...runtime.Object) *informer.Cache {
	t.Helper()
	cluster, err := fake.New(fake.Options{Scheme: kubescheme.Scheme, Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	c, err := informer.New(informer.Clients{Mapper: cluster.RESTMapper(), Config: cluster.Config()}, informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestScope: an informer declared in a Scope caches what the Scope
// selects, apart from the informer of the same type declared without it;
// when the Scope changes, its handlers are told exactly what left and
// what entered, and the informer without the Scope sees no event.
func TestScope(t *testing.T) {
	shard := func(name, s string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"shard": s}}}
	}
	c := scopedCluster(t, shard("a1", "a"), shard("a2", "a"), shard("b1", "b"), shard("c1", "c"))
	scope := informer.NewScope("test")
	if err := scope.Set("shard=a", ""); err != nil {
		t.Fatal(err)
	}
	all, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	scoped, err := informer.For[*corev1.ConfigMap](c, scope)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := informer.For[*corev1.ConfigMap](c, scope); err != nil || again != scoped {
		t.Fatalf("declaring the scoped informer again = %v, %v; want the same informer", again, err)
	}
	var allEvents, scopedEvents events
	if _, err := all.AddEventHandler(allEvents.handler()); err != nil {
		t.Fatal(err)
	}
	if _, err := scoped.AddEventHandler(scopedEvents.handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(func() { cancel(); c.Wait() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if err := informer.WaitForSources(syncCtx, logr.Discard(), 0, all, scoped); err != nil {
		t.Fatal(err)
	}
	if got := names(t, scoped.Lister()); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("scoped informer holds %q, want [a1 a2]", got)
	}
	if got := names(t, all.Lister()); len(got) != 4 {
		t.Fatalf("informer without the scope holds %q, want all 4", got)
	}
	// Both handlers have been handed their initial lists by the time the
	// registrations synced (WaitForSources waits for the informers only).
	within(t, func() bool { return allEvents.len() == 4 && scopedEvents.len() == 2 })
	allEvents.take()
	scopedEvents.take()

	if err := scope.Set("shard in (a,b)", ""); err != nil {
		t.Fatal(err)
	}
	within(t, func() bool { return len(names(t, scoped.Lister())) == 3 })
	if got, want := scopedEvents.take(), []string{"add default/b1"}; !slices.Equal(got, want) {
		t.Errorf("after widening the scope, the scoped handler got %q, want %q", got, want)
	}
	if err := scope.Set("shard=c", ""); err != nil {
		t.Fatal(err)
	}
	within(t, func() bool { return slices.Equal(names(t, scoped.Lister()), []string{"c1"}) })
	if got, want := scopedEvents.take(), []string{"add default/c1", "delete default/a1", "delete default/a2", "delete default/b1"}; !slices.Equal(got, want) {
		t.Errorf("after moving the scope, the scoped handler got %q, want %q", got, want)
	}
	if got := allEvents.take(); len(got) != 0 {
		t.Errorf("the informer without the scope saw %q while the scope changed, want nothing", got)
	}
	if err := scope.Set("shard in (", ""); err == nil {
		t.Error("Set with a malformed label selector = nil, want an error")
	}
	if got := names(t, scoped.Lister()); !slices.Equal(got, []string{"c1"}) {
		t.Errorf("after a refused Set, the scoped informer holds %q, want [c1]", got)
	}
}

func within(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestScopeSetBeforeStart: a Scope set before the informer starts is in
// its first list; the informer does not list again for it at start. Only a
// later change lists anew.
func TestScopeSetBeforeStart(t *testing.T) {
	cluster, err := fake.New(fake.Options{Scheme: kubescheme.Scheme, Objects: []runtime.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", Labels: map[string]string{"shard": "a"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "b", Labels: map[string]string{"shard": "b"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var lists atomic.Int32
	cfg := cluster.Config()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if q := req.URL.Query(); req.URL.Path == "/api/v1/configmaps" && q.Get("watch") == "" && q.Has("labelSelector") {
				lists.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	c, err := informer.New(informer.Clients{Mapper: cluster.RESTMapper(), Config: cfg}, informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	scope := informer.NewScope("test")
	scoped, err := informer.For[*corev1.ConfigMap](c, scope)
	if err != nil {
		t.Fatal(err)
	}
	if err := scope.Set("shard=a", ""); err != nil { // declared, not started
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(func() { cancel(); c.Wait() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, func() bool { return slices.Equal(names(t, scoped.Lister()), []string{"a"}) })
	if err := scope.Set("shard=b", ""); err != nil {
		t.Fatal(err)
	}
	within(t, func() bool { return slices.Equal(names(t, scoped.Lister()), []string{"b"}) })
	if n := lists.Load(); n != 2 {
		t.Errorf("the scoped informer listed %d times, want 2: once at start with the scope set before it, once for the change", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
