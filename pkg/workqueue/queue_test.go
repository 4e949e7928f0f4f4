package workqueue_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	clientgoworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// TestMain fails the package if a test leaves a queue goroutine behind:
// every queue must be shut down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// impls are the implementations of workqueue.Interface; the contract tests
// run against each.
var impls = []struct {
	name string
	new  func(workqueue.Options[string]) (workqueue.Interface[string], error)
}{
	{name: "Queue", new: func(o workqueue.Options[string]) (workqueue.Interface[string], error) {
		q, err := workqueue.New(o)
		if err != nil {
			return nil, err
		}
		return q, nil
	}},
	{name: "ClientGoQueue", new: func(o workqueue.Options[string]) (workqueue.Interface[string], error) {
		q, err := workqueue.NewClientGo(o)
		if err != nil {
			return nil, err
		}
		return q, nil
	}},
}

// newFunc makes a queue that is shut down when t ends. Inside a synctest
// bubble, pass the bubble's t so the queue lives and dies in the bubble.
type newFunc func(t *testing.T, o workqueue.Options[string]) workqueue.Interface[string]

// forEach runs f as a subtest per implementation.
func forEach(t *testing.T, f func(t *testing.T, newQueue newFunc)) {
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			f(t, func(t *testing.T, o workqueue.Options[string]) workqueue.Interface[string] {
				t.Helper()
				q, err := impl.new(o)
				if err != nil {
					t.Fatalf("new queue: %v", err)
				}
				t.Cleanup(q.ShutDown)
				return q
			})
		})
	}
}

// eventually polls cond until it holds, failing the test with msg if it
// does not within timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %s", timeout, msg)
		}
		time.Sleep(time.Millisecond) // poll interval, not a stand-in for the condition
	}
}

// get hands out the next key, failing the test if the queue is shut down.
func get(t *testing.T, q workqueue.Interface[string]) string {
	t.Helper()
	k, shutdown := q.Get()
	if shutdown {
		t.Fatalf("Get: queue shut down, want a key")
	}
	return k
}

// expLimiter backs off base, 2*base, 4*base, ... per key.
func expLimiter(base time.Duration) workqueue.RateLimiter[string] {
	return clientgoworkqueue.NewTypedItemExponentialFailureRateLimiter[string](base, time.Hour)
}

func TestNewValidation(t *testing.T) {
	m, err := workqueue.NewMetrics(newRegistry())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    workqueue.Options[string]
		onlyNew bool   // an option only New reads
		wantErr string // substring; "" means no error
	}{
		{name: "zero options"},
		{name: "metrics with a name", opts: workqueue.Options[string]{Name: "q", Metrics: m}},
		{name: "metrics without a name", opts: workqueue.Options[string]{Metrics: m}, wantErr: "Options.Name"},
		{name: "negative starvation bound", opts: workqueue.Options[string]{StarvationBound: -time.Second}, onlyNew: true, wantErr: "Options.StarvationBound"},
	}
	for _, impl := range impls {
		for _, tt := range tests {
			if tt.onlyNew && impl.name != "Queue" {
				continue
			}
			t.Run(impl.name+"/"+tt.name, func(t *testing.T) {
				q, err := impl.new(tt.opts)
				if tt.wantErr == "" {
					if err != nil {
						t.Fatalf("new: %v", err)
					}
					q.ShutDown()
					return
				}
				if err == nil {
					q.ShutDown()
					t.Fatalf("new succeeded, want an error mentioning %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not mention %q", err, tt.wantErr)
				}
			})
		}
	}
}

func TestStingyAndExclusive(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		q := newQueue(t, workqueue.Options[string]{})
		wantLen := func(want int, when string) {
			t.Helper()
			if got := q.Len(); got != want {
				t.Fatalf("Len %s = %d, want %d", when, got, want) // a Get now could block forever
			}
		}
		q.Add("a")
		q.Add("b")
		q.Add("a")
		wantLen(2, "after adding a, b, a")

		if k := get(t, q); k != "a" {
			t.Fatalf("first Get = %q, want a", k)
		}
		q.Add("a") // while a is in processing
		wantLen(1, "after re-adding a key in processing")
		if k := get(t, q); k != "b" {
			t.Fatalf("second Get = %q, want b: a is still in processing", k)
		}
		wantLen(0, "with a and b in processing")
		q.Done("a")
		wantLen(1, "once Done queues the re-added a")
		if k := get(t, q); k != "a" {
			t.Fatalf("third Get = %q, want a", k)
		}
		q.Done("a")
		q.Done("b")
		wantLen(0, "when everything is done")
	})
}

func TestShutDownUnblocksGet(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		synctest.Test(t, func(t *testing.T) {
			q := newQueue(t, workqueue.Options[string]{})
			type got struct {
				key      string
				shutdown bool
			}
			const getters = 3
			results := make(chan got, getters)
			for range getters {
				go func() {
					k, shutdown := q.Get()
					results <- got{k, shutdown}
				}()
			}
			synctest.Wait() // every getter is blocked in Get
			if len(results) != 0 {
				t.Fatalf("Get returned %v from an empty queue", <-results)
			}

			q.Add("x")
			if r := <-results; r != (got{"x", false}) {
				t.Errorf("Get after Add = %+v, want x", r)
			}
			q.Done("x")
			q.ShutDown()
			for range getters - 1 {
				if r := <-results; r != (got{"", true}) {
					t.Errorf("Get after ShutDown = %+v, want shutdown", r)
				}
			}
			if !q.ShuttingDown() {
				t.Error("ShuttingDown = false after ShutDown")
			}
		})
	})
}

func TestShutDownHandsOutWaitingKeys(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		q := newQueue(t, workqueue.Options[string]{})
		q.Add("a")
		q.Add("b")
		q.ShutDown()
		q.Add("c") // a no-op now
		for _, want := range []string{"a", "b"} {
			if k := get(t, q); k != want {
				t.Errorf("Get after ShutDown = %q, want %q", k, want)
			}
			q.Done(want)
		}
		if k, shutdown := q.Get(); !shutdown {
			t.Errorf("Get once the waiting keys are out = (%q, false), want shutdown", k)
		}
	})
}

func TestShutDownWithDrain(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		synctest.Test(t, func(t *testing.T) {
			q := newQueue(t, workqueue.Options[string]{})
			q.Add("a")
			k := get(t, q)
			drained := make(chan struct{})
			go func() {
				q.ShutDownWithDrain()
				close(drained)
			}()
			synctest.Wait()
			select {
			case <-drained:
				t.Fatal("ShutDownWithDrain returned with a key in processing")
			default:
			}
			if !q.ShuttingDown() {
				t.Error("ShuttingDown = false while draining")
			}
			q.Done(k)
			<-drained
		})
	})
}

// TestShutDownEndsDrain: ShutDown called while ShutDownWithDrain waits
// ends the drain at once, with the key still in processing, as client-go
// documents it ("ShutDown can be called after ShutDownWithDrain to force
// ShutDownWithDrain to stop waiting").
func TestShutDownEndsDrain(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		synctest.Test(t, func(t *testing.T) {
			q := newQueue(t, workqueue.Options[string]{})
			q.Add("a")
			k := get(t, q)
			drained := make(chan struct{})
			go func() {
				q.ShutDownWithDrain()
				close(drained)
			}()
			synctest.Wait() // the drain waits for "a"
			q.ShutDown()
			synctest.Wait()
			select {
			case <-drained:
			default:
				t.Error("ShutDownWithDrain still waits for a key in processing after ShutDown")
			}
			q.Done(k) // ends a drain that still waits, so that the bubble can end
			<-drained
		})
	})
}

// TestAddAfter runs in a synctest bubble, so the delays pass at once and
// the times are exact.
func TestAddAfter(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		synctest.Test(t, func(t *testing.T) {
			q := newQueue(t, workqueue.Options[string]{})
			begin := time.Now()
			q.AddAfter("late", time.Minute)
			q.AddAfter("soon", 10*time.Second)
			q.AddAfter("sooner", time.Hour)
			q.AddAfter("sooner", 5*time.Second) // the earlier time wins
			q.AddAfter("later", time.Second)
			q.AddAfter("later", time.Hour) // the earlier time wins
			q.AddAfter("now", 0)
			if got := q.Len(); got != 1 {
				t.Errorf("Len with one immediate and four delayed keys = %d, want 1", got)
			}
			for _, want := range []struct {
				key string
				at  time.Duration
			}{{"now", 0}, {"later", time.Second}, {"sooner", 5 * time.Second}, {"soon", 10 * time.Second}, {"late", time.Minute}} {
				k := get(t, q)
				if at := time.Since(begin); k != want.key || at != want.at {
					t.Errorf("Get = %q at +%v, want %q at +%v", k, at, want.key, want.at)
				}
				q.Done(k)
			}
		})
	})
}

// TestAddCancelsDelay pins down the one place the two queues differ, as the
// package doc says: an Add of a key waiting on AddAfter hands it out now,
// and ctrlkit's Queue (like controller-runtime's priority queue) drops the
// delay, while client-go's queue hands it out again when the delay ends.
func TestAddCancelsDelay(t *testing.T) {
	wantGets := map[string][]time.Duration{"Queue": {0}, "ClientGoQueue": {0, time.Minute}}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q, err := impl.new(workqueue.Options[string]{})
				if err != nil {
					t.Fatal(err)
				}
				begin := time.Now()
				q.AddAfter("a", time.Minute)
				q.Add("a")
				var got []time.Duration
				done := make(chan struct{})
				go func() {
					defer close(done)
					for {
						k, shutdown := q.Get()
						if shutdown {
							return
						}
						got = append(got, time.Since(begin))
						q.Done(k)
					}
				}()
				time.Sleep(time.Hour) // fake time: long past the delay
				synctest.Wait()
				q.ShutDown()
				<-done
				if !slices.Equal(got, wantGets[impl.name]) {
					t.Errorf("a handed out at %v, want %v", got, wantGets[impl.name])
				}
			})
		})
	}
}

// TestAddRateLimited runs in a synctest bubble, so the backoff is exact.
func TestAddRateLimited(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		synctest.Test(t, func(t *testing.T) {
			q := newQueue(t, workqueue.Options[string]{RateLimiter: expLimiter(time.Second)})
			retry := func(wantRequeues int, wantDelay time.Duration) {
				t.Helper()
				begin := time.Now()
				q.AddRateLimited("a")
				if got := q.NumRequeues("a"); got != wantRequeues {
					t.Errorf("NumRequeues = %d, want %d", got, wantRequeues)
				}
				k := get(t, q)
				if d := time.Since(begin); k != "a" || d != wantDelay {
					t.Errorf("Get = %q after %v, want a after %v", k, d, wantDelay)
				}
				q.Done(k)
			}
			retry(1, time.Second)
			retry(2, 2*time.Second)
			retry(3, 4*time.Second)
			q.Forget("a")
			if got := q.NumRequeues("a"); got != 0 {
				t.Errorf("NumRequeues after Forget = %d, want 0", got)
			}
			retry(1, time.Second) // the backoff starts over
		})
	})
}

// TestConcurrentUse runs producers and consumers at once: no key is ever
// handed to two consumers at once, and every key is handed out after its
// last Add.
func TestConcurrentUse(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		const producers, consumers, adds, numKeys = 8, 8, 500, 6
		q := newQueue(t, workqueue.Options[string]{})
		var (
			mu       sync.Mutex
			seq      int
			lastAdd  = make(map[string]int)
			lastGet  = make(map[string]int)
			inFlight = make(map[string]bool)
			overlaps int
		)
		var consumersWG sync.WaitGroup
		for range consumers {
			consumersWG.Go(func() {
				for {
					k, shutdown := q.Get()
					if shutdown {
						return
					}
					mu.Lock()
					seq++
					lastGet[k] = seq
					if inFlight[k] {
						overlaps++
					}
					inFlight[k] = true
					mu.Unlock()
					for range 3 { // widen the window in which an overlap would show
						runtime.Gosched()
					}
					mu.Lock()
					inFlight[k] = false
					mu.Unlock()
					q.Done(k)
				}
			})
		}
		var producersWG sync.WaitGroup
		for range producers {
			producersWG.Go(func() {
				for range adds {
					k := fmt.Sprintf("k%d", rand.IntN(numKeys))
					mu.Lock()
					seq++
					lastAdd[k] = seq
					mu.Unlock()
					if rand.IntN(4) == 0 {
						q.AddAfter(k, time.Millisecond)
					} else {
						q.Add(k)
					}
					runtime.Gosched() // let consumers run between adds
				}
			})
		}
		producersWG.Wait()
		eventually(t, 10*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for k, a := range lastAdd {
				if lastGet[k] <= a {
					return false
				}
			}
			return true
		}, "every key is handed out after its last Add")
		q.ShutDown()
		consumersWG.Wait()
		if overlaps > 0 {
			t.Errorf("a key was handed to two consumers at once %d times", overlaps)
		}
	})
}
