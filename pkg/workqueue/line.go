package workqueue

import "time"

// node is the state of one key that is waiting, in processing, or delayed.
type node[T comparable] struct {
	item       T
	prio       Priority  // while queued: the priority it waits, or will wait, at
	queued     bool      // waiting, or to be re-queued on Done (client-go's "dirty")
	processing bool      // handed out by Get, Done not yet called
	inLine     bool      // linked into a level
	group      *group[T] // while in a level
	prev, next *node[T]  // FIFO within the group
	agePrev    *node[T]  // PriorityLow age list
	ageNext    *node[T]
	since      time.Duration // when it was queued, since q.epoch (low keys, or metrics)
	started    time.Duration // when Get handed it out, since q.epoch (metrics)
	procPrev   *node[T]      // list of keys in processing (metrics)
	procNext   *node[T]
	readyAt    time.Duration // while delayed, since q.epoch
	heapIdx    int           // index in delayed, -1 when not delayed
}

// group is a FIFO of the keys of one fairness group at one level; the
// groups of a level form a ring that Get walks round-robin.
type group[T comparable] struct {
	key        string
	head, tail *node[T]
	prev, next *group[T] // ring
}

// level holds the waiting keys of one priority.
type level[T comparable] struct {
	groups           map[string]*group[T]
	cursor           *group[T] // next group to serve; nil when empty
	n                int
	ageHead, ageTail *node[T] // PriorityLow only: all keys in the order they joined
}

// agedTurn is the starvation guarantee: once the oldest PriorityLow key has
// waited the starvation bound, every agedTurn-th Get goes to the low keys
// while keys of higher priority wait. The other Gets keep priority order,
// so a change waits for at most one aged key before it is handed out.
const agedTurn = 4

// pop removes and returns the next key to serve; q.ready must be > 0.
func (q *Queue[T]) pop() *node[T] {
	low := &q.levels[PriorityLow.level()]
	if low.n > 0 && low.n < q.ready { // low keys wait behind higher ones
		// The age list is in the order keys joined the line; a key re-queued
		// on Done joins it with the time of its Add, at most one Reconcile
		// older than the keys before it.
		if q.passed >= agedTurn-1 && q.now()-low.ageHead.since >= q.bound {
			q.passed = 0
			return q.popFrom(low)
		}
		q.passed++
	}
	for i := numLevels - 1; i >= 0; i-- {
		if lv := &q.levels[i]; lv.n > 0 {
			if lv == low {
				q.passed = 0
			}
			return q.popFrom(lv)
		}
	}
	panic("workqueue: pop on an empty queue")
}

// popFrom removes and returns the head of the group whose turn it is in lv.
func (q *Queue[T]) popFrom(lv *level[T]) *node[T] {
	g := lv.cursor
	lv.cursor = g.next // the next group's turn, even if g stays
	n := g.head
	q.unlink(n)
	return n
}

// push appends n to its group's line at its priority.
func (q *Queue[T]) push(n *node[T]) {
	lv := &q.levels[n.prio.level()]
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
	n.inLine = true
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
		q.freeG.put(g)
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
	n.inLine = false
	lv.n--
	q.ready--
}

func (q *Queue[T]) newGroup(key string) *group[T] {
	g := q.freeG.get()
	g.key = key
	return g
}
