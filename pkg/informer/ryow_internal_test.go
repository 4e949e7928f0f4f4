package informer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestReflectsBeforeSync: while the initial list is delivered, in no
// particular order, a high mark does not mean the store is complete.
func TestReflectsBeforeSync(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.ConfigMap{}, 0, cache.Indexers{}) // never started
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
