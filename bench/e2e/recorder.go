package main

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// seqAnnotation carries the sequence number of the churn write that last
// changed an object; Reconcile reads it from the cache.
const seqAnnotation = "bench.ctrlkit.io/seq"

// recorder is what both frameworks' reconcilers report to. It is
// goroutine-safe; observe is the whole "reconciler body" besides the cache
// read, so both frameworks do the same work per Reconcile.
type recorder struct {
	want       int    // objects to see once for the cold start to be complete
	prefix     string // names of the benchmark's objects; others (kube-system's) are not counted
	reconciles atomic.Int64

	mu      sync.Mutex
	seen    map[string]struct{}
	allDone chan struct{} // closed when want distinct objects were reconciled
	allAt   time.Time
	started map[int64]time.Time // churn seq → start of the first Reconcile that saw it
}

// newRecorder returns a recorder whose cold start is complete once want
// distinct objects named prefix... were reconciled.
func newRecorder(want int, prefix string) *recorder {
	return &recorder{
		want:    want,
		prefix:  prefix,
		seen:    make(map[string]struct{}, want),
		allDone: make(chan struct{}),
		started: make(map[int64]time.Time),
	}
}

// observe records a Reconcile that started at start and read an object
// named ns/name with the given annotations from the cache.
func (r *recorder) observe(start time.Time, ns, name string, annotations map[string]string) {
	r.reconciles.Add(1)
	if !strings.HasPrefix(name, r.prefix) {
		return
	}
	var seq int64 = -1
	if s, ok := annotations[seqAnnotation]; ok {
		seq, _ = strconv.ParseInt(s, 10, 64)
	}
	key := ns + "/" + name
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[key]; !ok {
		r.seen[key] = struct{}{}
		if len(r.seen) == r.want {
			r.allAt = time.Now()
			close(r.allDone)
		}
	}
	if seq >= 0 {
		if _, ok := r.started[seq]; !ok {
			r.started[seq] = start
		}
	}
}

// startOf returns when the first Reconcile that saw seq started.
func (r *recorder) startOf(seq int64) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.started[seq]
	return t, ok
}

// sawAll reports whether a Reconcile saw every successful write.
func (r *recorder) sawAll(writes []write) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range writes {
		if _, ok := r.started[w.seq]; !ok && !w.resp.IsZero() {
			return false
		}
	}
	return true
}

// distinct is how many objects were reconciled at least once.
func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}
