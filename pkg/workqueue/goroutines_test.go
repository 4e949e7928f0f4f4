package workqueue_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// TestQueueGoroutines checks the Queue doc's goroutine map: none until the
// first delay, whatever the traffic, including a queue that hovers around
// a quarter of an old peak of thousands of keys; then the one that moves
// delayed keys, which ShutDown ends (goleak checks that in TestMain). The
// fake clock never fires a timer, so a goroutine started per key would
// still be there when counted.
func TestQueueGoroutines(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	before := runtime.NumGoroutine()
	q, err := workqueue.New(workqueue.Options[string]{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer q.ShutDown()
	started := func() int { return runtime.NumGoroutine() - before }

	const peak = 20_000
	for i := range peak {
		q.AddWithPriority(fmt.Sprintf("ns/k-%05d", i), workqueue.PriorityLow)
	}
	for q.Len() >= peak/4 {
		k, _ := q.Get()
		q.Done(k)
	}
	for i := range 2000 { // hover around peak/4: one key in, one key out
		q.Add(fmt.Sprintf("ns/hover-%d", i))
		k, _ := q.Get()
		q.Done(k)
	}
	if n := started(); n > 0 {
		t.Errorf("%d goroutines started by a queue that never delayed a key, want 0", n)
	}
	q.AddAfter("later", time.Hour)
	q.AddAfter("later2", time.Minute)
	if n := started(); n > 1 {
		t.Errorf("%d goroutines started by a queue with delayed keys, want 1", n)
	}
}
