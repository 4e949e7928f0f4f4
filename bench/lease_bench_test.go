package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// BenchmarkLease measures what an Elector allocates per Lease request,
// side by side: with client-go's Lease lock and typed client (leader.New,
// as controller-runtime's and client-go's electors send them), and with
// ctrlkit's own (leader.NewForConfig, as the manager builds it). renew is
// the leader renewing; poll is a standby reading a Lease another replica
// holds. Every replica sends one of these per RetryPeriod for as long as
// it runs, a sharded replica two. It needs KUBEBUILDER_ASSETS (a real
// kube-apiserver): make bench-lease.
func BenchmarkLease(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("KUBEBUILDER_ASSETS is not set: run make bench-lease")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	electors := map[string]func(*rest.Config, leader.Options) (*leader.Elector, error){
		"client-go": func(cfg *rest.Config, o leader.Options) (*leader.Elector, error) {
			c := rest.CopyConfig(cfg)
			c.QPS = -1
			kube, err := kubernetes.NewForConfig(c)
			if err != nil {
				return nil, err
			}
			return leader.New(kube, o)
		},
		"ctrlkit": leader.NewForConfig,
	}
	for _, role := range []string{"renew", "poll"} {
		for _, impl := range []string{"client-go", "ctrlkit"} {
			b.Run(role+"/"+impl, func(b *testing.B) {
				benchLease(b, cfg, electors[impl], role == "poll", role+"-"+impl)
			})
		}
	}
}

// benchLease runs an Elector of the Lease name on a 10ms RetryPeriod and
// measures b.N of its requests: renewals, or with poll, reads of a Lease
// held by another replica.
func benchLease(b *testing.B, cfg *rest.Config, newElector func(*rest.Config, leader.Options) (*leader.Elector, error), poll bool, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Generous deadlines: on a busy machine a renewal can take a while.
	opts := leader.Options{Name: name, Namespace: "default", LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: 10 * time.Millisecond}
	done := make(chan error, 2)
	if poll {
		// The holder renews every 100ms with its own client, not counted.
		o := opts
		o.Identity, o.RetryPeriod = "holder", 100*time.Millisecond
		holder, err := leader.NewForConfig(cfg, o)
		if err != nil {
			b.Fatal(err)
		}
		go func() { done <- holder.Run(ctx, func(ctx context.Context) error { <-ctx.Done(); return nil }) }()
		deadline := time.Now().Add(30 * time.Second)
		for !holder.IsLeader() {
			if time.Now().After(deadline) {
				b.Fatal("the holder did not lead within 30s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var requests atomic.Int64
	method := http.MethodPut
	if poll {
		method = http.MethodGet
	}
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == method && strings.HasSuffix(r.URL.Path, "/leases/"+name) {
				requests.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	o := opts
	o.Identity = "measured"
	el, err := newElector(c, o)
	if err != nil {
		b.Fatal(err)
	}
	go func() { done <- el.Run(ctx, func(ctx context.Context) error { <-ctx.Done(); return nil }) }()
	wait := func(n int64) {
		deadline := time.Now().Add(time.Minute + time.Duration(n)*100*time.Millisecond)
		for requests.Load() < n {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d Lease requests within the deadline (leading: %v)", requests.Load(), n, el.IsLeader())
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait(20) // leading, or polling, and warm
	if !poll && !el.IsLeader() || poll && el.IsLeader() {
		b.Fatalf("leading is %v, want %v", el.IsLeader(), !poll)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := requests.Load()
	wait(start + int64(b.N))
	b.StopTimer()
	if !poll && !el.IsLeader() || poll && el.IsLeader() {
		b.Fatalf("leading is %v after the run, want %v", el.IsLeader(), !poll)
	}
	cancel()
	for range cap(done) - map[bool]int{true: 0, false: 1}[poll] {
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			b.Error(fmt.Errorf("Run: %w", err))
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
