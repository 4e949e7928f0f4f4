package workqueue_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// TestBoundedBucketRateLimiter runs in a synctest bubble: the bucket reads
// the clock, and there time stands still unless the test moves it.
func TestBoundedBucketRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 1 qps, a burst of 2, at most 2.5s from the bucket.
		rl := workqueue.NewBoundedBucketRateLimiter[string](1, 2, 2500*time.Millisecond)
		var got []time.Duration
		for i := range 6 {
			got = append(got, rl.When(fmt.Sprint(i)))
		}
		// The burst, then one a second; the fifth would wait 3s, gets the
		// cap and takes no token, so the sixth is capped as well.
		want := []time.Duration{0, 0, time.Second, 2 * time.Second, 2500 * time.Millisecond, 2500 * time.Millisecond}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("delays = %v, want %v", got, want)
		}
		if n := rl.NumRequeues("0"); n != 0 {
			t.Errorf("NumRequeues = %d, want 0: the bucket keeps no per-key state", n)
		}
	})
}

func TestDefaultRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := workqueue.DefaultRateLimiter[string]()
		tests := []struct {
			name  string
			do    func() time.Duration
			want  time.Duration
			wantN int
		}{
			{name: "first failure", do: func() time.Duration { return rl.When("a") }, want: 5 * time.Millisecond, wantN: 1},
			{name: "second failure", do: func() time.Duration { return rl.When("a") }, want: 10 * time.Millisecond, wantN: 2},
			{name: "third failure", do: func() time.Duration { return rl.When("a") }, want: 20 * time.Millisecond, wantN: 3},
			{name: "after Forget", do: func() time.Duration { rl.Forget("a"); return rl.When("a") }, want: 5 * time.Millisecond, wantN: 1},
		}
		for _, tt := range tests { // in order: each step builds on the last
			if got := tt.do(); got != tt.want {
				t.Errorf("%s: When = %v, want %v", tt.name, got, tt.want)
			}
			if got := rl.NumRequeues("a"); got != tt.wantN {
				t.Errorf("%s: NumRequeues = %d, want %d", tt.name, got, tt.wantN)
			}
		}
	})
}

// TestDefaultRateLimiterStormIsCapped checks why the default differs from
// client-go's: 10,000 keys failing at once wait at most
// DefaultBucketMaxDelay for the shared bucket, not 1,000s.
func TestDefaultRateLimiterStormIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := workqueue.DefaultRateLimiter[int]()
		var longest time.Duration
		for k := range 10_000 {
			longest = max(longest, rl.When(k))
		}
		if longest != workqueue.DefaultBucketMaxDelay {
			t.Errorf("longest first-retry delay in a storm of 10,000 = %v, want DefaultBucketMaxDelay (%v)", longest, workqueue.DefaultBucketMaxDelay)
		}
	})
}
