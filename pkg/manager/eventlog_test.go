package manager

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// TestGatedLogger: lines pass until the gate closes and none is written
// after close returns, even by goroutines logging while it closes.
func TestGatedLogger(t *testing.T) {
	var closed atomic.Bool
	var lines, late atomic.Int32
	log := funcr.New(func(prefix, args string) {
		lines.Add(1)
		if closed.Load() {
			late.Add(1)
		}
	}, funcr.Options{})
	var g logGate
	l := gated(log, &g).WithValues("k", "v").WithName("events")
	l.Info("before")
	if lines.Load() != 1 {
		t.Fatalf("%d lines before the gate closed, want 1", lines.Load())
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					l.Error(nil, "racing")
				}
			}
		})
	}
	g.close()
	closed.Store(true)
	l.Info("after")
	close(stop)
	wg.Wait()
	if n := late.Load(); n != 0 {
		t.Errorf("%d lines written after the gate closed, want 0", n)
	}
}
