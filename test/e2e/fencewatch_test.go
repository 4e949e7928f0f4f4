package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestLeaseLossKeepsCacheWatches: the end of a term closes the
// connections that carried its writes, but not the one the cache's
// watches use. A leader-only controller writes during its term; another
// holder then takes the Lease. After the loss the manager's writing
// clientset sends a request (over the connection that carried the term's
// writes), and the cache still sees new objects on the watch it had: no
// ConfigMap watch is opened again.
func TestLeaseLossKeepsCacheWatches(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "a", nil, nil)
	var watches atomic.Int32
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("watch") == "true" && strings.HasSuffix(r.URL.Path, "/configmaps") {
				watches.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	mgr := newManager(t, c, ns, manager.Options{
		LeaderElection: &leader.Options{Name: "keep-watches", Namespace: ns, Identity: "holder",
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod},
		OnLeaseLost:     manager.RecampaignOnLeaseLost,
		ShutdownTimeout: 5 * time.Second,
	})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var wrote atomic.Bool
	_, err = mgr.AddController("keep-watches", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if req.Name != "a" {
			return reconcile.Result{}, nil
		}
		cm, err := cms.Lister().Get(req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, nil
		}
		cm = cm.DeepCopy()
		cm.Annotations = map[string]string{"written": "in-term"}
		if err := mgr.Client().Update(ctx, cm); err != nil {
			return reconcile.Result{}, err
		}
		wrote.Store(true)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	eventually(t, waitTimeout, wrote.Load, "the leader-only controller's write in its term")
	before := watches.Load()

	// Another holder takes the Lease, for longer than the test.
	leases := kube.CoordinationV1().Leases(ns)
	eventually(t, waitTimeout, func() bool {
		l, err := leases.Get(t.Context(), "keep-watches", metav1.GetOptions{})
		if err != nil {
			return false
		}
		thief, seconds, now := "thief", int32(600), metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime, l.Spec.AcquireTime = &thief, &seconds, &now, &now
		_, err = leases.Update(t.Context(), l, metav1.UpdateOptions{})
		return err == nil
	}, "the Lease taken by another holder")
	eventually(t, 2*leaseDuration+waitTimeout, func() bool { return !mgr.Elector().IsLeader() }, "the replica to see it lost the lease")

	// A request over the writing clients' connection, which carried the
	// ended term's writes: it is closed, and the request dials anew.
	if _, err := mgr.Kubernetes().CoreV1().ConfigMaps(ns).Get(t.Context(), "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("a read through the writing clientset after the loss: %v", err)
	}
	createConfigMap(t, ns, "after-loss", nil, nil)
	eventually(t, waitTimeout, func() bool {
		_, err := cms.Lister().Get(ns, "after-loss")
		return err == nil
	}, "the cache to see a ConfigMap created after the loss")
	if after := watches.Load(); after != before {
		t.Errorf("the cache opened %d ConfigMap watches after the loss, want none: the end of the term broke the watch it had", after-before)
	}
}
