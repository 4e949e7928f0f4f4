package workqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// fakeLimiter returns a fixed delay and counts failures.
type fakeLimiter struct {
	delay time.Duration
	n     map[string]int
}

func (f *fakeLimiter) When(k string) time.Duration { f.n[k]++; return f.delay }
func (f *fakeLimiter) Forget(k string)             { delete(f.n, k) }
func (f *fakeLimiter) NumRequeues(k string) int    { return f.n[k] }

func newTestQueue(t testing.TB, opts Options[string]) (*Queue[string], *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	if opts.Clock == nil {
		opts.Clock = clk
	}
	q, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.ShutDown)
	return q, clk
}

// drainOrder hands out every waiting key (marking each Done) and returns
// the order.
func drainOrder(q *Queue[string]) []string {
	var out []string
	for q.Len() > 0 {
		k, _ := q.Get()
		out = append(out, k)
		q.Done(k)
	}
	return out
}

func TestQueueOrder(t *testing.T) {
	byPrefix := func(k string) string { return k[:1] }
	tests := []struct {
		name  string
		group func(string) string
		adds  []struct {
			key string
			p   Priority
		}
		want []string
	}{
		{
			name: "fifo within a priority, dedup keeps first position",
			adds: []struct {
				key string
				p   Priority
			}{{"a", 0}, {"b", 0}, {"a", 0}, {"c", 0}},
			want: []string{"a", "b", "c"},
		},
		{
			name: "higher priority first",
			adds: []struct {
				key string
				p   Priority
			}{{"l1", PriorityLow}, {"n1", PriorityNormal}, {"h1", PriorityHigh}, {"l2", PriorityLow}, {"n2", PriorityNormal}},
			want: []string{"h1", "n1", "n2", "l1", "l2"},
		},
		{
			name: "a waiting key keeps the highest priority and moves to its line's end",
			adds: []struct {
				key string
				p   Priority
			}{{"a", PriorityLow}, {"b", PriorityNormal}, {"a", PriorityNormal}, {"b", PriorityLow}},
			want: []string{"b", "a"},
		},
		{
			name:  "groups take turns within a priority",
			group: byPrefix,
			adds: []struct {
				key string
				p   Priority
			}{{"x1", 0}, {"x2", 0}, {"x3", 0}, {"y1", 0}, {"z1", 0}, {"y2", 0}},
			want: []string{"x1", "y1", "z1", "x2", "y2", "x3"},
		},
		{
			name:  "priority beats fairness",
			group: byPrefix,
			adds: []struct {
				key string
				p   Priority
			}{{"x1", PriorityLow}, {"x2", PriorityLow}, {"y1", PriorityNormal}, {"x3", PriorityHigh}},
			want: []string{"x3", "y1", "x1", "x2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := newTestQueue(t, Options[string]{Group: tt.group})
			for _, a := range tt.adds {
				q.AddWithPriority(a.key, a.p)
			}
			if got := drainOrder(q); !slices.Equal(got, tt.want) {
				t.Fatalf("order = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQueueProcessingSemantics(t *testing.T) {
	q, _ := newTestQueue(t, Options[string]{})
	q.Add("a")
	k, _ := q.Get()
	if k != "a" || q.Len() != 0 {
		t.Fatalf("Get = %q, Len = %d", k, q.Len())
	}
	q.Add("a") // while processing: not handed out again
	if q.Len() != 0 {
		t.Fatalf("a key in processing was queued for a second worker: Len = %d", q.Len())
	}
	q.Add("a")
	q.Done("a") // queued again, once
	if q.Len() != 1 {
		t.Fatalf("after Done of a re-added key Len = %d, want 1", q.Len())
	}
	k, _ = q.Get()
	q.Done(k)
	if q.Len() != 0 || len(q.nodes) != 0 {
		t.Fatalf("finished key still tracked: Len = %d, nodes = %d", q.Len(), len(q.nodes))
	}
}

func TestQueueStarvationBound(t *testing.T) {
	q, clk := newTestQueue(t, Options[string]{StarvationBound: time.Second})
	get := func() string {
		t.Helper()
		k, _ := q.Get()
		q.Done(k)
		return k
	}
	q.AddWithPriority("old", PriorityLow)
	clk.Step(2 * time.Second)
	// A steady stream of normal keys: "old" waited past the bound, so it
	// joins the normal line when the next Get sees it and is served before
	// the normal keys that arrive after that.
	q.Add("n1")
	if k := get(); k != "n1" {
		t.Fatalf("got %q, want n1", k)
	}
	q.Add("n2")
	if k := get(); k != "old" {
		t.Fatalf("got %q, want the starved low key before n2", k)
	}
	if k := get(); k != "n2" {
		t.Fatalf("got %q, want n2", k)
	}
	// Within the bound, low waits behind normal.
	q.AddWithPriority("young", PriorityLow)
	q.Add("n3")
	if got := drainOrder(q); !slices.Equal(got, []string{"n3", "young"}) {
		t.Fatalf("order = %v, want [n3 young]", got)
	}
}

func TestQueueAddAfter(t *testing.T) {
	q, clk := newTestQueue(t, Options[string]{})
	q.AddAfter("a", 10*time.Second)
	q.AddAfter("a", 5*time.Second)  // earlier wins
	q.AddAfter("a", 20*time.Second) // later ignored
	clk.Step(4 * time.Second)
	q.moveReady()
	if q.Len() != 0 {
		t.Fatalf("delayed key ready too early")
	}
	clk.Step(time.Second)
	q.moveReady()
	if q.Len() != 1 {
		t.Fatalf("delayed key not ready after its earliest time: Len = %d", q.Len())
	}
	k, _ := q.Get()
	q.Done(k)
	clk.Step(time.Hour)
	q.moveReady()
	if q.Len() != 0 {
		t.Fatalf("superseded delays fired: Len = %d", q.Len())
	}
	// An Add cancels a pending delay: now is earliest.
	q.AddAfter("b", time.Minute)
	q.Add("b")
	k, _ = q.Get()
	q.Done(k)
	clk.Step(time.Hour)
	q.moveReady()
	if q.Len() != 0 || len(q.nodes) != 0 {
		t.Fatalf("delay survived an Add: Len = %d nodes = %d", q.Len(), len(q.nodes))
	}
}

func TestQueueDelayLoopFires(t *testing.T) {
	q, err := New(Options[string]{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.ShutDown()
	start := time.Now()
	q.AddAfter("a", 30*time.Millisecond)
	k, shutdown := q.Get() // blocks until the delay loop queues it
	if k != "a" || shutdown {
		t.Fatalf("Get = %q, %v", k, shutdown)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("delayed key handed out after %v, before its delay", d)
	}
}

func TestQueueRateLimited(t *testing.T) {
	rl := &fakeLimiter{delay: time.Second, n: map[string]int{}}
	q, clk := newTestQueue(t, Options[string]{RateLimiter: rl})
	q.AddRateLimited("a")
	q.AddRateLimited("a")
	if q.NumRequeues("a") != 2 {
		t.Fatalf("NumRequeues = %d, want 2", q.NumRequeues("a"))
	}
	clk.Step(time.Second)
	q.moveReady()
	if q.Len() != 1 {
		t.Fatalf("Len = %d, want 1", q.Len())
	}
	q.Forget("a")
	if q.NumRequeues("a") != 0 {
		t.Fatalf("NumRequeues after Forget = %d", q.NumRequeues("a"))
	}
}

func TestQueueShutDown(t *testing.T) {
	q, _ := newTestQueue(t, Options[string]{})
	q.Add("a")
	q.AddAfter("delayed", time.Minute)
	got := make(chan bool, 3)
	for range 3 {
		go func() {
			k, shutdown := q.Get()
			if !shutdown {
				q.Done(k)
			}
			got <- shutdown
		}()
	}
	// One getter takes "a"; the other two block until ShutDown.
	if <-got {
		t.Fatal("first Get reported shutdown before ShutDown")
	}
	q.ShutDown()
	for range 2 {
		if !<-got {
			t.Fatal("a blocked Get did not return shutdown")
		}
	}
	q.Add("b")
	if q.Len() != 0 {
		t.Fatal("Add after ShutDown queued a key")
	}
}

func TestQueueShutDownHandsOutWaitingKeys(t *testing.T) {
	q, _ := newTestQueue(t, Options[string]{})
	q.Add("a")
	q.Add("b")
	q.ShutDown()
	for _, want := range []string{"a", "b"} {
		k, shutdown := q.Get()
		if shutdown || k != want {
			t.Fatalf("Get after ShutDown = %q,%v; want %q as client-go does", k, shutdown, want)
		}
		q.Done(k)
	}
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("empty shut-down queue did not report shutdown")
	}
}

func TestQueueShutDownWithDrain(t *testing.T) {
	q, _ := newTestQueue(t, Options[string]{})
	q.Add("a")
	k, _ := q.Get()
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	for !q.ShuttingDown() {
		time.Sleep(time.Millisecond) // poll: ShutDownWithDrain has begun
	}
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while a key was in processing")
	default:
	}
	q.Done(k)
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("ShutDownWithDrain did not return after Done")
	}
}

// TestQueueZeroAllocs checks the steady state of Add+Get+Done allocates
// nothing.
func TestQueueZeroAllocs(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprint("grouped=", grouped), func(t *testing.T) {
			opts := Options[string]{}
			if grouped {
				opts.Group = func(k string) string { return k[:2] }
			}
			q, _ := newTestQueue(t, opts)
			keys := []string{"aa1", "ab2", "ac3", "aa4"}
			for _, k := range keys { // warm up the free lists and maps
				q.Add(k)
			}
			drainOrder(q)
			allocs := testing.AllocsPerRun(1000, func() {
				for _, k := range keys {
					q.Add(k)
				}
				for range keys {
					k, _ := q.Get()
					q.Done(k)
				}
			})
			if allocs != 0 {
				t.Fatalf("Add+Get+Done allocates %.1f times per round", allocs)
			}
		})
	}
}

// FuzzQueue drives random operations against the queue and a reference
// model of client-go's semantics, checking after each step: Len matches;
// a key is never handed out while in processing; Get returns a waiting key
// of the highest waiting priority; delayed keys appear when due.
func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0, 0, 3, 3, 4, 2, 1, 9, 9, 4, 7, 7, 5})
	f.Fuzz(func(t *testing.T, ops []byte) {
		q, clk := newTestQueue(t, Options[string]{StarvationBound: time.Hour, Group: func(k string) string { return k[:1] }})
		keys := []string{"a1", "a2", "b1", "b2", "c1"}
		waiting := map[string]Priority{}
		processing := map[string]bool{}
		dirty := map[string]Priority{}      // added while processing
		delayed := map[string]time.Time{}   // earliest pending delay
		add := func(k string, p Priority) { // model of AddWithPriority
			delete(delayed, k)
			if processing[k] {
				if old, ok := dirty[k]; !ok || p > old {
					dirty[k] = p
				}
				return
			}
			if old, ok := waiting[k]; !ok || p > old {
				waiting[k] = p
			}
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, int(ops[i+1])
			k := keys[arg%len(keys)]
			switch op {
			case 0, 1: // add
				p := Priority(arg%3) - 1
				q.AddWithPriority(k, p)
				add(k, p)
			case 2: // add after
				d := time.Duration(1+arg%4) * time.Second
				q.AddAfter(k, d)
				_, isWaiting := waiting[k]
				if !isWaiting || processing[k] {
					at := clk.Now().Add(d)
					if old, ok := delayed[k]; !ok || at.Before(old) {
						delayed[k] = at
					}
				}
			case 3: // time passes
				clk.Step(time.Second)
				q.moveReady()
				for dk, at := range delayed {
					if !at.After(clk.Now()) {
						delete(delayed, dk)
						add(dk, PriorityNormal)
					}
				}
			case 4: // get
				if q.Len() == 0 {
					continue
				}
				got, shutdown := q.Get()
				if shutdown {
					t.Fatal("Get reported shutdown")
				}
				p, ok := waiting[got]
				if !ok {
					t.Fatalf("Get returned %q, which was not waiting (waiting=%v)", got, waiting)
				}
				if processing[got] {
					t.Fatalf("%q handed out while in processing", got)
				}
				for wk, wp := range waiting {
					if wp > p {
						t.Fatalf("Get returned %q at %v while %q waits at %v", got, p, wk, wp)
					}
				}
				delete(waiting, got)
				processing[got] = true
			case 5: // done
				var pk []string
				for k := range processing {
					pk = append(pk, k)
				}
				if len(pk) == 0 {
					continue
				}
				slices.Sort(pk)
				k := pk[arg%len(pk)]
				q.Done(k)
				delete(processing, k)
				if p, ok := dirty[k]; ok {
					delete(dirty, k)
					waiting[k] = p
				}
			}
			if q.Len() != len(waiting) {
				t.Fatalf("after op %d: Len = %d, model has %d waiting %v", op, q.Len(), len(waiting), waiting)
			}
		}
	})
}

// TestQueueStress runs many producers and workers and checks that no key is
// processed by two workers at once and that every key is processed after
// its last add.
func TestQueueStress(t *testing.T) {
	q, err := New(Options[string]{Group: func(k string) string { return k[:1] }, StarvationBound: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const producers, workers, perProducer = 8, 8, 3000
	keys := []string{"a1", "a2", "b1", "b2", "c1", "c2", "d1", "e1"}
	type state struct {
		inFlight  bool
		lastAdd   int64 // sequence of the last add
		lastStart int64 // sequence at the last processing start
	}
	var mu = make(chan struct{}, 1)
	lock := func() { mu <- struct{}{} }
	unlock := func() { <-mu }
	st := map[string]*state{}
	for _, k := range keys {
		st[k] = &state{}
	}
	var seq int64
	errs := make(chan error, workers)
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				lock()
				s := st[k]
				if s.inFlight {
					unlock()
					errs <- fmt.Errorf("%s processed by two workers at once", k)
					q.Done(k)
					return
				}
				s.inFlight = true
				seq++
				s.lastStart = seq
				unlock()
				lock()
				s.inFlight = false
				unlock()
				q.Done(k)
			}
		}()
	}
	prodDone := make(chan struct{})
	for p := 0; p < producers; p++ {
		go func() {
			defer func() { prodDone <- struct{}{} }()
			r := rand.New(rand.NewPCG(uint64(p), 7))
			for range perProducer {
				k := keys[r.IntN(len(keys))]
				lock()
				seq++
				st[k].lastAdd = seq
				unlock()
				switch r.IntN(3) {
				case 0:
					q.AddWithPriority(k, Priority(r.IntN(3)-1))
				case 1:
					q.AddAfter(k, time.Duration(r.IntN(100))*time.Microsecond)
				default:
					q.Add(k)
				}
			}
		}()
	}
	for range producers {
		<-prodDone
	}
	// Every key must get a processing start after its last add.
	deadline := time.Now().Add(20 * time.Second)
	for {
		lock()
		var behind []string
		for k, s := range st {
			if s.lastStart < s.lastAdd {
				behind = append(behind, k)
			}
		}
		unlock()
		if len(behind) == 0 {
			break
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys never processed after their last add: %v", behind)
		}
		time.Sleep(time.Millisecond) // poll interval
	}
	q.ShutDownWithDrain()
	for range workers {
		<-done
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// TestQueueGivesBackADrainedBacklog: once a backlog larger than
// rebuildAbove has drained and the queue stayed small for shrinkAfter, the
// free list is cut and the key map rebuilt for what it holds; keys still
// in the queue (waiting, in processing, delayed) survive the rebuild. A
// backlog that comes back sooner keeps its memory. It runs in a synctest
// bubble so that synctest.Wait lets the shrink goroutine finish.
func TestQueueGivesBackADrainedBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, clk := newTestQueue(t, Options[string]{})
		const n = 3 * rebuildAbove
		backlog := func(round, count int) {
			for i := range count {
				q.AddWithPriority(fmt.Sprintf("ns-%d/k%d-%05d", i%7, round, i), PriorityLow)
			}
		}
		drain := func(k int) {
			for range k {
				k, _ := q.Get()
				q.Done(k)
			}
		}
		state := func() (free, nodes, peak int) {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.free), len(q.nodes), q.peak
		}

		// Half the backlog comes back within shrinkAfter of the queue
		// turning small: the timer set then finds it large again and gives
		// nothing back (a rebuild now would leave the peak at n/2).
		backlog(0, n)
		drain(n)
		clk.Step(shrinkAfter / 2)
		backlog(1, n/2)
		clk.Step(shrinkAfter)
		synctest.Wait()
		if _, _, peak := state(); peak < n {
			t.Fatalf("peak %d: the map was rebuilt though a backlog of %d came back within shrinkAfter", peak, n/2)
		}

		q.AddAfter("later", time.Hour)
		held, _ := q.Get() // in processing across the rebuild
		drain(n/2 - 2)     // leave one waiting
		clk.Step(shrinkAfter - time.Millisecond)
		synctest.Wait()
		if _, _, peak := state(); peak < n {
			t.Fatalf("peak %d: the map was rebuilt before shrinkAfter", peak)
		}
		clk.Step(time.Millisecond)
		synctest.Wait()
		free, nodes, peak := state()
		if free > maxFree {
			t.Errorf("free list holds %d nodes, want at most %d", free, maxFree)
		}
		if peak > rebuildAbove {
			t.Errorf("peak is %d with %d keys held, %v after the backlog drained: the key map was never rebuilt", peak, nodes, shrinkAfter)
		}
		if nodes != 3 {
			t.Errorf("%d keys held, want 3 (one in processing, one waiting, one delayed)", nodes)
		}
		q.Add(held) // queued again on Done
		q.Done(held)
		got := map[string]bool{}
		for range 2 {
			k, _ := q.Get()
			got[k] = true
			q.Done(k)
		}
		if !got[held] || len(got) != 2 {
			t.Errorf("after the rebuild got %v, want %s and the last waiting key", got, held)
		}
		clk.Step(time.Hour)
		synctest.Wait()
		if k, _ := q.Get(); k != "later" {
			t.Errorf("delayed key = %q, want later", k)
		}
		q.ShutDown()
	})
}
