package leader_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// Timing that could let two replicas lead at once is refused when the
// Elector is built, naming the value to change. (A Manager builds its
// Elector from manager.Options.LeaderElection.)
func ExampleNew_invalidTiming() {
	_, err := leader.New(fake.NewClientset(), leader.Options{
		Name:          "my-operator",
		Namespace:     "operators",
		LeaseDuration: 10 * time.Second,
		RenewDeadline: 10 * time.Second,
	})
	fmt.Println(err)
	// Output: leader: Options.LeaseDuration (10s) must be greater than Options.RenewDeadline (10s): raise LeaseDuration or lower RenewDeadline, or a standby could lead while the old leader still believes it leads
}

// Short timings, as the e2e tests use, pass the same checks as the
// defaults of 15s/10s/2s.
func ExampleNew() {
	e, err := leader.New(fake.NewClientset(), leader.Options{
		Name:          "my-operator",
		Namespace:     "operators",
		Identity:      "replica-a",
		LeaseDuration: 2 * time.Second,
		RenewDeadline: 1500 * time.Millisecond,
		RetryPeriod:   250 * time.Millisecond,
	})
	fmt.Println(err, e.IsLeader())
	// Output: <nil> false
}

// Work running under a leading context asks CheckLeading before it acts as
// the leader; here another replica takes the lease while this one leads
// (as if this process had been paused), and the check refuses at once.
func ExampleCheckLeading() {
	kube := fake.NewClientset()
	var stolen atomic.Bool
	kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if stolen.Load() { // the API server refuses renewals of a lease held by another
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "my-operator", errors.New("modified"))
		}
		return false, nil, nil
	})
	e, err := leader.New(kube, leader.Options{
		Name: "my-operator", Namespace: "operators", Identity: "replica-a",
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 250 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	leading := make(chan context.Context)
	done := make(chan error)
	go func() {
		done <- e.Run(context.Background(), func(ctx context.Context) error {
			leading <- ctx
			<-ctx.Done() // the Reconciles of a leader-only controller would stop here
			return nil
		})
	}()
	ctx := <-leading
	fmt.Println("leading:", leader.CheckLeading(ctx))

	// Another replica takes the lease over.
	l, _ := kube.CoordinationV1().Leases("operators").Get(context.Background(), "my-operator", metav1.GetOptions{})
	stolen.Store(true)
	l.Spec.HolderIdentity = ptr.To("replica-b")
	_ = kube.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), l, "operators")

	<-ctx.Done() // at this replica's next renewal
	fmt.Println("after the takeover:", leader.CheckLeading(ctx))
	fmt.Println("Run:", <-done)
	// Output:
	// leading: <nil>
	// after the takeover: leader: not the leader: leader election lost: the Lease operators/my-operator is held by "replica-b"
	// Run: leader: leader election lost: the Lease operators/my-operator is held by "replica-b"
}

// A client the operator builds itself, outside the manager, is fenced as
// the manager's writing clients are: a write made with a leading context
// is refused once its term is over, and its connection stops one that the
// term's end caught between that check and the socket.
func ExampleFenceConfig() {
	cfg := leader.FenceConfig(&rest.Config{Host: "https://kube-apiserver.example:6443"})
	kube, err := kubernetes.NewForConfig(cfg)
	fmt.Println(kube != nil, err)
	// Output: true <nil>
}
