package manager_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestControllerAddedAndRemovedWhileRunning: a controller and its informer
// declared after Run reconcile what exists and what changes; removing the
// controller stops it and the informer it alone used, and the name can be
// used again. goleak (TestMain) checks that nothing is left running.
func TestControllerAddedAndRemovedWhileRunning(t *testing.T) {
	kube := newCluster(t, configMap("default", "a"))
	m := newManager(t, kube, manager.Options{})
	r := run(t, m)
	eventually(t, "the manager to be ready", m.Ready)

	cms := configMaps(t, m) // declared after Run: starts at once
	rec := newRecorder()
	if _, err := m.AddController("late", rec, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	if !cms.HasSynced() {
		t.Error("AddController returned before the informer of its watch synced")
	}
	eventually(t, "the late controller to reconcile default/a", func() bool { return rec.saw("default/a") })
	if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), configMap("default", "b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the late controller to reconcile default/b", func() bool { return rec.saw("default/b") })

	if err := m.RemoveController("late"); err != nil {
		t.Fatal(err)
	}
	if got := m.Cache().Declared(); len(got) != 0 {
		t.Errorf("after removing the only controller that used it, the cache still has %q", got)
	}
	if _, err := cms.Lister().List(nil); !errors.Is(err, informer.ErrRemoved) {
		t.Errorf("Lister of the removed informer: %v, want ErrRemoved", err)
	}
	if err := m.RemoveController("late"); err == nil || !strings.Contains(err.Error(), "no controller has that name") {
		t.Errorf("second RemoveController: %v, want an error naming the missing controller", err)
	}

	// Again, with a new informer for the same type.
	again := newRecorder()
	if _, err := m.AddController("late", again, manager.ControllerOptions{}, manager.Watch{Source: configMaps(t, m)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the re-added controller to reconcile default/b", func() bool { return again.saw("default/b") })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestRemoveControllerKeepsSharedInformer: an informer another controller
// still uses keeps running, and that controller keeps reconciling.
func TestRemoveControllerKeepsSharedInformer(t *testing.T) {
	kube := newCluster(t)
	m := newManager(t, kube, manager.Options{})
	cms := configMaps(t, m)
	first, second := newRecorder(), newRecorder()
	if _, err := m.AddController("first", first, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	// second only reads ConfigMaps: Reads holds the informer too.
	if _, err := m.AddController("second", second, manager.ControllerOptions{Reads: []informer.Source{cms}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, m)
	eventually(t, "the manager to be ready", m.Ready)
	if err := m.RemoveController("first"); err != nil {
		t.Fatal(err)
	}
	if got := m.Cache().Declared(); len(got) != 1 {
		t.Fatalf("after removing one of two users, the cache has %q, want the ConfigMap informer", got)
	}
	if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), configMap("default", "c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ConfigMap informer to hold default/c", func() bool {
		_, err := cms.Lister().Get("default", "c")
		return err == nil
	})
	if first.saw("default/c") {
		t.Error("the removed controller reconciled an object created after its removal")
	}
	if err := m.RemoveController("second"); err != nil {
		t.Fatal(err)
	}
	if got := m.Cache().Declared(); len(got) != 0 {
		t.Errorf("after removing both users, the cache still has %q", got)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestAddControllerSyncTimeout: a controller added while Run runs, whose
// informer cannot sync, is refused with an error naming the informer, and
// leaves nothing behind.
func TestAddControllerSyncTimeout(t *testing.T) {
	kube := newCluster(t)
	failList(kube)
	m := newManager(t, kube, manager.Options{CacheSyncTimeout: 300 * time.Millisecond})
	r := run(t, m)
	eventually(t, "the manager to be ready", m.Ready)
	_, err := m.AddController("late", newRecorder(), manager.ControllerOptions{}, manager.Watch{Source: configMaps(t, m)})
	if err == nil || !strings.Contains(err.Error(), "configmaps.v1 (*v1.ConfigMap)") || !strings.Contains(err.Error(), "CacheSyncTimeout") {
		t.Fatalf("AddController over an informer that cannot sync: %v, want a sync timeout naming it", err)
	}
	if got := m.Cache().Declared(); len(got) != 0 {
		t.Errorf("the refused controller left informers behind: %q", got)
	}
	if _, err := m.AddController("late", newRecorder(), manager.ControllerOptions{}); err != nil {
		t.Errorf("the refused controller's name is still taken: %v", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestLeaderOnlyControllerAddedWhileLeading: with leader election, a
// leader-only controller added during a term starts in it, with every
// cached object of its watches replayed, and stops with it.
func TestLeaderOnlyControllerAddedWhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kube := newCluster(t, configMap("default", "a"), configMap("default", "b"))
		newLeaseAPI(kube)
		opts, _ := electedOptions()
		m := newManager(t, kube, opts)
		r := run(t, m)
		time.Sleep(time.Second)
		synctest.Wait()
		if !m.Elector().IsLeader() {
			t.Fatal("did not take the free lease")
		}
		var c calls
		if _, err := m.AddController("late", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			c.record(ctx, req)
			return reconcile.Result{}, nil
		}), manager.ControllerOptions{}, manager.Watch{Source: configMaps(t, m)}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if c.keys() != 2 {
			t.Fatalf("a leader-only controller added while leading reconciled %d of 2 cached objects", c.keys())
		}
		if err := r.stop(t); err != nil {
			t.Errorf("Run = %v", err)
		}
		if ctx := c.ctx("default/a"); ctx == nil || ctx.Err() == nil {
			t.Error("the Reconcile ctx of the late leader-only controller outlived the term")
		}
	})
}

// TestReadsGateReconciles: a controller's workers start no Reconcile while
// an informer it reads (not watches) is served and unsynced.
func TestReadsGateReconciles(t *testing.T) {
	kube := newCluster(t, configMap("default", "a"))
	m := newManager(t, kube, manager.Options{})
	r := run(t, m)
	eventually(t, "the manager to be ready", m.Ready)
	listing, release := blockList(t, kube)
	cms := configMaps(t, m) // its list blocks until release
	<-listing
	rec := newRecorder()
	var asked atomic.Int32
	ctrl, err := reconcile.New("gated", rec, reconcile.Options{Ready: func() bool {
		asked.Add(1)
		return cms.HasSynced()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ctrl.Start(ctx) }()
	ctrl.Enqueue(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "a"}})
	// A worker asking again and again holds the key.
	eventually(t, "the worker to ask Ready three times", func() bool { return asked.Load() >= 3 })
	if rec.saw("default/a") {
		t.Fatal("reconciled before the informer synced")
	}
	release()
	eventually(t, "the held key to be reconciled once the informer synced", func() bool { return rec.saw("default/a") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestRemoveControllerDropsItsSeries: once a controller is removed, no
// series of the manager's registry names it (its reconcile and queue
// series), while the series of another controller stay.
func TestRemoveControllerDropsItsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newManager(t, newCluster(t, configMap("default", "a")), manager.Options{Registry: reg})
	cms := configMaps(t, m)
	keep, gone := newRecorder(), newRecorder()
	for name, rec := range map[string]*recorder{"keep": keep, "gone": gone} {
		if _, err := m.AddController(name, rec, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, m)
	eventually(t, "both controllers to reconcile default/a", func() bool { return keep.saw("default/a") && gone.saw("default/a") })
	named := func(controller string) []string {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, mf := range mfs {
			for _, s := range mf.GetMetric() {
				for _, l := range s.GetLabel() {
					if (l.GetName() == "controller" || l.GetName() == "name") && l.GetValue() == controller {
						out = append(out, mf.GetName())
						break
					}
				}
			}
		}
		return out
	}
	if len(named("gone")) == 0 {
		t.Fatal("no series names the controller before its removal: the test could not see one left behind")
	}
	if err := m.RemoveController("gone"); err != nil {
		t.Fatal(err)
	}
	if left := named("gone"); len(left) != 0 {
		t.Errorf("after RemoveController, series of %q remain in %q", "gone", left)
	}
	if len(named("keep")) == 0 {
		t.Error("removing one controller deleted the other's series")
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
}
