package leader_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// TestCheckPassesWhileCampaigning: a replica that lost the lease because
// the API server is unreachable, and campaigns again, is healthy however
// long the outage lasts: restarting it would only make it cold.
func TestCheckPassesWhileCampaigning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		var l logs
		e := newElector(t, a, options(&l))
		c := start(t, e)
		<-c.leading
		c.ret <- nil
		time.Sleep(5 * time.Second)
		a.set(func(a *api) { a.fail = errors.New("dial tcp: connection refused") })
		if err := <-c.done; !errors.Is(err, leader.ErrLeaseLost) {
			t.Fatalf("Run = %v, want ErrLeaseLost", err)
		}

		c = start(t, e) // campaign again; the outage goes on
		for range 3 {
			time.Sleep(leaseDuration + renewDeadline)
			if err := e.Check(); err != nil {
				t.Fatalf("Check on a replica campaigning through an outage = %v, want nil", err)
			}
		}
		if e.IsLeader() {
			t.Error("IsLeader while the API server is unreachable")
		}
		c.cancel(nil)
		if err := <-c.done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// TestLeaseRefused: a replica whose RBAC forbids the Lease (or whose
// credentials are rejected) says so once through its logger, naming the
// fix; /healthz fails once that has lasted LeaseDuration + RenewDeadline;
// and when access is granted it leads.
func TestLeaseRefused(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantFix string
	}{
		{
			name:    "forbidden",
			err:     apierrors.NewForbidden(leases, "op", errors.New(`User "system:serviceaccount:ns:op" cannot get resource "leases"`)),
			wantFix: `grant this replica's service account the verbs get, create and update on leases (apiGroups: [coordination.k8s.io]) in namespace \"ns\"`,
		},
		{
			name:    "unauthorized",
			err:     apierrors.NewUnauthorized("token expired"),
			wantFix: "does not accept this replica's credentials (401)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newAPI()
				a.set(func(a *api) { a.fail = tt.err })
				var l logs
				e := newElector(t, a, options(&l))
				c := start(t, e)
				time.Sleep(leaseDuration + renewDeadline)
				synctest.Wait()
				if err := e.Check(); err != nil {
					t.Errorf("Check while the refusal is young = %v, want nil", err)
				}
				time.Sleep(5 * time.Second)
				err := e.Check()
				if err == nil || !strings.Contains(err.Error(), tt.err.Error()) || !strings.Contains(err.Error(), strings.ReplaceAll(tt.wantFix, `\"`, `"`)) {
					t.Errorf("Check after the refusal lasted = %v, want the API error and %q", err, tt.wantFix)
				}
				if n := l.count(`"msg"="The API server refuses this replica the Lease`, `"error"=`, tt.wantFix); n != 1 {
					t.Errorf("logged the refusal with its fix %d times, want once:\n%s", n, &l)
				}

				a.set(func(a *api) { a.fail = nil })
				ctx := <-c.leading
				if err := e.Check(); err != nil || leader.CheckLeading(ctx) != nil {
					t.Errorf("after access was granted: Check = %v, CheckLeading = %v", err, leader.CheckLeading(ctx))
				}
				if n := l.count("allows this replica the Lease again"); n != 1 {
					t.Errorf("logged the end of the refusal %d times, want once", n)
				}
				c.ret <- nil
				c.cancel(nil)
				if err := <-c.done; err != nil {
					t.Errorf("Run = %v", err)
				}
			})
		})
	}
}

// TestClientGoLogsThroughLogger: client-go's leader-election logs reach
// Options.Logger, not the process-global klog.
func TestClientGoLogsThroughLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		var l logs
		e := newElector(t, a, options(&l))
		c := start(t, e)
		<-c.leading
		c.ret <- nil
		c.cancel(nil)
		if err := <-c.done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		for _, msg := range []string{"Attempting to acquire leader lease...", "Successfully acquired lease"} {
			if l.count(msg, `"lock"="ns/op"`) != 1 {
				t.Errorf("client-go's %q did not reach Options.Logger:\n%s", msg, &l)
			}
		}
	})
}

func TestCollector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAPI()
		var l logs
		e := newElector(t, a, options(&l))
		reg := prometheus.NewRegistry()
		reg.MustRegister(e.Collector())
		gather := func(name string) *dto.Metric {
			t.Helper()
			mfs, err := reg.Gather()
			if err != nil || len(mfs) != 2 {
				t.Fatalf("Gather = %v, %v; want master_status and slowpath_total", mfs, err)
			}
			for _, mf := range mfs {
				if mf.GetName() == name {
					return mf.GetMetric()[0]
				}
			}
			t.Fatalf("Gather has no %s: %v", name, mfs)
			return nil
		}
		status := func() float64 { return gather("leader_election_master_status").GetGauge().GetValue() }
		slowpaths := func() float64 { return gather("leader_election_slowpath_total").GetCounter().GetValue() }
		if got := status(); got != 0 {
			t.Errorf("status before Run = %v, want 0", got)
		}
		c := start(t, e)
		<-c.leading
		if got := status(); got != 1 {
			t.Errorf("status while leading = %v, want 1", got)
		}
		if n := testutil.CollectAndCount(e.Collector()); n != 2 {
			t.Errorf("series = %d, want 2", n)
		}
		if got := slowpaths(); got != 0 {
			t.Errorf("slowpath_total after a clean acquire = %v, want 0", got)
		}
		// One renewal whose optimistic update conflicts: client-go reads the
		// Lease (the slow path) and then writes it.
		a.set(func(a *api) { a.fail = apierrors.NewConflict(leases, "op", errors.New("the object has been modified")) })
		time.Sleep(retryPeriod) // the fake clock of the bubble: one renewal attempt
		synctest.Wait()
		a.set(func(a *api) { a.fail = nil })
		if got := slowpaths(); got < 1 {
			t.Errorf("slowpath_total after a conflicting renewal = %v, want ≥ 1", got)
		}
		c.ret <- nil
		c.cancel(nil)
		<-c.done
		if got := status(); got != 0 {
			t.Errorf("status after Run = %v, want 0", got)
		}
	})
}
