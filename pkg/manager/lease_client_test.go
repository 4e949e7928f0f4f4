package manager_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// leaseServer is an API server that serves nothing but the Lease ns/op,
// and records the user agent and timeout of each request.
type leaseServer struct {
	mu       sync.Mutex
	lease    *coordinationv1.Lease
	rv       int
	agents   []string
	timeouts []string
}

func (s *leaseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const leases = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agents = append(s.agents, r.UserAgent())
	s.timeouts = append(s.timeouts, r.URL.Query().Get("timeout"))
	reply := func(code int, obj any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(obj)
	}
	notFound := func() {
		reply(http.StatusNotFound, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
			Details: &metav1.StatusDetails{Name: "op", Group: "coordination.k8s.io", Kind: "leases"}})
	}
	write := func(code int) {
		var l coordinationv1.Lease
		if err := json.NewDecoder(r.Body).Decode(&l); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.rv++
		l.TypeMeta = metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"}
		l.ResourceVersion = strings.Repeat("1", s.rv)
		s.lease = &l
		reply(code, &l)
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == leases+"/op" && s.lease != nil:
		reply(http.StatusOK, s.lease)
	case r.Method == http.MethodPost && r.URL.Path == leases:
		write(http.StatusCreated)
	case r.Method == http.MethodPut && r.URL.Path == leases+"/op":
		write(http.StatusOK)
	default:
		notFound()
	}
}

// closedLimiter admits no request: a workload that has used up its client's
// rate limit.
type closedLimiter struct{ closed chan struct{} }

func (l closedLimiter) TryAccept() bool                { return false }
func (l closedLimiter) Accept()                        { <-l.closed }
func (l closedLimiter) Stop()                          {}
func (l closedLimiter) QPS() float32                   { return 0 }
func (l closedLimiter) Wait(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

// TestLeaseNotStarvedByWorkload: the Lease has a client of its own, so a
// workload that has used up the manager's rate limit cannot delay it: the
// replica leads although no other request can get through. Its requests
// name the lease client in their user agent and carry a timeout of
// max(RenewDeadline/2, 1s).
func TestLeaseNotStarvedByWorkload(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	ls := &leaseServer{}
	srv := httptest.NewServer(ls)
	defer srv.Close()
	limiter := closedLimiter{closed: make(chan struct{})}
	defer close(limiter.closed)
	m, err := manager.New(&rest.Config{Host: srv.URL, RateLimiter: limiter, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}, manager.Options{
		Name: "my-operator",
		LeaderElection: &leader.Options{
			Name: "op", Namespace: "ns", Identity: "a",
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 250 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := m.Kubernetes().CoordinationV1().Leases("ns").Get(ctx, "op", metav1.GetOptions{}); err == nil {
		t.Fatal("a workload request got through the closed limiter: the test proves nothing")
	}

	r := run(t, m)
	eventually(t, "the replica to lead", m.Elector().IsLeader)
	if err := r.stop(t); err != nil {
		t.Errorf("Run = %v", err)
	}
	ls.mu.Lock()
	agents, timeouts := slices.Clone(ls.agents), slices.Clone(ls.timeouts)
	ls.mu.Unlock()
	for i, a := range agents {
		if a != "my-operator/leader-election" || timeouts[i] != "1s" {
			t.Errorf("request %d: user agent %q, timeout %q; want my-operator/leader-election, 1s", i, a, timeouts[i])
		}
	}
	srv.Close()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	goleak.VerifyNone(t, leaks)
}

// TestLogsThroughManagerLogger: client-go's contextual logs from the
// manager's goroutines (leader election, reflectors) reach
// Options.Logger; nothing reaches the process-global klog.
func TestLogsThroughManagerLogger(t *testing.T) {
	var (
		mu          sync.Mutex
		local, glob []string
		capture     = func(to *[]string) func(string, string) {
			return func(prefix, args string) { mu.Lock(); defer mu.Unlock(); *to = append(*to, prefix+" "+args) }
		}
		contains = func(lines []string, s string) bool {
			return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, s) })
		}
	)
	klog.SetLogger(funcr.New(capture(&glob), funcr.Options{Verbosity: 10}))
	defer klog.ClearLogger()

	kube := newCluster(t, configMap("default", "a"))
	opts, _ := electedOptions()
	opts.Logger = funcr.New(capture(&local), funcr.Options{Verbosity: 10})
	m := newManager(t, kube, opts)
	rec := newRecorder()
	if _, err := m.AddController("cms", rec, manager.ControllerOptions{}, manager.Watch{Source: configMaps(t, m)}); err != nil {
		t.Fatal(err)
	}
	r := run(t, m)
	eventually(t, "the leader to reconcile", func() bool { return rec.saw("default/a") })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"Attempting to acquire leader lease", "Caches populated"} {
		if !contains(local, want) {
			t.Errorf("client-go's %q did not reach the manager's logger", want)
		}
	}
	if len(glob) > 0 {
		t.Errorf("%d lines went to the global klog, e.g. %s", len(glob), glob[0])
	}
}
