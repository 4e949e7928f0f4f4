package workqueue

import (
	"fmt"
	"maps"
	"slices"
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

// DefaultStarvationBound is how long a PriorityLow key may wait before it is
// served as if it were PriorityNormal, unless Options.StarvationBound says
// otherwise.
const DefaultStarvationBound = 5 * time.Second

// Queue is ctrlkit's work queue: client-go's semantics (see the package
// doc) plus priorities, fairness across groups of keys, and delays and rate
// limiting in one structure, with no goroutine per delayed key.
//
// Waiting keys are served highest priority first. Within a priority, keys
// are grouped by Options.Group (the namespace of a reconcile.Request, say)
// and the groups take turns, so one group with 10,000 waiting keys cannot
// starve another with one. A PriorityLow key that has waited longer than
// Options.StarvationBound moves to PriorityNormal, so a steady stream of
// changes never starves the backlog.
//
// Goroutines: one that moves delayed keys into the queue when their time
// comes, started by the first delay and ended by ShutDown, and, after a
// backlog of thousands of keys drains, one that waits a second to give its
// memory back; a queue that never delays a key or holds such a backlog has
// none. Metrics are plain numbers kept under the
// queue's lock and read when Prometheus scrapes, so they cost no goroutine
// and no atomic operation per key.
type Queue[T comparable] struct {
	rl       RateLimiter[T]
	groupOf  func(T) string
	bound    time.Duration
	clock    clock.WithTicker
	metricOn bool

	mu       sync.Mutex
	cond     sync.Cond
	nodes    map[T]*node[T]
	levels   [numLevels]level[T]
	ready    int // keys in the levels
	working  int // keys handed out and not Done
	delayed  delayHeap[T]
	shutdown bool
	free     []*node[T] // spare nodes, at most max(maxFree, peak)
	freeG    []*group[T]
	peak     int // most keys held since q.nodes was last rebuilt
	// small: the queue has held under peak/4 since the shrink timer of
	// generation smallGen was set (see release).
	small    bool
	smallGen uint64

	wake     chan struct{} // a new earliest delayed key; capacity 1
	stop     chan struct{}
	wg       sync.WaitGroup
	epoch    time.Time // timestamps are monotonic offsets from it: cheaper than time.Now
	procHead *node[T]  // keys in processing, for the unfinished-work gauges
	delayOn  bool      // delayLoop started (on the first delay)
	stats    stats     // metrics, when metricOn
}

// node is the state of one key that is waiting, in processing, or delayed.
type node[T comparable] struct {
	item       T
	prio       Priority  // level while waiting
	queued     bool      // waiting, or to be re-queued on Done (client-go's "dirty")
	processing bool      // handed out by Get, Done not yet called
	inLevel    bool      // linked into a level
	group      *group[T] // while in a level
	prev, next *node[T]  // FIFO within the group
	agePrev    *node[T]  // PriorityLow age list
	ageNext    *node[T]
	since      time.Duration // when it entered its level, since q.epoch (low keys, or metrics)
	started    time.Duration // when Get handed it out, since q.epoch (metrics)
	procPrev   *node[T]      // list of keys in processing (metrics)
	procNext   *node[T]
	readyAt    time.Duration // while delayed, since q.epoch
	heapIdx    int           // index in delayed, -1 when not delayed
	delayPrio  Priority      // priority to enter with when the delay ends
}

// group is a FIFO of the keys of one fairness group at one level; the
// groups of a level form a ring that Get walks round-robin.
type group[T comparable] struct {
	key        string
	head, tail *node[T]
	prev, next *group[T] // ring
}

type level[T comparable] struct {
	groups           map[string]*group[T]
	cursor           *group[T] // next group to serve; nil when empty
	n                int
	ageHead, ageTail *node[T] // PriorityLow only: all keys by arrival
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

var _ Interface[string] = (*Queue[string])(nil)

// Add queues item at PriorityNormal.
func (q *Queue[T]) Add(item T) { q.AddWithPriority(item, PriorityNormal) }

// AddWithPriority queues item at priority p. A key that is already waiting
// stays where it is, unless p is higher than its priority: then it moves to
// the end of p's line. A key in processing is queued again on Done, at the
// highest priority it was given meanwhile.
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
		if p > n.prio {
			if n.inLevel {
				q.unlink(n)
				n.prio = p
				q.push(n)
			} else {
				n.prio = p
			}
		}
		return
	}
	n.queued = true
	n.prio = p
	if q.metricOn {
		q.stats.adds++
	}
	if n.processing {
		return // Done queues it again
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
		n.delayPrio = PriorityNormal
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
func (q *Queue[T]) AddRateLimited(item T) {
	d := q.rl.When(item)
	if q.metricOn {
		q.mu.Lock()
		q.stats.retries++
		q.mu.Unlock()
	}
	q.AddAfter(item, d)
}

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
// still waiting and then returns shutdown=true. It waits for the queue's
// goroutines to end.
func (q *Queue[T]) ShutDown() {
	q.shutDown(false)
}

// ShutDownWithDrain is ShutDown that also waits until every key handed out
// by Get has been marked Done.
func (q *Queue[T]) ShutDownWithDrain() {
	q.shutDown(true)
}

func (q *Queue[T]) shutDown(drain bool) {
	q.mu.Lock()
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
	for drain && q.working > 0 {
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
	var n *node[T]
	if k := len(q.free); k > 0 {
		n = q.free[k-1]
		q.free = q.free[:k-1]
	} else {
		n = &node[T]{}
	}
	n.item = item
	n.heapIdx = -1
	q.nodes[item] = n
	q.peak = max(q.peak, len(q.nodes))
	if q.small && len(q.nodes) >= q.peak/4 {
		q.small = false // the backlog came back
	}
	return n
}

// After a large backlog drains (the initial list of a big cluster), the
// queue gives back what held it, about 220 B per key: Go maps never shrink
// on their own, and a free list keeps every node it is given. When the
// queue falls under a quarter of its peak it sets a timer; if it is still
// that small shrinkAfter later, the key map is rebuilt for what it holds
// and the free list is cut to maxFree. A backlog that comes back sooner
// keeps its memory and pays no rebuild. Only peaks above rebuildAbove are
// given back.
const (
	maxFree      = 1024
	rebuildAbove = 4096
	shrinkAfter  = time.Second
)

// release forgets a node that is neither queued, processing nor delayed.
func (q *Queue[T]) release(n *node[T]) {
	delete(q.nodes, n.item)
	*n = node[T]{}
	if len(q.free) < max(maxFree, q.peak) {
		q.free = append(q.free, n)
	}
	if q.small || q.shutdown || q.peak <= rebuildAbove || len(q.nodes) >= q.peak/4 {
		return
	}
	q.small = true
	q.smallGen++
	gen := q.smallGen
	t := q.clock.NewTimer(shrinkAfter)
	q.wg.Go(func() { // ends when the timer fires or the queue shuts down
		select {
		case <-t.C():
			q.shrinkIfSmall(gen)
		case <-q.stop:
			t.Stop()
		}
	})
}

// shrinkIfSmall gives back a drained backlog's memory if the queue has
// stayed small since the timer of generation gen was set.
func (q *Queue[T]) shrinkIfSmall(gen uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.small || q.smallGen != gen || q.shutdown {
		return
	}
	nodes := make(map[T]*node[T], len(q.nodes)) // sized for what it holds now
	maps.Copy(nodes, q.nodes)
	q.nodes, q.peak = nodes, len(nodes)
	q.free = slices.Clone(q.free[:min(len(q.free), maxFree)])
	q.small = false
}

// push appends n to its group's line at its priority.
func (q *Queue[T]) push(n *node[T]) {
	lv := &q.levels[n.prio.level()]
	if n.prio == PriorityLow || q.metricOn {
		n.since = q.now()
	}
	var key string
	if q.groupOf != nil {
		key = q.groupOf(n.item)
	}
	g := lv.groups[key]
	if g == nil {
		g = q.newGroup(key)
		lv.groups[key] = g
		if lv.cursor == nil {
			g.prev, g.next = g, g
			lv.cursor = g
		} else { // join the ring just before the cursor: served last this round
			g.prev, g.next = lv.cursor.prev, lv.cursor
			lv.cursor.prev.next = g
			lv.cursor.prev = g
		}
	}
	n.group = g
	n.prev, n.next = g.tail, nil
	if g.tail != nil {
		g.tail.next = n
	} else {
		g.head = n
	}
	g.tail = n
	if n.prio == PriorityLow {
		n.agePrev, n.ageNext = lv.ageTail, nil
		if lv.ageTail != nil {
			lv.ageTail.ageNext = n
		} else {
			lv.ageHead = n
		}
		lv.ageTail = n
	}
	n.inLevel = true
	lv.n++
	q.ready++
}

// unlink removes n from its level.
func (q *Queue[T]) unlink(n *node[T]) {
	lv := &q.levels[n.prio.level()]
	g := n.group
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		g.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		g.tail = n.prev
	}
	n.prev, n.next, n.group = nil, nil, nil
	if g.head == nil { // leave the ring
		if g.next == g {
			lv.cursor = nil
		} else {
			g.prev.next = g.next
			g.next.prev = g.prev
			if lv.cursor == g {
				lv.cursor = g.next
			}
		}
		delete(lv.groups, g.key)
		*g = group[T]{}
		if len(q.freeG) < maxFree {
			q.freeG = append(q.freeG, g)
		}
	}
	if n.prio == PriorityLow {
		if n.agePrev != nil {
			n.agePrev.ageNext = n.ageNext
		} else {
			lv.ageHead = n.ageNext
		}
		if n.ageNext != nil {
			n.ageNext.agePrev = n.agePrev
		} else {
			lv.ageTail = n.agePrev
		}
		n.agePrev, n.ageNext = nil, nil
	}
	n.inLevel = false
	lv.n--
	q.ready--
}

// pop removes and returns the next key to serve; q.ready must be > 0.
func (q *Queue[T]) pop() *node[T] {
	q.promoteStarved()
	for i := numLevels - 1; i >= 0; i-- {
		lv := &q.levels[i]
		if lv.n == 0 {
			continue
		}
		g := lv.cursor
		lv.cursor = g.next // the next group's turn, even if g stays
		n := g.head
		q.unlink(n)
		return n
	}
	panic("workqueue: pop on an empty queue")
}

// promoteStarved moves PriorityLow keys that have waited longer than the
// starvation bound to the end of the PriorityNormal line, keeping their
// arrival time for metrics. It runs in Get, so a starved key joins the
// normal line no later than the next Get after its bound passed.
func (q *Queue[T]) promoteStarved() {
	lv := &q.levels[PriorityLow.level()]
	if lv.ageHead == nil {
		return
	}
	now := q.now()
	for lv.ageHead != nil && now-lv.ageHead.since >= q.bound {
		n := lv.ageHead
		since := n.since
		q.unlink(n)
		n.prio = PriorityNormal
		q.push(n)
		n.since = since
	}
}

func (q *Queue[T]) newGroup(key string) *group[T] {
	var g *group[T]
	if k := len(q.freeG); k > 0 {
		g = q.freeG[k-1]
		q.freeG = q.freeG[:k-1]
	} else {
		g = &group[T]{}
	}
	g.key = key
	return g
}

// now is the time since q.epoch, from the monotonic clock.
func (q *Queue[T]) now() time.Duration { return q.clock.Since(q.epoch) }
