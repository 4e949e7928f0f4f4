package leader_test

import (
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes/fake"

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
