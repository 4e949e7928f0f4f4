// Package bench measures ctrlkit's work queue side by side with client-go's
// typed rate-limiting queue and controller-runtime's priority queue. It holds
// benchmarks only; see README.md and `make bench`.
package bench

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientgo "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// queue is what the scenarios need from each implementation. Every
// implementation pays the same interface call, so it does not skew ratios.
type queue interface {
	// Add queues key at the priority of a watch event.
	Add(key string)
	// AddLow queues key at the priority of an informer's initial list.
	AddLow(key string)
	AddAfter(key string, d time.Duration)
	Get() (key string, shutdown bool)
	Done(key string)
	ShutDown()
}

// impl builds one implementation, with or without metrics.
type impl struct {
	name string
	new  func(b *testing.B, metrics bool) queue
}

// impls are the three queues, ctrlkit first; the order is the column order
// of benchtable.
var impls = []impl{
	{"ctrlkit", newCtrlkit},
	{"client-go", newClientGo},
	{"controller-runtime", newControllerRuntime},
}

// queueName labels the queues' metrics when metrics are on.
const queueName = "bench"

// newMetrics returns ctrlkit's Metrics on a fresh registry, so repeated
// runs of a benchmark never collide on registration.
func newMetrics(b *testing.B) *workqueue.Metrics {
	m, err := workqueue.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatalf("workqueue.NewMetrics: %v", err)
	}
	return m
}

// namespaceOf is the fairness group of a "namespace/name" key, as
// reconcile.Controller groups its requests by namespace.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// ctrlkitQueue is workqueue.Queue configured as reconcile.Controller
// configures it: namespaces take turns.
type ctrlkitQueue struct{ *workqueue.Queue[string] }

func newCtrlkit(b *testing.B, metrics bool) queue {
	opts := workqueue.Options[string]{Group: namespaceOf}
	if metrics {
		opts.Name, opts.Metrics = queueName, newMetrics(b)
	}
	q, err := workqueue.New(opts)
	if err != nil {
		b.Fatalf("workqueue.New: %v", err)
	}
	return ctrlkitQueue{q}
}

func (q ctrlkitQueue) AddLow(key string) { q.AddWithPriority(key, workqueue.PriorityLow) }

// clientGoQueue is client-go's typed rate-limiting queue. It has no
// priorities: AddLow is Add, first in, first out.
type clientGoQueue struct {
	clientgo.TypedRateLimitingInterface[string]
}

func newClientGo(b *testing.B, metrics bool) queue {
	// With an empty Name client-go creates no metrics at all (newQueueMetrics
	// and newRetryMetrics return no-ops for len(name) == 0), and starts no
	// unfinished-work goroutine. A named queue without a provider would
	// fall back to the global provider, which importing controller-runtime
	// sets to its own Prometheus metrics.
	cfg := clientgo.TypedRateLimitingQueueConfig[string]{}
	if metrics {
		cfg.Name, cfg.MetricsProvider = queueName, newMetrics(b)
	}
	q := clientgo.NewTypedRateLimitingQueueWithConfig(clientgo.DefaultTypedControllerRateLimiter[string](), cfg)
	return clientGoQueue{q}
}

func (q clientGoQueue) AddLow(key string) { q.Add(key) }

// lowPriority is handler.LowPriority, which controller-runtime's handlers
// give the keys of the initial list and of resyncs that changed nothing;
// changes get the default priority, 0, through Add.
var lowPriority = -100

// crQueue is controller-runtime's priority queue.
type crQueue struct {
	priorityqueue.PriorityQueue[string]
}

func newControllerRuntime(b *testing.B, metrics bool) queue {
	// priorityqueue has no metrics switch: with an empty name it uses its
	// noMetrics (no add/processing time maps, no unfinished-work
	// goroutine); with a name and a no-op provider it would still keep
	// those maps. So off is the empty name, and on is ctrlkit's Metrics,
	// which implements client-go's MetricsProvider.
	if !metrics {
		return crQueue{priorityqueue.New[string]("")}
	}
	m := newMetrics(b)
	return crQueue{priorityqueue.New(queueName, func(o *priorityqueue.Opts[string]) {
		o.MetricProvider = m
	})}
}

func (q crQueue) AddLow(key string) {
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &lowPriority}, key)
}

// keys returns n distinct "nsX/name-i" keys in ten namespaces, built once
// and shared, so that no benchmark measures building strings.
func keys(n int) []string {
	keyCache.mu.Lock()
	defer keyCache.mu.Unlock()
	for i := len(keyCache.keys); i < n; i++ {
		keyCache.keys = append(keyCache.keys, fmt.Sprintf("ns%d/name-%d", i%10, i))
	}
	return keyCache.keys[:n:n]
}

var keyCache struct {
	mu   sync.Mutex
	keys []string
}

// workers starts n goroutines that Get and Done until the queue shuts down,
// calling process (if not nil) between the two, and counting the keys they
// finished. allDone is closed when want keys are finished. wait joins the
// goroutines; call it after ShutDown.
func workers(q queue, n, want int, process func(key string)) (allDone <-chan struct{}, wait func()) {
	done := make(chan struct{})
	var (
		finished atomic.Int64
		wg       sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				if process != nil {
					process(k)
				}
				q.Done(k)
				if finished.Add(1) == int64(want) {
					close(done)
				}
			}
		})
	}
	return done, wg.Wait
}
