package manager_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// lossSetup is a leading manager with a leader-only controller, an
// EveryReplica controller and a Runnable, each busy until its ctx ends
// (or, for those named in stuck, until the test releases them).
type lossSetup struct {
	m        *manager.Manager
	lease    *leaseAPI
	run      *running
	leader   calls // the leader-only controller's reconciles
	every    calls // the EveryReplica controller's reconciles
	runCtx   atomic.Pointer[context.Context]
	release  chan struct{} // ends the stuck ones
	once     sync.Once
	returned atomic.Bool // Run returned
}

// unstick lets whatever ignores its ctx return.
func (s *lossSetup) unstick() { s.once.Do(func() { close(s.release) }) }

func setupLoss(t *testing.T, stuck string, onLost manager.LeaseLostPolicy) *lossSetup {
	t.Helper()
	kube := newCluster(t, configMap("default", "a"))
	s := &lossSetup{lease: newLeaseAPI(kube), release: make(chan struct{})}
	t.Cleanup(s.unstick) // after Run's cleanup, which waits for Run
	opts, _ := electedOptions()
	opts.OnLeaseLost = onLost
	s.m = newManager(t, kube, opts)
	cms := configMaps(t, s.m)
	busy := func(name string, c *calls) reconcile.Func {
		return func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			c.record(ctx, req)
			if stuck == name {
				<-s.release
			} else {
				<-ctx.Done()
			}
			return reconcile.Result{}, nil
		}
	}
	if _, err := s.m.AddController("leader-only", busy("leader-only", &s.leader), manager.ControllerOptions{Workers: 2}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.m.AddController("every", busy("every", &s.every), manager.ControllerOptions{Workers: 2, EveryReplica: true}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	if err := s.m.Add(runnableFunc(func(ctx context.Context) error {
		s.runCtx.Store(&ctx)
		if stuck == "runnable" {
			<-s.release
		} else {
			<-ctx.Done()
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	s.run = run(t, s.m)
	go func() {
		err := <-s.run.done
		s.returned.Store(true)
		s.run.done <- err // for err and the cleanup
	}()
	time.Sleep(time.Second) // the caches sync, the lease is taken, the reconciles begin
	synctest.Wait()
	if !s.m.Elector().IsLeader() || s.leader.count("default/a") != 1 || s.every.count("default/a") != 1 {
		t.Fatalf("setup: IsLeader %v, reconciles %d and %d; want leading, both in flight", s.m.Elector().IsLeader(), s.leader.count("default/a"), s.every.count("default/a"))
	}
	return s
}

// err waits for Run's error.
func (s *lossSetup) err(t *testing.T) error {
	t.Helper()
	err := <-s.run.done
	s.run.done <- err // for the cleanup
	return err
}

// TestLeaseLossFailsFast runs in a synctest bubble. By default, losing the
// lease aborts everything at the instant the loss is seen: the leader-only
// and EveryReplica reconciles and the Runnables have their ctx cancelled,
// and Run returns, wrapping leader.ErrLeaseLost, as soon as they return or
// the abort timeout passes, naming what is left running.
func TestLeaseLossFailsFast(t *testing.T) {
	tests := []struct {
		name     string
		stuck    string        // what ignores its ctx
		wantAt   time.Duration // when Run returns, after the loss is seen
		wantErrs []string
	}{
		{name: "everything stops", wantAt: 0},
		{name: "a stuck leader-only reconcile", stuck: "leader-only", wantAt: abortTimeout,
			wantErrs: []string{`controller "leader-only": reconciles still running 3s after stopping began`}},
		{name: "a stuck Runnable", stuck: "runnable", wantAt: abortTimeout,
			wantErrs: []string{"Runnable 0 (manager_test.runnableFunc) did not return within 3s after its ctx was cancelled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := setupLoss(t, tt.stuck, manager.ExitOnLeaseLost)
				s.lease.steal(t, "b") // seen at the next renewal, within RetryPeriod
				<-s.leader.ctx("default/a").Done()
				seen := time.Now()
				synctest.Wait()
				if cause := context.Cause(s.leader.ctx("default/a")); !errors.Is(cause, leader.ErrLeaseLost) {
					t.Errorf("leader-only reconcile ctx cause at the loss = %v, want ErrLeaseLost", cause)
				}
				for name, ctx := range map[string]context.Context{
					"EveryReplica reconcile": s.every.ctx("default/a"),
					"Runnable":               *s.runCtx.Load(),
				} {
					if cause := context.Cause(ctx); !errors.Is(cause, reconcile.ErrAborted) || !errors.Is(cause, leader.ErrLeaseLost) {
						t.Errorf("%s ctx cause at the loss = %v, want ErrAborted and ErrLeaseLost", name, cause)
					}
				}
				err := s.err(t)
				if took := time.Since(seen); took != tt.wantAt {
					t.Errorf("Run returned %v after the loss was seen, want %v", took, tt.wantAt)
				}
				if !errors.Is(err, leader.ErrLeaseLost) || !strings.Contains(err.Error(), `held by "b"`) {
					t.Errorf("Run = %v, want ErrLeaseLost saying b holds the lease", err)
				}
				for _, want := range tt.wantErrs {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("Run = %v, want it to say %q", err, want)
					}
				}
				s.unstick()
			})
		})
	}
}

// TestLeaseLossGracefulShutdown: with ShutdownOnLeaseLost, a loss aborts
// the leader-only work at once, as always, but the rest stops gracefully:
// in-flight EveryReplica reconciles may finish.
func TestLeaseLossGracefulShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := setupLoss(t, "every", manager.ShutdownOnLeaseLost)
		s.lease.steal(t, "b")
		<-s.leader.ctx("default/a").Done()
		synctest.Wait()
		if cause := context.Cause(s.leader.ctx("default/a")); !errors.Is(cause, leader.ErrLeaseLost) {
			t.Errorf("leader-only reconcile's ctx cause = %v, want ErrLeaseLost", cause)
		}
		if err := s.every.ctx("default/a").Err(); err != nil {
			t.Errorf("EveryReplica reconcile's ctx = %v at the loss, want it running: the shutdown is graceful", err)
		}
		if s.returned.Load() {
			t.Fatal("Run returned while an EveryReplica reconcile was finishing")
		}
		s.unstick()
		if err := s.err(t); !errors.Is(err, leader.ErrLeaseLost) {
			t.Errorf("Run = %v, want ErrLeaseLost", err)
		}
	})
}

// TestRecampaignStuckReconcile: with RecampaignOnLeaseLost, a replica whose
// leader-only Reconcile ignores its ctx does not campaign again (it would
// hold the lease with controllers that cannot run): Run fails after the
// abort timeout, and the replica never takes the lease back.
func TestRecampaignStuckReconcile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := setupLoss(t, "leader-only", manager.RecampaignOnLeaseLost)
		s.lease.steal(t, "b")
		<-s.leader.ctx("default/a").Done()
		s.lease.free(t) // b leaves: the lease could be taken again
		time.Sleep(time.Minute)
		synctest.Wait()
		if !s.returned.Load() {
			t.Fatalf("Run still running a minute after the loss (IsLeader %v, holder %q); want it to fail while a leader-only Reconcile is stuck",
				s.m.Elector().IsLeader(), s.lease.holder(t))
		}
		err := s.err(t)
		if !errors.Is(err, leader.ErrLeaseLost) || !strings.Contains(err.Error(), `controller "leader-only": reconciles still running 3s after stopping began`) {
			t.Errorf("Run = %v, want ErrLeaseLost and the stuck controller", err)
		}
		if h := s.lease.holder(t); h == "a" {
			t.Error("the replica took the lease back while its leader-only Reconcile was stuck")
		}
		s.unstick()
	})
}

// TestRecampaign: with RecampaignOnLeaseLost, a replica that lost the lease keeps its
// caches and its EveryReplica work, takes the lease back when it is free,
// and reconciles every object again, including those that changed while
// it stood by.
func TestRecampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := setupLoss(t, "", manager.RecampaignOnLeaseLost)
		s.lease.steal(t, "b")
		<-s.leader.ctx("default/a").Done()
		time.Sleep(time.Minute)
		synctest.Wait()
		if s.returned.Load() || s.m.Elector().IsLeader() {
			t.Fatalf("after the loss: Run returned %v, IsLeader %v; want a standby still running", s.returned.Load(), s.m.Elector().IsLeader())
		}
		if err := s.every.ctx("default/a").Err(); err != nil {
			t.Errorf("EveryReplica reconcile's ctx = %v after a loss with RecampaignOnLeaseLostOnLeaseLost, want it running", err)
		}
		if _, err := s.m.Kubernetes().CoreV1().ConfigMaps("default").Create(t.Context(), configMap("default", "b"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := s.leader.count("default/b"); n != 0 {
			t.Errorf("a standby reconciled default/b %d times", n)
		}

		s.lease.free(t)
		time.Sleep(leaseDuration + 5*time.Second)
		synctest.Wait()
		if !s.m.Elector().IsLeader() {
			t.Fatal("did not take the free lease back")
		}
		if a, b := s.leader.count("default/a"), s.leader.count("default/b"); a != 2 || b != 1 {
			t.Errorf("after taking the lease back, reconciles of default/a and default/b = %d, %d; want 2, 1", a, b)
		}
		// The reconciles wait for their ctx, which a graceful stop cancels
		// only after ShutdownTimeout: Run says so, and nothing more.
		if err := s.run.stop(t); errors.Is(err, leader.ErrLeaseLost) {
			t.Errorf("Run after a shutdown = %v, want no lease loss", err)
		}
	})
}

// TestLeaderOnlyControllerError: an error from a leader-only controller
// stops Run, as one from an EveryReplica controller does. Here its Start
// fails because the controller is already running.
func TestLeaderOnlyControllerError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kube := newCluster(t)
		opts, _ := electedOptions()
		m := newManager(t, kube, opts)
		ctrl, err := m.AddController("leader-only", newRecorder(), manager.ControllerOptions{}, manager.Watch{Source: configMaps(t, m)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		started := make(chan error, 1)
		go func() { started <- ctrl.Start(ctx) }()
		synctest.Wait()
		err = run(t, m).wait(t)
		if err == nil || !strings.Contains(err.Error(), `controller "leader-only" is already running`) {
			t.Errorf("Run = %v, want the leader-only controller's error", err)
		}
		cancel()
		<-started
	})
}
