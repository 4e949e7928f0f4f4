// Regression tests for library bugs the e2e suite found: a nil
// reconcile.Func, an EventRecorder used after Run, and a Runnable that
// returns ctx.Err() when Run's ctx reaches its deadline.

package e2e

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestRegressionNilFuncReconciler: AddController (via reconcile.New) rejects
// a nil Reconciler interface but accepts reconcile.Func(nil), a nil
// Reconciler in all but type; every Reconcile then panics (recovered) and
// the key is retried forever.
func TestRegressionNilFuncReconciler(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var nilFunc reconcile.Func
	_, err = mgr.AddController("nil-func", nilFunc, manager.ControllerOptions{}, manager.Watch{Source: cms})
	wantErr(t, err, "Reconciler is nil")
}

// TestRegressionEventRecorderAfterRun: EventRecorder starts the event
// broadcaster on first use and Run shuts it down when it returns; a first
// call after Run has returned (or on a manager that never runs) starts a
// broadcaster that nothing stops: two goroutines leak.
func TestRegressionEventRecorderAfterRun(t *testing.T) {
	ns := newNamespace(t)
	baseline := goleak.IgnoreCurrent()
	mgr := newManager(t, cfg, ns, manager.Options{})
	r := start(t, mgr)
	eventually(t, waitTimeout, mgr.Ready, "the manager to be ready")
	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	cm := createConfigMap(t, ns, "late", nil, nil)
	mgr.EventRecorder("late").Event(cm, corev1.EventTypeNormal, "Late", "recorded after Run returned")
	goleak.VerifyNone(t, baseline)
}

// TestRegressionRunnableCtxErrOnDeadline: a Runnable that returns ctx.Err()
// on shutdown is a clean stop when Run's ctx is cancelled, but when Run's
// ctx ends by its deadline, ctx.Err() is context.DeadlineExceeded and Run
// returns it as a failure (manager.go only excuses context.Canceled).
func TestRegressionRunnableCtxErrOnDeadline(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{})
	if _, err := informer.For[*corev1.ConfigMap](mgr.Cache()); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(runnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := mgr.Run(ctx); err != nil {
		t.Errorf("Run whose ctx reached its deadline returned %v, want nil (the same as on cancel)", err)
	}
}
