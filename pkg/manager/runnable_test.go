package manager_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// TestLeaderOnlyRunnable runs in a synctest bubble: a Runnable added with
// AddLeaderOnly starts only while this replica leads, with a leading
// context, which is cancelled when the lease is lost; it starts again when
// the replica leads again. Its error stops Run.
func TestLeaderOnlyRunnable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kube := newCluster(t)
		lease := newLeaseAPI(kube)
		lease.steal(t, "b")
		opts, _ := electedOptions()
		opts.OnLeaseLost = manager.RecampaignOnLeaseLost
		m := newManager(t, kube, opts)
		starts := make(chan context.Context, 2)
		var terms atomic.Int32
		errBoom := errors.New("boom")
		if err := m.AddLeaderOnly(runnableFunc(func(ctx context.Context) error {
			term := terms.Add(1)
			starts <- ctx
			<-ctx.Done()
			if term == 2 {
				return errBoom
			}
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		r := run(t, m)
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(starts) != 0 {
			t.Fatal("a leader-only Runnable started on a standby")
		}

		lease.free(t)
		time.Sleep(leaseDuration + 5*time.Second)
		first := <-starts
		if err := leader.CheckLeading(first); err != nil {
			t.Errorf("CheckLeading in a leader-only Runnable = %v, want nil while leading", err)
		}
		lease.steal(t, "b")
		<-first.Done()
		if err := leader.CheckLeading(first); !errors.Is(err, leader.ErrNotLeader) || !errors.Is(context.Cause(first), leader.ErrLeaseLost) {
			t.Errorf("after the loss: CheckLeading = %v, ctx cause = %v; want ErrNotLeader, ErrLeaseLost", err, context.Cause(first))
		}

		lease.free(t)
		time.Sleep(leaseDuration + 5*time.Second)
		second := <-starts
		if second == first || leader.CheckLeading(second) != nil {
			t.Fatal("the Runnable did not start anew in the second term")
		}
		lease.steal(t, "b")
		// The second term's Runnable returns an error of its own when the
		// loss cancels its ctx: that stops Run.
		if err := r.wait(t); !errors.Is(err, errBoom) {
			t.Errorf("Run = %v, want the leader-only Runnable's error", err)
		}
	})
}

// TestAddLeaderOnlyWithoutElection: without leader election, a leader-only
// Runnable runs like any other.
func TestAddLeaderOnlyWithoutElection(t *testing.T) {
	m := newManager(t, newCluster(t), manager.Options{})
	started := make(chan error, 1)
	if err := m.AddLeaderOnly(runnableFunc(func(ctx context.Context) error {
		started <- leader.CheckLeading(ctx)
		<-ctx.Done()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := m.AddLeaderOnly(nil); err == nil || !strings.Contains(err.Error(), "AddLeaderOnly(nil)") {
		t.Errorf("AddLeaderOnly(nil) = %v, want an error", err)
	}
	r := run(t, m)
	select {
	case err := <-started:
		if err != nil {
			t.Errorf("CheckLeading without leader election = %v, want nil", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the Runnable did not start")
	}
	if err := m.AddLeaderOnly(runnableFunc(func(context.Context) error { return nil })); err == nil || !strings.Contains(err.Error(), "AddLeaderOnly after Run started") {
		t.Errorf("AddLeaderOnly after Run = %v, want an error", err)
	}
	if err := r.stop(t); err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestRunnableShutdownBound runs in a synctest bubble: a Runnable that
// ignores its ctx holds Run up for ShutdownTimeout at most; Run then
// returns an error naming it.
func TestRunnableShutdownBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newManager(t, newCluster(t), manager.Options{ShutdownTimeout: 7 * time.Second})
		release := make(chan struct{})
		defer close(release)
		if err := m.Add(runnableFunc(func(context.Context) error { <-release; return nil })); err != nil {
			t.Fatal(err)
		}
		r := run(t, m)
		time.Sleep(time.Second)
		began := time.Now()
		r.cancel()
		err := r.wait(t)
		if took := time.Since(began); took != 7*time.Second {
			t.Errorf("Run returned %v after its ctx was cancelled, want ShutdownTimeout (7s)", took)
		}
		if err == nil || !strings.Contains(err.Error(), "Runnable 0 (manager_test.runnableFunc) did not return within 7s") {
			t.Errorf("Run = %v, want an error naming the stuck Runnable", err)
		}
	})
}

// TestBroadcasterStoppedWhenListenFails: Run stops the event broadcaster on
// every return path, here a listener that cannot open.
func TestBroadcasterStoppedWhenListenFails(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	m := newManager(t, newCluster(t), manager.Options{HTTPAddr: taken.Addr().String()})
	_ = m.EventRecorder("test") // starts the broadcaster
	err = m.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "listening on Options.HTTPAddr") {
		t.Fatalf("Run = %v, want the listen error", err)
	}
	goleak.VerifyNone(t, leaks)
}
