package reconcile_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestExcludeWaitsForTheRunningReconcile: Exclude's channel closes only
// once the running Reconcile of the key has returned; while excluded the
// key is dropped; after Include it is reconciled again.
func TestExcludeWaitsForTheRunningReconcile(t *testing.T) {
	entered, release := make(chan struct{}, 10), make(chan struct{})
	var mu sync.Mutex
	calls := map[reconcile.Request]int{}
	c, err := reconcile.New("exclude", reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		calls[r]++
		mu.Unlock()
		entered <- struct{}{}
		if r.Name == "slow" {
			<-release
		}
		return reconcile.Result{}, nil
	}), reconcile.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	count := func(r reconcile.Request) int { mu.Lock(); defer mu.Unlock(); return calls[r] }

	slow := req("ns", "slow")
	c.Enqueue(slow)
	receive(t, entered, "the slow Reconcile to start")
	idle := c.Exclude(slow)
	select {
	case <-idle:
		t.Fatal("Exclude's channel closed while the Reconcile was running")
	default:
	}
	close(release)
	receive(t, idle, "Exclude's channel to close after the Reconcile returned")

	c.Enqueue(slow) // dropped while excluded
	fast := req("ns", "fast")
	c.Enqueue(fast) // a marker: the queue is FIFO within a priority
	receive(t, entered, "the marker's Reconcile")
	eventually(t, 5*time.Second, func() bool { return c.Queue().Len() == 0 }, "the queue to drain")
	if n := count(slow); n != 1 {
		t.Fatalf("an excluded key was reconciled: %d calls", n)
	}
	if ch := c.Exclude(fast); ch == nil {
		t.Fatal("nil channel")
	} else {
		receive(t, ch, "Exclude of an idle key to close at once")
	}

	c.Include(slow)
	c.Enqueue(slow)
	receive(t, entered, "the Reconcile after Include")
	if n := count(slow); n != 2 {
		t.Errorf("after Include: %d calls, want 2", n)
	}
}

// TestOwnsDropsKeysNotOwned: a key Options.Owns refuses is not reconciled.
func TestOwnsDropsKeysNotOwned(t *testing.T) {
	seen := make(chan reconcile.Request, 10)
	c, err := reconcile.New("owns", reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
		seen <- r
		return reconcile.Result{}, nil
	}), reconcile.Options{Owns: func(r reconcile.Request) bool { return r.Name != "theirs" }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	c.Enqueue(req("ns", "theirs"))
	c.Enqueue(req("ns", "mine"))
	if got := receive(t, seen, "a Reconcile"); got.Name != "mine" {
		t.Errorf("reconciled %v, want only ns/mine", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-seen:
		t.Errorf("reconciled %v too", r)
	default:
	}
}
