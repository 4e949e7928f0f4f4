package manager

import (
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// TestClientConfigRateLimit checks the manager's default client-side rate
// limit: none when the config sets neither QPS nor Burst, and the
// config's own otherwise.
func TestClientConfigRateLimit(t *testing.T) {
	limiter := flowcontrol.NewFakeAlwaysRateLimiter()
	for _, tt := range []struct {
		name       string
		in         rest.Config
		qps        float32
		burst      int
		hasLimiter bool
	}{
		{name: "unset", in: rest.Config{}, qps: -1},
		{name: "QPS and Burst", in: rest.Config{QPS: 50, Burst: 100}, qps: 50, burst: 100},
		{name: "QPS only", in: rest.Config{QPS: 7}, qps: 7},
		{name: "no limit asked for", in: rest.Config{QPS: -1}, qps: -1},
		{name: "a RateLimiter", in: rest.Config{RateLimiter: limiter}, hasLimiter: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			got := clientConfig(&in, "ua")
			if got.QPS != tt.qps || got.Burst != tt.burst || (got.RateLimiter != nil) != tt.hasLimiter {
				t.Errorf("QPS, Burst, RateLimiter set = %v, %d, %v; want %v, %d, %v", got.QPS, got.Burst, got.RateLimiter != nil, tt.qps, tt.burst, tt.hasLimiter)
			}
			if in.QPS != tt.in.QPS || in.Burst != tt.in.Burst || in.UserAgent != "" {
				t.Error("clientConfig modified its argument")
			}
			if got.UserAgent != "ua" {
				t.Errorf("UserAgent = %q, want the default %q", got.UserAgent, "ua")
			}
		})
	}
}
