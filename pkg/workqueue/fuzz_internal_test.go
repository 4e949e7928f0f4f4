package workqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

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
