package workqueue_test

import (
	"fmt"
	"strings"

	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// A worker loop: Get a key, process it, then Done (and Forget on success).
// A key added while it is waiting is stored once.
func Example() {
	q, err := workqueue.New(workqueue.Options[string]{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.ShutDown()

	for _, key := range []string{"default/a", "default/b", "default/a"} {
		q.Add(key)
	}
	fmt.Println("waiting:", q.Len())
	for q.Len() > 0 {
		key, _ := q.Get()
		fmt.Println("processing", key)
		q.Forget(key) // success: no backoff to remember
		q.Done(key)
	}
	// Output:
	// waiting: 2
	// processing default/a
	// processing default/b
}

// Higher priorities are served first; a resync at PriorityLow waits behind
// real events.
func ExampleQueue_AddWithPriority() {
	q, err := workqueue.New(workqueue.Options[string]{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.ShutDown()

	q.AddWithPriority("default/resynced", workqueue.PriorityLow)
	q.Add("default/changed")
	q.AddWithPriority("default/urgent", workqueue.PriorityHigh)
	for q.Len() > 0 {
		key, _ := q.Get()
		fmt.Println(key)
		q.Done(key)
	}
	// Output:
	// default/urgent
	// default/changed
	// default/resynced
}

// With Options.Group, groups of keys take turns: a namespace with a backlog
// does not make a quiet namespace wait behind it.
func ExampleOptions_group() {
	namespace := func(key string) string {
		ns, _, _ := strings.Cut(key, "/")
		return ns
	}
	q, err := workqueue.New(workqueue.Options[string]{Group: namespace})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.ShutDown()

	for _, key := range []string{"busy/1", "busy/2", "busy/3", "quiet/1"} {
		q.Add(key)
	}
	for q.Len() > 0 {
		key, _ := q.Get()
		fmt.Println(key)
		q.Done(key)
	}
	// Output:
	// busy/1
	// quiet/1
	// busy/2
	// busy/3
}
