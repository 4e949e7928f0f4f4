package workqueue

import (
	"fmt"
	"maps"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Priority orders waiting keys: a higher priority is handed out first, and
// keys of one priority come out first in, first out (round-robin across
// fairness groups).
type Priority int8

// The priorities. The informer side adds keys from an informer's initial
// list, and resyncs that changed nothing, at PriorityLow, and real watch
// events at PriorityNormal; PriorityHigh is for the user.
const (
	PriorityLow    Priority = -1
	PriorityNormal Priority = 0
	PriorityHigh   Priority = 1
)

const numLevels = 3

func (p Priority) level() int { return int(max(PriorityLow, min(p, PriorityHigh))) + 1 }

// String returns "low", "normal" or "high".
func (p Priority) String() string {
	return [...]string{"low", "normal", "high"}[p.level()]
}

// DefaultStarvationBound is how long the oldest PriorityLow key may wait
// before the low keys get their share of Gets, unless
// Options.StarvationBound says otherwise.
const DefaultStarvationBound = 5 * time.Second

// Queue is ctrlkit's work queue: client-go's semantics (see the package
// doc) plus priorities, fairness across groups of keys, and delays and rate
// limiting in one structure, with no goroutine per delayed key.
//
// Waiting keys are served highest priority first. Within a priority, keys
// are grouped by Options.Group (the namespace of a reconcile.Request, say)
// and the groups take turns, so one group with 10,000 waiting keys cannot
// starve another with one. Once the oldest PriorityLow key has waited
// Options.StarvationBound, the low keys get one Get in every four while
// keys of higher priority wait, so a steady stream of changes never starves
// the backlog, and the backlog never holds up a change by more than one Get.
//
// Goroutines: one, which moves delayed keys into the queue when their time
// comes; the first key delayed (by AddAfter or AddRateLimited with a
// positive delay) starts it and ShutDown ends it. A queue that never delays
// a key has none. Metrics are plain
// numbers kept under the queue's lock and read when Prometheus scrapes, so
// they cost no goroutine and no atomic operation per key.
type Queue[T comparable] struct {
	rl       RateLimiter[T]
	groupOf  func(T) string
	bound    time.Duration
	clock    clock.WithTicker
	metricOn bool

	mu       sync.Mutex
	cond     sync.Cond
	nodes    map[T]*node[T]
	peak     int // most entries in nodes since it was last rebuilt
	levels   [numLevels]level[T]
	ready    int            // keys in the levels
	held     [numLevels]int // keys queued while in processing, by priority: Done queues them
	passed   int            // Gets that went to higher keys while low keys waited, since a low one
	working  int            // keys handed out and not Done
	delayed  delayHeap[T]
	shutdown bool
	drain    bool               // ShutDownWithDrain waits, and ShutDown has not been called
	free     freeList[node[T]]  // spare nodes
	freeG    freeList[group[T]] // spare groups
	shed     bool               // a backlog is draining: its nodes are not kept as spares (release)

	wake     chan struct{} // a new earliest delayed key; capacity 1
	stop     chan struct{}
	wg       sync.WaitGroup
	epoch    time.Time // timestamps are monotonic offsets from it: cheaper than time.Now
	procHead *node[T]  // keys in processing, for the unfinished-work gauges
	delayOn  bool      // delayLoop started (on the first delay)
	stats    stats     // metrics, when metricOn
}

// maxFree bounds the spare nodes and groups a Queue keeps, so that the
// steady state of Add, Get and Done allocates nothing while a drained
// backlog of any size leaves at most maxFree of each behind.
const maxFree = 256

// freeList holds up to maxFree zeroed values for reuse.
type freeList[E any] []*E

// get returns a spare value, or a new one.
func (f *freeList[E]) get() *E {
	k := len(*f)
	if k == 0 {
		return new(E)
	}
	e := (*f)[k-1]
	*f = (*f)[:k-1]
	return e
}

// put zeroes e and keeps it for reuse, unless the list is full.
func (f *freeList[E]) put(e *E) {
	if len(*f) < maxFree {
		var zero E
		*e = zero
		*f = append(*f, e)
	}
}

// New returns a started Queue. It fails if Metrics is set without a Name,
// or if StarvationBound is negative.
func New[T comparable](opts Options[T]) (*Queue[T], error) {
	if opts.Metrics != nil && opts.Name == "" {
		return nil, fmt.Errorf("workqueue: Options.Name is empty but Options.Metrics is set: name the queue so its metrics can be labelled")
	}
	if opts.StarvationBound < 0 {
		return nil, fmt.Errorf("workqueue: Options.StarvationBound is %v: use 0 for the default of %v, or a positive duration", opts.StarvationBound, DefaultStarvationBound)
	}
	q := &Queue[T]{
		rl:      opts.RateLimiter,
		groupOf: opts.Group,
		bound:   opts.StarvationBound,
		clock:   opts.Clock,
		nodes:   make(map[T]*node[T]),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	q.cond.L = &q.mu
	if q.rl == nil {
		q.rl = DefaultRateLimiter[T]()
	}
	if q.bound == 0 {
		q.bound = DefaultStarvationBound
	}
	if q.clock == nil {
		q.clock = clock.RealClock{}
	}
	q.epoch = q.clock.Now()
	for i := range q.levels {
		q.levels[i].groups = make(map[string]*group[T])
	}
	if opts.Metrics != nil {
		q.metricOn = true
		opts.Metrics.forQueue(opts.Name, q.snapshot)
	}
	return q, nil
}

var _ PriorityInterface[string] = (*Queue[string])(nil)

// Add queues item at PriorityNormal.
func (q *Queue[T]) Add(item T) { q.AddWithPriority(item, PriorityNormal) }

// AddWithPriority queues item at priority p. A key that is already waiting
// stays where it is, unless p is higher than its priority: then it moves to
// the end of p's line, keeping the time it has waited. A key in processing
// is queued again on Done, at the highest priority it was given meanwhile.
// A key waiting on AddAfter is queued now and its delay dropped.
func (q *Queue[T]) AddWithPriority(item T, p Priority) {
	p = max(PriorityLow, min(p, PriorityHigh))
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	n := q.nodes[item]
	if n == nil {
		n = q.newNode(item)
	}
	if n.heapIdx >= 0 {
		q.delayed.remove(n) // an add now is earlier than any delay
	}
	q.addLocked(n, p)
}

// addLocked marks n as queued at priority p (or higher, if it already is).
func (q *Queue[T]) addLocked(n *node[T], p Priority) {
	if n.queued {
		if p <= n.prio {
			return
		}
		if n.inLine {
			q.unlink(n)
			n.prio = p
			q.push(n)
		} else { // in processing: Done queues it
			q.held[n.prio.level()]--
			n.prio = p
			q.held[p.level()]++
		}
		return
	}
	n.queued = true
	n.prio = p
	if p == PriorityLow || q.metricOn {
		n.since = q.now() // a low key's age, and the start of its queue duration
	}
	if q.metricOn {
		q.stats.adds++
	}
	if n.processing {
		q.held[p.level()]++
		return
	}
	q.push(n)
	q.cond.Signal()
}

// AddAfter queues item once d has passed. The earliest time wins: a key
// already waiting stays, and a key already delayed keeps the sooner of its
// two times. d <= 0 is Add.
func (q *Queue[T]) AddAfter(item T, d time.Duration) {
	if d <= 0 {
		q.Add(item)
		return
	}
	at := q.now() + d
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if q.metricOn {
		q.stats.retries++
	}
	n := q.nodes[item]
	if n == nil {
		n = q.newNode(item)
	}
	if n.queued && !n.processing {
		return // already waiting: that is sooner
	}
	if !q.delayOn {
		q.delayOn = true
		q.wg.Go(q.delayLoop)
	}
	if n.heapIdx >= 0 {
		if at >= n.readyAt {
			return
		}
		n.readyAt = at
		q.delayed.fix(n)
	} else {
		n.readyAt = at
		q.delayed.push(n)
	}
	if q.delayed.nodes[0] == n {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// AddRateLimited queues item after the delay its rate limiter asks for.
func (q *Queue[T]) AddRateLimited(item T) { q.AddAfter(item, q.rl.When(item)) }

// Forget makes the rate limiter forget item's failures.
func (q *Queue[T]) Forget(item T) { q.rl.Forget(item) }

// NumRequeues reports item's failures since its last Forget.
func (q *Queue[T]) NumRequeues(item T) int { return q.rl.NumRequeues(item) }

// Get blocks until a key is waiting and hands it out, or returns
// shutdown=true once the queue is shut down and empty.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.ready == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.ready == 0 {
		return item, true
	}
	n := q.pop()
	n.queued = false
	n.processing = true
	q.working++
	if q.metricOn {
		now := q.now()
		q.stats.latency.observe(now - n.since)
		n.started = now
		n.procNext = q.procHead
		if q.procHead != nil {
			q.procHead.procPrev = n
		}
		q.procHead = n
	}
	return n.item, false
}

// Done marks item as processed. If it was added meanwhile, it is queued
// again.
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.nodes[item]
	if n == nil || !n.processing {
		return
	}
	n.processing = false
	q.working--
	if q.metricOn {
		q.stats.workDuration.observe(q.now() - n.started)
		if n.procPrev != nil {
			n.procPrev.procNext = n.procNext
		} else {
			q.procHead = n.procNext
		}
		if n.procNext != nil {
			n.procNext.procPrev = n.procPrev
		}
		n.procPrev, n.procNext = nil, nil
	}
	switch {
	case n.queued: // as client-go, even after ShutDown: Get still hands it out
		q.held[n.prio.level()]--
		q.push(n)
		q.cond.Signal()
	case n.heapIdx < 0:
		q.release(n)
	}
	if q.working == 0 && q.shutdown { // wake ShutDownWithDrain
		q.cond.Broadcast()
	}
}

// Len reports how many keys are waiting (not delayed, not in processing).
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ready
}

// ShutDown makes Add a no-op and drops delayed keys; Get hands out the keys
// still waiting and then returns shutdown=true. A ShutDownWithDrain that is
// waiting for keys in processing stops waiting. ShutDown waits for the
// queue's goroutine to end.
func (q *Queue[T]) ShutDown() {
	q.shutDown(false)
}

// ShutDownWithDrain is ShutDown that also waits until every key handed out
// by Get has been marked Done, or until ShutDown is called.
func (q *Queue[T]) ShutDownWithDrain() {
	q.shutDown(true)
}

func (q *Queue[T]) shutDown(drain bool) {
	q.mu.Lock()
	q.drain = drain
	if !q.shutdown {
		q.shutdown = true
		close(q.stop)
		for q.delayed.len() > 0 {
			n := q.delayed.nodes[0]
			q.delayed.remove(n)
			if !n.queued && !n.processing {
				q.release(n)
			}
		}
	}
	q.cond.Broadcast()
	for q.drain && q.working > 0 {
		q.cond.Wait()
	}
	q.mu.Unlock()
	q.wg.Wait()
}

// ShuttingDown reports whether ShutDown has been called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

func (q *Queue[T]) newNode(item T) *node[T] {
	n := q.free.get()
	n.item = item
	n.heapIdx = -1
	q.nodes[item] = n
	q.peak = max(q.peak, len(q.nodes))
	return n
}

// shrinkFrom is the size of the key map from which release rebuilds it
// once it holds under a quarter of that: a drained backlog of any size
// leaves a map built for fewer than shrinkFrom keys.
const shrinkFrom = 1024

// release forgets a node that is neither queued, processing nor delayed.
// Go maps never shrink, so once a large backlog (the initial list of a
// big cluster) has drained to under a quarter of its peak, the key map is
// rebuilt at its present size: the copy is paid for by the deletes since
// the peak, and the backlog's memory is given back.
//
// The backlog's nodes are not kept as spares either. They were allocated
// while the backlog was queued, among whatever else the process allocated
// then (a scan's pages, a move's requests, the watch events of an initial
// list); a few hundred of them kept for reuse would each hold on to a
// page of that time's garbage long after it was collected. So from the
// first rebuild until the queue is empty, released nodes are dropped, and
// so are the spares kept before; once it is empty, the map is rebuilt
// empty too. The steady state after that allocates its few spares anew;
// a queue that never empties again allocates each node, as it would
// without spares.
func (q *Queue[T]) release(n *node[T]) {
	delete(q.nodes, n.item)
	if !q.shed {
		q.free.put(n)
	}
	if q.peak >= shrinkFrom && len(q.nodes) < q.peak/4 {
		m := make(map[T]*node[T], len(q.nodes))
		maps.Copy(m, q.nodes)
		q.nodes, q.peak = m, len(m)
		q.shed, q.free, q.freeG = true, nil, nil
	}
	if q.shed && len(q.nodes) == 0 {
		// The backlog is gone: so is the last map built for its tail.
		q.nodes, q.peak, q.shed = make(map[T]*node[T]), 0, false
	}
}

// now is the time since q.epoch, from the monotonic clock.
func (q *Queue[T]) now() time.Duration { return q.clock.Since(q.epoch) }
