package workqueue

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	q.AddWithPriority("old2", PriorityLow)
	// Within the bound, low waits behind normal however many Gets pass.
	for i := range 2 * agedTurn {
		q.Add(fmt.Sprint("n", i))
		if k := get(); k != fmt.Sprint("n", i) {
			t.Fatalf("got %q within the bound, want n%d", k, i)
		}
	}
	// Past the bound, with normal keys always waiting, the low keys get
	// every agedTurn-th Get: at once here, as more than agedTurn-1 Gets
	// went to normal keys while they waited.
	clk.Step(time.Second)
	for i := range 2 * agedTurn {
		q.Add(fmt.Sprint("m", i))
	}
	want := []string{"old", "m0", "m1", "m2", "old2", "m3", "m4", "m5", "m6", "m7"}
	if got := drainOrder(q); !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	// A key bumped to normal leaves the low line, keeping its place in time
	// for metrics only.
	q.AddWithPriority("bumped", PriorityLow)
	clk.Step(time.Hour)
	q.Add("n")
	q.Add("bumped")
	if got := drainOrder(q); !slices.Equal(got, []string{"n", "bumped"}) {
		t.Fatalf("order = %v, want [n bumped]", got)
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

// TestQueueZeroAllocs checks the steady state of Add+Get+Done allocates
// nothing, with and without metrics, with and without low keys waiting.
func TestQueueZeroAllocs(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		grouped, metrics bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("grouped=%v/metrics=%v", tc.grouped, tc.metrics), func(t *testing.T) {
			opts := Options[string]{}
			if tc.grouped {
				opts.Group = func(k string) string { return k[:2] }
			}
			if tc.metrics {
				opts.Name, opts.Metrics = fmt.Sprintf("allocs-%v", tc.grouped), m
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
