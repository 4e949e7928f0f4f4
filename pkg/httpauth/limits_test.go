package httpauth_test

import (
	"fmt"
	"k8s.io/client-go/kubernetes"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"

	"github.com/ctrlkit/ctrlkit/pkg/httpauth"
)

// TestSingleFlight: requests that miss the cache at the same time share
// one review: one TokenReview for one token, one SubjectAccessReview for
// one access. The bubble's synctest.Wait returns once every request waits,
// for the review or at the gate before the API server.
func TestSingleFlight(t *testing.T) {
	for _, tt := range []struct {
		name       string
		gateTokens bool // else the SubjectAccessReviews
	}{{"TokenReview", true}, {"SubjectAccessReview", false}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api, client, gate := gatedReader(tt.gateTokens)
				h := newGuard(t, httpauth.Options{Client: client}).Wrap(okHandler(t))
				codes := make([]int, 20)
				var wg sync.WaitGroup
				for i := range codes {
					wg.Go(func() { codes[i] = do(h, "GET", "/metrics", "Bearer reader", logr.Discard()).Code })
				}
				synctest.Wait()
				close(gate)
				wg.Wait()
				for i, code := range codes {
					if code != http.StatusOK {
						t.Errorf("request %d: status %d, want 200", i, code)
					}
				}
				if tokens, accesses := api.calls(); tokens != 1 || accesses != 1 {
					t.Errorf("%d concurrent requests created %d TokenReviews and %d SubjectAccessReviews, want 1 and 1", len(codes), tokens, accesses)
				}
			})
		})
	}
}

// TestReviewTimeout: a review the API server does not answer within
// ReviewTimeout fails the request with 503 and Retry-After when the
// timeout passes (the bubble's clock says exactly when); once the server
// answers again, requests are admitted.
func TestReviewTimeout(t *testing.T) {
	for _, tt := range []struct {
		name       string
		gateTokens bool // else the SubjectAccessReviews
	}{{"TokenReview", true}, {"SubjectAccessReview", false}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, client, gate := gatedReader(tt.gateTokens)
				const timeout = 3 * time.Second
				var log logBuffer
				h := newGuard(t, httpauth.Options{Client: client, ReviewTimeout: timeout}).Wrap(okHandler(t))
				start := time.Now()
				w := do(h, "GET", "/metrics", "Bearer reader", log.logger())
				if elapsed := time.Since(start); elapsed != timeout {
					t.Errorf("the request was answered after %v, want ReviewTimeout %v", elapsed, timeout)
				}
				if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
					t.Errorf("status %d, Retry-After %q, want 503 with a Retry-After", w.Code, w.Header().Get("Retry-After"))
				}
				if !strings.Contains(log.String(), "not answered within Options.ReviewTimeout") {
					t.Errorf("log %q does not say the review timed out", log.String())
				}
				close(gate) // the API server answers again
				synctest.Wait()
				if w := do(h, "GET", "/metrics", "Bearer reader", logr.Discard()); w.Code != http.StatusOK {
					t.Errorf("after the API server answers: status %d, want 200", w.Code)
				}
			})
		})
	}
}

// TestFailuresDoNotEvictSuccesses: unknown tokens and denied accesses,
// many more than CacheSize, leave the remembered successes be: the
// scraper's token and access are still cached.
func TestFailuresDoNotEvictSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newFakeAPI()
		api.user("reader", "reader", "get /metrics")
		api.user("nobody", "nobody")
		const size, junk = 2, 100
		h := newGuard(t, httpauth.Options{Client: api.kube, CacheSize: size, ReviewBurst: 1000}).Wrap(okHandler(t))
		if w := do(h, "GET", "/metrics", "Bearer reader", logr.Discard()); w.Code != http.StatusOK {
			t.Fatalf("reader: status %d, want 200", w.Code)
		}
		tokens0, accesses0 := api.calls()
		for i := range junk {
			if w := do(h, "GET", "/metrics", fmt.Sprintf("Bearer junk-%d", i), logr.Discard()); w.Code != http.StatusUnauthorized {
				t.Fatalf("junk token %d: status %d, want 401", i, w.Code)
			}
			if w := do(h, "GET", fmt.Sprintf("/metrics/%d", i), "Bearer nobody", logr.Discard()); w.Code != http.StatusForbidden {
				t.Fatalf("nobody's access %d: status %d, want 403", i, w.Code)
			}
		}
		tokens1, accesses1 := api.calls()
		if tokens1-tokens0 != junk+1 || accesses1-accesses0 != junk {
			t.Fatalf("%d TokenReviews and %d SubjectAccessReviews of failures, want %d and %d", tokens1-tokens0, accesses1-accesses0, junk+1, junk)
		}
		if w := do(h, "GET", "/metrics", "Bearer reader", logr.Discard()); w.Code != http.StatusOK {
			t.Fatalf("reader again: status %d, want 200", w.Code)
		}
		if tokens2, accesses2 := api.calls(); tokens2 != tokens1 || accesses2 != accesses1 {
			t.Errorf("reader's request after the failures created %d TokenReviews and %d SubjectAccessReviews, want none: its results were evicted", tokens2-tokens1, accesses2-accesses1)
		}
	})
}

// TestReviewsPerSecond: a flood of unknown tokens makes at most
// DefaultReviewBurst reviews, and DefaultReviewsPerSecond a second after
// that; the other requests get 429 with Retry-After and no review, while a
// cached token is admitted throughout.
func TestReviewsPerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newFakeAPI()
		api.user("reader", "reader", "get /metrics")
		h := newGuard(t, httpauth.Options{Client: api.kube}).Wrap(okHandler(t))
		if w := do(h, "GET", "/metrics", "Bearer reader", logr.Discard()); w.Code != http.StatusOK {
			t.Fatalf("reader: status %d, want 200", w.Code)
		}
		burst, perSecond := httpauth.DefaultReviewBurst, float64(httpauth.DefaultReviewsPerSecond)
		start := time.Now()
		var mu sync.Mutex
		codes := make(map[int]int)
		var wg sync.WaitGroup
		for i := range 1000 {
			wg.Go(func() {
				w := do(h, "GET", "/metrics", fmt.Sprintf("Bearer junk-%d", i), logr.Discard())
				if w.Code == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
					t.Errorf("429 without Retry-After")
				}
				mu.Lock()
				codes[w.Code]++
				mu.Unlock()
			})
			if i == 500 {
				wg.Go(func() {
					if w := do(h, "GET", "/metrics", "Bearer reader", logr.Discard()); w.Code != http.StatusOK {
						t.Errorf("reader, cached, during the flood: status %d, want 200", w.Code)
					}
				})
			}
		}
		wg.Wait()
		check := func(phase string) {
			t.Helper()
			tokens, accesses := api.calls()
			bound := burst + int(perSecond*time.Since(start).Seconds())
			if int(tokens+accesses) > bound {
				t.Errorf("%s: %d reviews, want at most %d", phase, tokens+accesses, bound)
			}
			if codes[http.StatusUnauthorized] != int(tokens)-1 {
				t.Errorf("%s: %d requests reviewed and refused, %d TokenReviews of junk: a 429 created a review", phase, codes[http.StatusUnauthorized], tokens-1)
			}
		}
		check("flood")
		if codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != 1000 || codes[http.StatusTooManyRequests] == 0 {
			t.Errorf("statuses %v, want 401 and 429 only, some 429", codes)
		}

		time.Sleep(time.Second) // the bucket gains DefaultReviewsPerSecond
		for i := range 100 {
			w := do(h, "GET", "/metrics", fmt.Sprintf("Bearer late-%d", i), logr.Discard())
			codes[w.Code]++
		}
		check("a second later")
		if n := codes[http.StatusUnauthorized]; n == 0 {
			t.Errorf("no review a second after the flood, want the bucket to refill")
		}
	})
}

// TestKnownTokenNotThrottled: when the bucket is empty, a token and an
// access the Guard has accepted before are still reviewed again after
// AllowTTL, and admitted; unknown tokens are not.
func TestKnownTokenNotThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newFakeAPI()
		api.user("reader", "reader", "get /metrics")
		const ttl = 10 * time.Second
		h := newGuard(t, httpauth.Options{Client: api.kube, AllowTTL: ttl, ReviewsPerSecond: 1, ReviewBurst: 2}).Wrap(okHandler(t))
		step := func(auth string, wantCode int, wantReviews [2]int64) {
			t.Helper()
			if w := do(h, "GET", "/metrics", auth, logr.Discard()); w.Code != wantCode {
				t.Fatalf("%s: status %d, want %d", auth, w.Code, wantCode)
			}
			if tokens, accesses := api.calls(); [2]int64{tokens, accesses} != wantReviews {
				t.Fatalf("%s: %d TokenReviews and %d SubjectAccessReviews so far, want %v", auth, tokens, accesses, wantReviews)
			}
		}
		step("Bearer reader", 200, [2]int64{1, 1}) // the bucket's 2 reviews
		step("Bearer junk-0", 429, [2]int64{1, 1})
		time.Sleep(ttl) // the bucket is full again, reader's results stale
		step("Bearer junk-1", 401, [2]int64{2, 1})
		step("Bearer junk-2", 401, [2]int64{3, 1})
		step("Bearer junk-3", 429, [2]int64{3, 1})
		step("Bearer reader", 200, [2]int64{4, 2}) // known: reviewed without the bucket
		step("Bearer junk-4", 429, [2]int64{4, 2})
	})
}

// gatedReader returns a fake API server that knows the user reader (token
// "reader", access "get /metrics"), and a client of it whose
// TokenReviews (gateTokens) or SubjectAccessReviews wait for gate to be
// closed.
func gatedReader(gateTokens bool) (*fakeAPI, kubernetes.Interface, chan struct{}) {
	api := newFakeAPI()
	api.user("reader", "reader", "get /metrics")
	gate := make(chan struct{})
	if gateTokens {
		return api, api.gated(gate, nil), gate
	}
	return api, api.gated(nil, gate), gate
}
