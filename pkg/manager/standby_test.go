package manager_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestStandbyHoldsNoKeys runs in a synctest bubble. While another replica
// holds the lease, a leader-only controller's queue stays empty however
// many events arrive (workqueue_depth 0, as controller-runtime's standbys
// show), and /healthz passes. When this replica takes over, every cached
// object, including those created while it stood by, is reconciled, and
// ctrlkit_event_to_reconcile_seconds counts from the takeover, not from
// events the standby saw.
func TestStandbyHoldsNoKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var objs []runtime.Object
		for i := range 5 {
			objs = append(objs, configMap("default", fmt.Sprintf("cm-%d", i)))
		}
		kube := newCluster(t, objs...)
		lease := newLeaseAPI(kube)
		lease.steal(t, "b")
		opts, reg := electedOptions()
		m := newManager(t, kube, opts)
		var c calls
		if _, err := m.AddController("cms", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			c.record(ctx, req)
			return reconcile.Result{}, nil
		}), manager.ControllerOptions{}, manager.Watch{Source: configMaps(t, m)}); err != nil {
			t.Fatal(err)
		}
		r := run(t, m)
		began := time.Now()

		time.Sleep(time.Minute)
		if _, err := kube.CoreV1().ConfigMaps("default").Create(t.Context(), configMap("default", "while-standby"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if m.Elector().IsLeader() || c.keys() != 0 {
			t.Fatalf("standby: IsLeader %v, %d keys reconciled; want a standby that reconciles nothing", m.Elector().IsLeader(), c.keys())
		}
		if depth, _ := sum(t, reg, "workqueue_depth", map[string]string{"name": "cms"}); depth != 0 {
			t.Errorf("workqueue_depth of a standby's leader-only queue = %v, want 0", depth)
		}
		if code, body := get(t, m.Handler(), "/healthz"); code != http.StatusOK {
			t.Errorf("/healthz on a standby = %d %q, want 200", code, body)
		}

		lease.free(t)
		tookOver := time.Now()
		time.Sleep(leaseDuration + 5*time.Second) // the next acquisition attempt takes it
		synctest.Wait()
		if !m.Elector().IsLeader() {
			t.Fatal("did not take over the released lease")
		}
		if c.keys() != 6 {
			t.Errorf("after the takeover %d of 6 cached objects were reconciled", c.keys())
		}
		// The replay enqueues at the takeover, and the bubble's clock does
		// not move while nothing sleeps: every sample is 0.
		n, s := sum(t, reg, "ctrlkit_event_to_reconcile_seconds", map[string]string{"controller": "cms"})
		if n != 6 || s != 0 {
			t.Errorf("ctrlkit_event_to_reconcile_seconds: %v samples summing to %vs; want 6 summing to 0s (the standby lasted %v)",
				n, s, tookOver.Sub(began))
		}
		if err := r.stop(t); err != nil {
			t.Errorf("Run = %v", err)
		}
		if h := lease.holder(t); h != "a" {
			t.Errorf("Lease holder after Run = %q, want a (ReleaseOnCancel is off)", h)
		}
	})
}

// TestAbortTimeout checks the abort timeout against its claim: leader-only
// work that stops within it after the fence closed has stopped before a
// standby can take the lease.
func TestAbortTimeout(t *testing.T) {
	tests := []struct {
		name        string
		ld, rd, rp  time.Duration
		want        time.Duration
		wantStandby time.Duration // LeaseDuration in whole seconds
	}{
		{name: "defaults", want: 3 * time.Second, wantStandby: 15 * time.Second},
		{name: "e2e timings", ld: 2 * time.Second, rd: 1500 * time.Millisecond, rp: 250 * time.Millisecond, want: 250 * time.Millisecond, wantStandby: 2 * time.Second},
		{name: "long lease", ld: time.Minute, rd: 30 * time.Second, rp: 5 * time.Second, want: reconcile.DefaultAbortTimeout, wantStandby: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, _ := electedOptions(func(o *leader.Options) { o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = tt.ld, tt.rd, tt.rp })
			m := newManager(t, newCluster(t), opts)
			o := m.Elector().Options()
			got := m.AbortTimeout()
			if got != tt.want {
				t.Errorf("abort timeout = %v, want %v", got, tt.want)
			}
			if fence := o.RenewDeadline + o.RetryPeriod; fence+got > tt.wantStandby {
				t.Errorf("fence %v + abort timeout %v ends after a standby may take over (%v)", fence, got, tt.wantStandby)
			}
		})
	}
	if got := newManager(t, newCluster(t), manager.Options{}).AbortTimeout(); got != reconcile.DefaultAbortTimeout {
		t.Errorf("abort timeout without leader election = %v, want %v", got, reconcile.DefaultAbortTimeout)
	}
}
