package httpauth

import (
	"context"
	"sync"
	"time"
)

// flights runs at most one call per key at a time: a request that needs a
// key's result while its call runs waits for that call instead of making
// its own. The zero value is ready to use; it is safe for concurrent use.
type flights[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*call[V]
}

type call[V any] struct {
	ctx  context.Context // done when the call's time is up
	done chan struct{}   // closed once val and err are set
	val  V
	err  error
}

// do returns the result of fn for key. Unless a call for key is running,
// it starts fn on a goroutine of its own with a context that keeps ctx's
// values, not its cancellation, and is done timeout later; the goroutine
// ends when fn returns. do waits for the call until it returns, its
// timeout passes (errTimeout) or ctx is done (ctx's error): it never waits
// for an fn that ignores its context.
func (f *flights[K, V]) do(ctx context.Context, key K, timeout time.Duration, fn func(context.Context) (V, error)) (V, error) {
	f.mu.Lock()
	c, ok := f.calls[key]
	if !ok {
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		c = &call[V]{ctx: callCtx, done: make(chan struct{})}
		if f.calls == nil {
			f.calls = make(map[K]*call[V])
		}
		f.calls[key] = c
		go func() {
			defer cancel()
			val, err := fn(callCtx)
			if err != nil && callCtx.Err() != nil {
				err = errTimeout
			}
			c.val, c.err = val, err
			f.mu.Lock()
			delete(f.calls, key)
			f.mu.Unlock()
			close(c.done)
		}()
	}
	f.mu.Unlock()

	var zero V
	select {
	case <-c.done:
		return c.val, c.err
	case <-c.ctx.Done():
		select {
		case <-c.done: // returned as its time ran out
			return c.val, c.err
		default:
			return zero, errTimeout
		}
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
