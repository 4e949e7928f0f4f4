package reconcile_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	clientgoworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// started Controller must be stopped and its Start waited for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait on a condition. It is generous because the
// race detector on a loaded two-core machine is slow; passing tests never
// wait that long.
const waitTimeout = 10 * time.Second

// eventually polls cond until it holds, failing the test with msg if it
// does not within timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %s", timeout, msg)
		}
		time.Sleep(time.Millisecond) // poll interval, not a stand-in for the condition
	}
}

// receive returns the next value from ch, failing the test if none arrives
// within waitTimeout.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		panic("unreachable")
	}
}

// req builds a Request for namespace/name.
func req(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

// fastLimiter retries after 1ms, 2ms, 4ms, ... up to 10ms.
func fastLimiter() workqueue.RateLimiter[reconcile.Request] {
	return clientgoworkqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Millisecond, 10*time.Millisecond)
}

// started is a Controller running in its own goroutine.
type started struct {
	cancel context.CancelFunc
	errc   chan error
}

// start runs c.Start in a goroutine. The test's cleanup stops it if the
// test did not.
func start(t *testing.T, c *reconcile.Controller) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &started{cancel: cancel, errc: make(chan error, 1)}
	go func() { s.errc <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.errc:
		case <-time.After(waitTimeout):
			t.Errorf("Start did not return within %v of cancellation", waitTimeout)
		}
	})
	return s
}

// stop cancels Start's ctx and returns what Start returned.
func (s *started) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	err := receive(t, s.errc, "Start to return")
	s.errc <- err // for the cleanup
	return err
}

// newMetrics returns a fresh registry with the reconcile and workqueue
// metrics registered on it.
func newMetrics(t *testing.T) (*prometheus.Registry, reconcile.Options) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := reconcile.NewMetrics(reg)
	if err != nil {
		t.Fatalf("reconcile.NewMetrics: %v", err)
	}
	qm, err := workqueue.NewMetrics(reg)
	if err != nil {
		t.Fatalf("workqueue.NewMetrics: %v", err)
	}
	return reg, reconcile.Options{Metrics: m, QueueMetrics: qm}
}

// series returns the series of family name whose labels include labels,
// or nil if there is none.
func series(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := make(map[string]string)
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// value returns the value of a counter or gauge series, failing the test if
// the series does not exist.
func value(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	m := series(t, g, name, labels)
	switch {
	case m == nil:
		t.Fatalf("no series %s%v", name, labels)
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	default:
		t.Fatalf("series %s%v is neither a counter nor a gauge", name, labels)
	}
	return 0
}

// samples returns how many observations a histogram series holds, failing
// the test if the series does not exist.
func samples(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) uint64 {
	t.Helper()
	m := series(t, g, name, labels)
	if m == nil || m.Histogram == nil {
		t.Fatalf("no histogram series %s%v", name, labels)
	}
	return m.Histogram.GetSampleCount()
}

// exposition returns the families named names, in the text format that
// Prometheus scrapes. It stands in for testutil.GatherAndCompare, whose
// diff library is not a dependency of this module.
func exposition(t *testing.T, g prometheus.Gatherer, names ...string) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var b strings.Builder
	for _, mf := range mfs { // Gather sorts families by name
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatalf("encoding %s: %v", mf.GetName(), err)
		}
	}
	return b.String()
}

// count returns how many series family name has.
func count(t *testing.T, g prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// jsonLines keeps the lines of a funcr JSON logger, for a test to read.
type jsonLines struct {
	mu      sync.Mutex
	entries []map[string]any
}

// newJSONLines returns a funcr JSON logger with opts whose lines it keeps.
func newJSONLines(t *testing.T, opts funcr.Options) (*jsonLines, logr.Logger) {
	l := &jsonLines{}
	return l, funcr.NewJSON(func(obj string) {
		var e map[string]any
		if err := json.Unmarshal([]byte(obj), &e); err != nil {
			t.Errorf("log line is not JSON: %v: %s", err, obj)
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.entries = append(l.entries, e)
	}, opts)
}

// all returns the lines so far.
func (l *jsonLines) all() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}
