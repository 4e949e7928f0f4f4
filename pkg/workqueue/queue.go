package workqueue

import (
	"fmt"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// PriorityInterface is an Interface whose keys carry priorities; Queue
// implements it.
type PriorityInterface[T comparable] interface {
	Interface[T]
	// AddWithPriority queues item at priority p; a waiting key keeps the
	// highest priority it was given.
	AddWithPriority(item T, p Priority)
}

// Interface is a rate-limited, delaying work queue of comparable keys. It is
// the queue the reconcile workers drain; see the package doc for the
// contract every implementation keeps.
type Interface[T comparable] interface {
	// Add queues item unless it is already waiting.
	Add(item T)
	// AddAfter queues item once d has passed; d <= 0 is the same as Add.
	// See the package doc for an Add of a key waiting on a delay.
	AddAfter(item T, d time.Duration)
	// AddRateLimited queues item after the delay its rate limiter asks for.
	AddRateLimited(item T)
	// Forget clears the rate limiter's memory of item. It does not remove
	// item from the queue; Done must still be called.
	Forget(item T)
	// NumRequeues reports how often item went through AddRateLimited since
	// its last Forget.
	NumRequeues(item T) int
	// Get blocks until an item is available or the queue shuts down.
	Get() (item T, shutdown bool)
	// Done marks item as processed.
	Done(item T)
	// Len reports how many items are waiting (not counting delayed ones).
	Len() int
	// ShutDown makes Add a no-op; Get hands out the items still waiting and
	// then returns shutdown=true, at once, to every caller.
	ShutDown()
	// ShutDownWithDrain is ShutDown that also blocks until every item handed
	// out by Get has been marked Done, or until ShutDown is called.
	ShutDownWithDrain()
	// ShuttingDown reports whether ShutDown has been called.
	ShuttingDown() bool
}

// RateLimiter decides how long an item waits before a retry. It is
// client-go's TypedRateLimiter, so every client-go limiter can be used.
type RateLimiter[T comparable] = workqueue.TypedRateLimiter[T]

// Options configures New and NewClientGo. The zero value is valid.
type Options[T comparable] struct {
	// Name labels the queue's metrics (the "name" label). Required when
	// Metrics is set.
	Name string
	// RateLimiter paces AddRateLimited. Nil means DefaultRateLimiter.
	RateLimiter RateLimiter[T]
	// Metrics receives the queue's metrics. Nil disables them.
	Metrics *Metrics
	// Clock drives delays, the starvation bound and metrics; nil means
	// the real clock.
	Clock clock.WithTicker
	// Group names the fairness group of a key: within a priority, groups
	// take turns. Nil puts every key in one group. Ignored by NewClientGo.
	Group func(T) string
	// StarvationBound is how long the oldest PriorityLow key waits before
	// the low keys get 1 Get in 4 while keys of higher priority wait (see
	// the package doc). 0 means DefaultStarvationBound. Ignored by
	// NewClientGo.
	StarvationBound time.Duration
}

// ClientGoQueue is client-go's typed rate-limiting queue behind Interface,
// for comparison and as an escape hatch; Queue is the default. It is safe
// for concurrent use.
type ClientGoQueue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T]
}

var _ Interface[string] = (*ClientGoQueue[string])(nil)

// NewClientGo returns a started client-go queue. It fails if Metrics is set
// without a Name. The queue owns a goroutine for delayed items until
// ShutDown is called.
func NewClientGo[T comparable](opts Options[T]) (*ClientGoQueue[T], error) {
	if opts.Metrics != nil && opts.Name == "" {
		return nil, fmt.Errorf("workqueue: Options.Name is empty but Options.Metrics is set: name the queue so its metrics can be labelled")
	}
	rl := opts.RateLimiter
	if rl == nil {
		rl = DefaultRateLimiter[T]()
	}
	cfg := workqueue.TypedRateLimitingQueueConfig[T]{Name: opts.Name, Clock: opts.Clock}
	if opts.Metrics != nil {
		cfg.MetricsProvider = opts.Metrics
	} else {
		// client-go uses its global provider when the provider is nil,
		// and with a name it still times every item for a no-op provider;
		// only an unnamed queue skips metrics work entirely.
		cfg.Name = ""
	}
	return &ClientGoQueue[T]{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(rl, cfg)}, nil
}
