package reconcile_test

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// A function becomes a Reconciler with Func.
func ExampleFunc() {
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		fmt.Println("reconciling", req.NamespacedName)
		return reconcile.Result{}, nil
	})

	res, err := r.Reconcile(context.Background(), reconcile.Request{
		NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"},
	})
	fmt.Println("done:", res.IsZero(), err)
	// Output:
	// reconciling default/web
	// done: true <nil>
}

// A failure that only a change to the object can fix is wrapped in
// TerminalError: the worker logs and counts it but does not retry.
func ExampleTerminalError() {
	errNoReplicas := errors.New("spec.replicas must be positive")

	err := fmt.Errorf("validating default/web: %w", reconcile.TerminalError(errNoReplicas))
	fmt.Println(err)
	fmt.Println("terminal:", reconcile.IsTerminal(err))
	fmt.Println("is errNoReplicas:", errors.Is(err, errNoReplicas))
	fmt.Println("plain error terminal:", reconcile.IsTerminal(errNoReplicas))
	// Output:
	// validating default/web: terminal error: spec.replicas must be positive
	// terminal: true
	// is errNoReplicas: true
	// plain error terminal: false
}

// A Controller drains its queue into a Reconciler until Start's ctx is
// cancelled. A key enqueued while it is already waiting is reconciled once.
func ExampleNew() {
	done := make(chan struct{})
	c, err := reconcile.New("configmaps", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		fmt.Println("reconcile", req.NamespacedName)
		if req.Name == "c" {
			close(done)
		}
		return reconcile.Result{}, nil
	}), reconcile.Options{Workers: 1})
	if err != nil {
		fmt.Println(err)
		return
	}

	for _, name := range []string{"a", "b", "a", "c"} {
		c.Enqueue(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}})
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Start(ctx) }()
	<-done
	cancel()
	fmt.Println("stopped:", <-errc)
	// Output:
	// reconcile default/a
	// reconcile default/b
	// reconcile default/c
	// stopped: <nil>
}
