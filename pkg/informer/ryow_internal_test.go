package informer

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestAwaitWriteDeregisters checks that AwaitWrite leaves no waiter behind,
// whether it returns nil or ctx ends: the event handler then returns after
// one atomic load.
func TestAwaitWriteDeregisters(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "uid-a", ResourceVersion: "5"}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c, err := New(Clients{Kube: fake.NewClientset(cm), Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Mapper: mapper}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer func() {
		cancel()
		c.Wait()
	}()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w := Write{Resource: cms.GroupVersionResource(), Namespace: "default", Name: "a", UID: "uid-a", ResourceVersion: "5"}
	long, cancelLong := context.WithTimeout(ctx, 10*time.Second)
	defer cancelLong()
	if err := c.AwaitWrite(long, w); err != nil {
		t.Fatal(err)
	}
	w.ResourceVersion = "6"
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if err := c.AwaitWrite(short, w); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitWrite of a version never written = %v, want context.DeadlineExceeded", err)
	}
	tr := &cms.entry.current()[0].writes
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if n, left := tr.waiting.Load(), len(tr.waiters); n != 0 || left != 0 {
		t.Errorf("after AwaitWrite returned: waiting = %d, %d waiters registered; want 0, 0", n, left)
	}
}

// TestReflectsBeforeSync: while the initial list is delivered, in no
// particular order, a high mark does not mean the store is complete.
func TestReflectsBeforeSync(t *testing.T) {
	inf := informers.NewSharedInformerFactoryWithOptions(fake.NewClientset(), 0, informers.WithNamespace("team-a")).Core().V1().ConfigMaps().Informer()
	e := &part{inf: inf, scope: newScope("team-a", nil), closed: make(chan struct{})}
	e.writes.mark.Store(100) // as if an object listed at 100 was stored
	for _, w := range []Write{
		{Namespace: "team-a", Name: "a", UID: "uid-a", ResourceVersion: "50"},  // below the mark
		{Namespace: "team-b", Name: "a", UID: "uid-a", ResourceVersion: "150"}, // out of scope
		{Namespace: "team-a", Name: "a", UID: "uid-a", Deleted: true},
	} {
		key := w.Namespace + "/" + w.Name
		if e.reflects(w, key, false) {
			t.Errorf("before sync, reflects(%+v) = true, want false", w)
		}
		if !e.reflects(w, key, true) {
			t.Errorf("after sync, reflects(%+v) = false, want true", w)
		}
	}
}
