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
		for i := range 4 {
			got = append(got, rl.When(fmt.Sprint(i)))
		}
		// The burst, then one a second.
		want := []time.Duration{0, 0, time.Second, 2 * time.Second}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("delays = %v, want %v", got, want)
		}
		// The fifth and sixth would wait 3s and 4s: past the cap, each gets
		// a delay in its second half and takes no token.
		for i := 4; i < 6; i++ {
			if d := rl.When(fmt.Sprint(i)); d < 1250*time.Millisecond || d > 2500*time.Millisecond {
				t.Errorf("delay of key %d = %v, want within [1.25s, 2.5s]", i, d)
			}
		}
		time.Sleep(2 * time.Second) // fake time: the reservations made so far end at 2s
		if d := rl.When("6"); d != time.Second {
			t.Errorf("delay after 2s = %v, want 1s: a capped key took a token", d)
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

// TestDefaultRateLimiterSpreadsAStorm: 10,000 keys failing at once wait
// at most DefaultBucketMaxDelay for the shared bucket, not 1,000s as with
// client-go's limiter. In the first half of that window they are retried at
// the bucket's pace (a burst of 100, then 10 a second); the rest are spread
// evenly over the second half instead of piling up at its end.
func TestDefaultRateLimiterSpreadsAStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := workqueue.DefaultRateLimiter[int]()
		const n, bins = 10_000, 10
		maxDelay := workqueue.DefaultBucketMaxDelay
		var perSecond [bins]int
		same := map[time.Duration]int{}
		for k := range n {
			d := rl.When(k)
			if d < 0 || d > maxDelay {
				t.Fatalf("first-retry delay of key %d = %v, want within [0, %v]", k, d, maxDelay)
			}
			perSecond[min(int(d/time.Second), bins-1)]++
			same[d]++
		}
		// The bucket's pace in the first half: 100 + 10 in the first second,
		// 10 in each of the next four.
		for s, want := range [bins / 2]int{110, 10, 10, 10, 10} {
			if c := perSecond[s]; c < want-5 || c > want+5 {
				t.Errorf("%d first retries in second %d, want %d (the bucket's pace): %v", c, s, want, perSecond)
			}
		}
		// The other 9,850 spread evenly over the second half: about 1,970 a
		// second; 1,700 and 2,250 are more than six standard deviations away.
		for s := bins / 2; s < bins; s++ {
			if c := perSecond[s]; c < 1700 || c > 2250 {
				t.Errorf("%d first retries in second %d, want about 1,970 in each of the last five: %v", c, s, perSecond)
			}
		}
		for d, c := range same {
			if d > 5*time.Millisecond && c > 10 { // the per-item backoff's 5ms is shared by design
				t.Errorf("%d keys retry after exactly %v: a synchronized herd", c, d)
			}
		}
	})
}
