package workqueue

import (
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// DefaultRateLimiter returns ctrlkit's default: client-go's per-item
// exponential backoff (5ms doubling to 1000s), combined (the larger delay
// wins) with an overall 10 qps bucket with a burst of 100 whose share of
// any delay is capped at DefaultBucketMaxDelay.
//
// Why the cap: client-go's controller limiter puts the same bucket in front
// of every retry with no cap, so when 10,000 keys fail at once the last of
// them waits 10,000/10 qps = 1,000 seconds (about 16 minutes) for its first
// retry, however quickly it would have succeeded. With the cap, a key never
// waits longer for the bucket than the cap: the bucket gives a burst of
// 100, then 10 per second, and the keys it cannot serve within the cap are
// spread evenly over its second half (10,000 keys: about 2,000 a second
// from 5 to 10 seconds), not sent back together when it ends. So in the
// first half of the cap a storm is retried no faster than the bucket
// allows. Past that the per-item backoff paces each key, and it doubles
// with every failure.
func DefaultRateLimiter[T comparable]() RateLimiter[T] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second),
		NewBoundedBucketRateLimiter[T](10, 100, DefaultBucketMaxDelay),
	)
}

// DefaultBucketMaxDelay caps the overall bucket's share of a retry delay in
// DefaultRateLimiter.
const DefaultBucketMaxDelay = 10 * time.Second

// NewBoundedBucketRateLimiter returns a limiter that paces all keys together
// at qps with the given burst, like client-go's TypedBucketRateLimiter, but
// never delays a key by more than maxDelay: a key that would wait longer
// takes no token and gets a random delay between maxDelay/2 and maxDelay.
// So a storm of failures builds no queue of reservations stretching far
// into the future, its retries are spread over the second half of maxDelay
// instead of all coming back at once when it ends, and until maxDelay/2 it
// is retried no faster than qps allows. It is safe for concurrent use.
func NewBoundedBucketRateLimiter[T comparable](qps float64, burst int, maxDelay time.Duration) RateLimiter[T] {
	return &boundedBucket[T]{limiter: rate.NewLimiter(rate.Limit(qps), burst), maxDelay: maxDelay}
}

type boundedBucket[T comparable] struct {
	limiter  *rate.Limiter
	maxDelay time.Duration
}

func (b *boundedBucket[T]) When(T) time.Duration {
	r := b.limiter.Reserve()
	d := r.Delay()
	if d > b.maxDelay {
		r.Cancel()
		half := max(b.maxDelay, 0) / 2
		return b.maxDelay - rand.N(half+1) // jitter: no synchronized herd at maxDelay
	}
	return d
}

func (b *boundedBucket[T]) Forget(T)          {}
func (b *boundedBucket[T]) NumRequeues(T) int { return 0 }
