package leader_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

func TestNewValidates(t *testing.T) {
	client := fake.NewClientset()
	ok := leader.Options{Name: "op", Namespace: "ns", Identity: "a"}
	tests := []struct {
		name    string
		mutate  func(*leader.Options)
		wantErr string // empty: no error
	}{
		{"defaults", func(*leader.Options) {}, ""},
		{"short test timings", func(o *leader.Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 250*time.Millisecond
		}, ""},
		{"no name", func(o *leader.Options) { o.Name = "" }, "Options.Name is empty"},
		{"lease not longer than renew deadline", func(o *leader.Options) {
			o.LeaseDuration, o.RenewDeadline = 10*time.Second, 10*time.Second
		}, "LeaseDuration (10s) must be greater than Options.RenewDeadline (10s)"},
		{"renew deadline within jitter of retry", func(o *leader.Options) {
			o.RenewDeadline, o.RetryPeriod = 2*time.Second, 2*time.Second
		}, "RenewDeadline (2s) must be greater than 1.2 × Options.RetryPeriod (2s)"},
		{"negative", func(o *leader.Options) { o.RetryPeriod = -time.Second }, "must not be negative"},
		{"no namespace outside a cluster", func(o *leader.Options) { o.Namespace = "" }, "Options.Namespace is empty and this process is not in a cluster"},
		// The leader gives up RenewDeadline + RetryPeriod after its last
		// renewal: a standby must not be able to take over before that.
		{"lease within renew deadline plus retry period", func(o *leader.Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 12*time.Second, 10*time.Second, 2*time.Second
		}, "Options.LeaseDuration (12s) must be at least 1.1 × (Options.RenewDeadline + Options.RetryPeriod) = 13.2s"},
		{"lease without slack for clock rates", func(o *leader.Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 13*time.Second, 10*time.Second, 2*time.Second
		}, "raise LeaseDuration to 14s, or lower RenewDeadline or RetryPeriod"},
		{"the Lease stores whole seconds", func(o *leader.Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2900*time.Millisecond, 2*time.Second, 250*time.Millisecond
		}, "LeaseDuration (2.9s, counted as 2s because the Lease stores whole seconds) must be at least"},
		{"lease under a second", func(o *leader.Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 900*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond
		}, "Options.LeaseDuration (900ms) is under 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.mutate(&o)
			e, err := leader.New(client, o)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if e.Identity() != o.Identity {
					t.Fatalf("Identity = %q, want %q", e.Identity(), o.Identity)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want one containing %q", err, tt.wantErr)
			}
			if _, err := leader.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"}, o); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewForConfig error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := leader.New(nil, ok); err == nil || !strings.Contains(err.Error(), "client is nil") {
		t.Errorf("New(nil) = %v, want an error naming the client", err)
	}
	if _, err := leader.NewForConfig(nil, ok); err == nil || !strings.Contains(err.Error(), "rest config is nil") {
		t.Errorf("NewForConfig(nil) = %v, want an error naming the config", err)
	}
}

func TestDefaultIdentityIsUnique(t *testing.T) {
	client := fake.NewClientset()
	a, err := leader.New(client, leader.Options{Name: "op", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := leader.New(client, leader.Options{Name: "op", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Identity() == b.Identity() || !strings.Contains(a.Identity(), "_") {
		t.Fatalf("identities %q and %q: want hostname_suffix, distinct", a.Identity(), b.Identity())
	}
	o := a.Options()
	if o.LeaseDuration != 15*time.Second || o.RenewDeadline != 10*time.Second || o.RetryPeriod != 2*time.Second {
		t.Fatalf("defaults = %v/%v/%v, want 15s/10s/2s", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
}

// TestLeaseConfig checks the config of the Lease's own client: nothing the
// workload does with its client can delay a renewal.
func TestLeaseConfig(t *testing.T) {
	workload := flowcontrol.NewTokenBucketRateLimiter(20, 30)
	tests := []struct {
		name          string
		cfg           rest.Config
		renewDeadline time.Duration
		retryPeriod   time.Duration
		wantTimeout   time.Duration
		wantQPS       float32
		wantAgent     string
	}{
		{
			name:          "defaults",
			cfg:           rest.Config{Host: "https://api", QPS: 20, Burst: 30, RateLimiter: workload, UserAgent: "my-operator"},
			renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second,
			wantTimeout: 5 * time.Second, wantQPS: 5, wantAgent: "my-operator/leader-election",
		},
		{
			name:          "short timings",
			cfg:           rest.Config{Host: "https://api", QPS: -1},
			renewDeadline: 1500 * time.Millisecond, retryPeriod: 250 * time.Millisecond,
			wantTimeout: time.Second, wantQPS: 12, wantAgent: rest.DefaultKubernetesUserAgent() + "/leader-election",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.cfg
			got := leader.LeaseConfig(&tt.cfg, leader.Options{RenewDeadline: tt.renewDeadline, RetryPeriod: tt.retryPeriod})
			if tt.cfg.RateLimiter != before.RateLimiter || tt.cfg.QPS != before.QPS || tt.cfg.Timeout != before.Timeout || tt.cfg.UserAgent != before.UserAgent {
				t.Errorf("leaseConfig modified the config it was given")
			}
			if got.RateLimiter != nil {
				t.Errorf("RateLimiter = %v: the Lease client must not share the workload's limiter", got.RateLimiter)
			}
			if got.QPS != tt.wantQPS || got.Burst != int(2*tt.wantQPS) {
				t.Errorf("QPS/Burst = %v/%d, want %v/%d", got.QPS, got.Burst, tt.wantQPS, int(2*tt.wantQPS))
			}
			if got.Timeout != tt.wantTimeout {
				t.Errorf("Timeout = %v, want max(RenewDeadline/2, 1s) = %v", got.Timeout, tt.wantTimeout)
			}
			if got.UserAgent != tt.wantAgent {
				t.Errorf("UserAgent = %q, want %q", got.UserAgent, tt.wantAgent)
			}
			if got.Host != tt.cfg.Host {
				t.Errorf("Host = %q, want %q", got.Host, tt.cfg.Host)
			}
		})
	}
}

// TestLeaseAccessAllocatesNothing: recording a successful read or write
// of the Lease, which every renewal does, allocates nothing; its garbage
// would land between the objects the replica caches.
func TestLeaseAccessAllocatesNothing(t *testing.T) {
	e, err := leader.New(fake.NewClientset(), leader.Options{Namespace: "ns", Name: "lease", Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { leader.Access(e, nil) }); n != 0 {
		t.Errorf("recording a successful Lease access allocates %v times, want 0", n)
	}
}
