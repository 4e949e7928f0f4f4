package workqueue

import "time"

// delayLoop moves delayed keys into the queue when their time comes.
func (q *Queue[T]) delayLoop() {
	timer := q.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := q.moveReady()
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-q.stop:
			return
		case <-q.wake:
		case <-timer.C():
		}
	}
}

// moveReady queues the delayed keys whose time has come and returns how
// long until the next one (an hour when there is none).
func (q *Queue[T]) moveReady() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for q.delayed.len() > 0 && q.delayed.nodes[0].readyAt <= now {
		n := q.delayed.nodes[0]
		q.delayed.remove(n) // ShutDown empties the heap, so the queue is open
		q.addLocked(n, PriorityNormal)
	}
	if q.delayed.len() > 0 {
		return q.delayed.nodes[0].readyAt - now
	}
	return time.Hour
}

// delayHeap is a min-heap of delayed nodes by readyAt.
type delayHeap[T comparable] struct{ nodes []*node[T] }

func (h *delayHeap[T]) len() int { return len(h.nodes) }

func (h *delayHeap[T]) push(n *node[T]) {
	n.heapIdx = len(h.nodes)
	h.nodes = append(h.nodes, n)
	h.up(n.heapIdx)
}

func (h *delayHeap[T]) remove(n *node[T]) {
	i, last := n.heapIdx, len(h.nodes)-1
	if i != last {
		h.swap(i, last)
	}
	h.nodes[last] = nil
	h.nodes = h.nodes[:last]
	n.heapIdx = -1
	if i != last {
		h.fixAt(i)
	}
}

func (h *delayHeap[T]) fix(n *node[T]) { h.fixAt(n.heapIdx) }

func (h *delayHeap[T]) fixAt(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *delayHeap[T]) less(i, j int) bool { return h.nodes[i].readyAt < h.nodes[j].readyAt }

func (h *delayHeap[T]) swap(i, j int) {
	h.nodes[i], h.nodes[j] = h.nodes[j], h.nodes[i]
	h.nodes[i].heapIdx = i
	h.nodes[j].heapIdx = j
}

func (h *delayHeap[T]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *delayHeap[T]) down(i0 int) bool {
	i, n := i0, len(h.nodes)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
