package workqueue_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// maxGetsBeforeChange is the package doc's promise: a change (a key added
// at PriorityNormal or above with no key of its priority or above ahead of
// it) waits at most this many Gets, whatever the low backlog behind it.
const maxGetsBeforeChange = 1

// agedShare is the package doc's other promise: once the oldest
// PriorityLow key is past the bound, the low line gets at least one Get in
// this many while higher keys wait.
const agedShare = 4

// simulation drives a queue with a fake clock as workers that each take
// cost per key would: the worker that is free first (the lowest index on a
// tie) marks its key Done and Gets the next one. Time moves only when the
// queue says so, so Get counts are exact.
type simulation struct {
	t       *testing.T
	q       *workqueue.Queue[string]
	clk     *clocktesting.FakeClock
	start   time.Time
	cost    time.Duration
	freeAt  []time.Time
	holding []string
	gets    int // Gets so far
}

func newSimulation(t *testing.T, q *workqueue.Queue[string], clk *clocktesting.FakeClock, workers int, cost time.Duration) *simulation {
	s := &simulation{t: t, q: q, clk: clk, start: clk.Now(), cost: cost,
		freeAt: make([]time.Time, workers), holding: make([]string, workers)}
	for i := range s.freeAt {
		s.freeAt[i] = s.start
	}
	return s
}

// nextFree returns the worker that is free first.
func (s *simulation) nextFree() int {
	w := 0
	for i, at := range s.freeAt {
		if at.Before(s.freeAt[w]) {
			w = i
		}
	}
	return w
}

// step lets the next worker finish its key and take another; it returns
// the key taken, or "" when the queue was empty (the worker then idles for
// one cost).
func (s *simulation) step() string {
	w := s.nextFree()
	s.clk.SetTime(s.freeAt[w])
	if s.holding[w] != "" {
		s.q.Done(s.holding[w])
		s.holding[w] = ""
	}
	s.freeAt[w] = s.freeAt[w].Add(s.cost)
	if s.q.Len() == 0 {
		return ""
	}
	k, shutdown := s.q.Get()
	if shutdown {
		s.t.Fatal("Get: queue shut down")
	}
	s.gets++
	s.holding[w] = k
	return k
}

// TestLongBacklogKeepsPriority is the restart of a big controller whose
// initial list takes longer than the starvation bound to drain: 10,000 keys
// at PriorityLow, 4 workers, 10ms per key (about 25s), and changes made 1s,
// 6s and 20s in. Every change is handed out within maxGetsBeforeChange
// Gets of its Add, before and after the backlog passed the bound, and the
// backlog still drains in about 25s.
func TestLongBacklogKeepsPriority(t *testing.T) {
	for _, namespaces := range []int{1, 10} {
		t.Run(fmt.Sprintf("namespaces=%d", namespaces), func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			q, err := workqueue.New(workqueue.Options[string]{Clock: clk, Group: func(k string) string {
				ns, _, _ := strings.Cut(k, "/")
				return ns
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer q.ShutDown()
			const backlog = 10_000
			for i := range backlog {
				q.AddWithPriority(fmt.Sprintf("ns%d/obj-%05d", i%namespaces, i), workqueue.PriorityLow)
			}
			s := newSimulation(t, q, clk, 4, 10*time.Millisecond)
			changes := []time.Duration{time.Second, 6 * time.Second, 20 * time.Second}
			addedAt := map[string]int{} // change -> Gets before its Add
			total := backlog + len(changes)
			for handed := 0; handed < total; {
				if len(changes) > 0 && !s.start.Add(changes[0]).After(s.freeAt[s.nextFree()]) {
					s.clk.SetTime(s.start.Add(changes[0]))
					k := fmt.Sprintf("ns0/change-at-%v", changes[0])
					q.Add(k)
					addedAt[k] = s.gets
					changes = changes[1:]
					continue
				}
				k := s.step()
				if k == "" {
					t.Fatalf("queue empty after %d of %d keys", handed, total)
				}
				handed++
				if before, ok := addedAt[k]; ok {
					if waited := s.gets - before - 1; waited > maxGetsBeforeChange {
						t.Errorf("%s waited %d Gets (%v), want at most %d", k, waited,
							s.clk.Since(s.start)-mustParse(t, strings.TrimPrefix(k, "ns0/change-at-")), maxGetsBeforeChange)
					}
					delete(addedAt, k)
				}
			}
			if len(addedAt) != 0 {
				t.Errorf("changes never handed out: %v", addedAt)
			}
			// 10,003 keys at 10ms on 4 workers: 25.0075s; the last keys
			// handed out finish one cost later.
			if d := clk.Since(s.start); d > 25*time.Second+20*time.Millisecond {
				t.Errorf("backlog drained after %v, want about 25s", d)
			}
		})
	}
}

func mustParse(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestAgedBacklogShare: under a steady stream of changes that keeps the
// workers busy, the low backlog gets no Get before its oldest key is past
// the bound, then at least one Get in agedShare, never two in a row.
func TestAgedBacklogShare(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	const bound = time.Second
	q, err := workqueue.New(workqueue.Options[string]{Clock: clk, StarvationBound: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer q.ShutDown()
	for i := range 100 {
		q.AddWithPriority(fmt.Sprintf("low-%03d", i), workqueue.PriorityLow)
	}
	s := newSimulation(t, q, clk, 1, 10*time.Millisecond)
	var seq []bool // per Get: was it a low key
	for i := 0; clk.Since(s.start) < 3*bound; i++ {
		q.Add(fmt.Sprintf("change-%04d", i)) // one change per Get: higher keys always wait
		seq = append(seq, strings.HasPrefix(s.step(), "low-"))
	}
	agedFrom := int(bound / s.cost) // the Get at which the oldest low key is past the bound
	for i, low := range seq[:agedFrom] {
		if low {
			t.Fatalf("Get %d (%v in) went to the low backlog before its bound", i, time.Duration(i)*s.cost)
		}
	}
	for i := agedFrom; i+agedShare <= len(seq); i++ {
		lows := 0
		for _, low := range seq[i : i+agedShare] {
			if low {
				lows++
			}
		}
		if lows != 1 {
			t.Fatalf("Gets %d-%d hold %d low keys, want exactly 1 in every %d once the backlog is past its bound", i, i+agedShare-1, lows, agedShare)
		}
	}
}
