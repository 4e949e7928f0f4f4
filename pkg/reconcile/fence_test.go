package reconcile_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestFenced runs in a synctest bubble. The controller's Start ctx keeps
// the term of leadership but not its cancellation: the window between the
// lease being lost and the controller being told. The fence alone must
// cancel the in-flight Reconcile and keep any other from starting.
func TestFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var unreachable atomic.Bool
		leadCtx, lost := lead(t, &unreachable)

		slow, later := req("ns", "slow"), req("ns", "later")
		var n calls
		inFlight := make(chan context.Context, 1)
		c, err := reconcile.New("fenced", reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
			n.inc(r)
			if r == slow {
				inFlight <- ctx
				<-ctx.Done()
			}
			return reconcile.Result{}, nil
		}), reconcile.Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.WithoutCancel(leadCtx))
		errc := make(chan error, 1)
		go func() { errc <- c.Start(ctx) }()
		c.Enqueue(slow)
		rctx := <-inFlight

		unreachable.Store(true) // the fence closes within RenewDeadline + RetryPeriod
		time.Sleep(leader.DefaultRenewDeadline + leader.DefaultRetryPeriod)
		synctest.Wait()
		if cause := context.Cause(rctx); !errors.Is(cause, leader.ErrLeaseLost) {
			t.Errorf("in-flight Reconcile's ctx cause after the fence = %v, want ErrLeaseLost", cause)
		}
		c.Enqueue(later)
		synctest.Wait()
		if got := n.get(later); got != 0 {
			t.Errorf("a Reconcile started %d times after the lease was lost, want 0", got)
		}
		if err := <-lost; !errors.Is(err, leader.ErrLeaseLost) {
			t.Errorf("Run = %v, want ErrLeaseLost", err)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Start = %v", err)
		}
	})
}

// TestFenceCheckedLast: the lease is lost while a worker is between
// taking a key and calling Reconcile (Owns stands in for whatever the
// worker does there, as a SIGSTOP landing in that window would). The
// worker's last test of the lease must come after all of it, right
// before the call: the key is not reconciled.
func TestFenceCheckedLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var unreachable atomic.Bool
		leadCtx, lost := lead(t, &unreachable)

		late := req("ns", "late")
		var n calls
		c, err := reconcile.New("fenced", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
			n.inc(r)
			return reconcile.Result{}, nil
		}), reconcile.Options{Workers: 1, Owns: func(reconcile.Request) bool {
			// The lease is lost here: renewals fail for longer than
			// the fence allows, and this worker is held meanwhile.
			unreachable.Store(true)
			time.Sleep(leader.DefaultRenewDeadline + leader.DefaultRetryPeriod)
			return true
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.WithoutCancel(leadCtx))
		errc := make(chan error, 1)
		go func() { errc <- c.Start(ctx) }()
		c.Enqueue(late)
		if err := <-lost; !errors.Is(err, leader.ErrLeaseLost) {
			t.Errorf("Run = %v, want ErrLeaseLost", err)
		}
		synctest.Wait()
		if got := n.get(late); got != 0 {
			t.Errorf("Reconcile called %d times for a key taken while leading but reached after the lease was lost, want 0", got)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Start = %v", err)
		}
	})
}

// lead runs an elector over a fake clientset, inside t's synctest bubble,
// and returns its leading context once it leads, and the channel Run's
// error comes on. While unreachable is set, the Lease's renewals fail,
// so the fence closes RenewDeadline + RetryPeriod after the last success.
func lead(t *testing.T, unreachable *atomic.Bool) (context.Context, <-chan error) {
	t.Helper()
	kube := fake.NewClientset()
	kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if unreachable.Load() {
			return true, nil, errors.New("fake: timeout")
		}
		return false, nil, nil
	})
	e, err := leader.New(kube, leader.Options{Name: "op", Namespace: "ns", Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	leading := make(chan context.Context, 1)
	lost := make(chan error, 1)
	go func() {
		lost <- e.Run(t.Context(), func(ctx context.Context) error {
			leading <- ctx
			<-ctx.Done()
			return nil
		})
	}()
	return <-leading, lost
}
