package workqueue_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// clientGoNames are the metric names of client-go's workqueue, which
// existing dashboards query.
var clientGoNames = []string{
	"workqueue_adds_total",
	"workqueue_depth",
	"workqueue_longest_running_processor_seconds",
	"workqueue_queue_duration_seconds",
	"workqueue_retries_total",
	"workqueue_unfinished_work_seconds",
	"workqueue_work_duration_seconds",
}

// exposition returns the families named names in the text format that
// Prometheus scrapes.
func exposition(t *testing.T, g prometheus.Gatherer, names ...string) string {
	t.Helper()
	var b strings.Builder
	for _, mf := range gather(t, g) { // sorted by name
		if slices.Contains(names, mf.GetName()) {
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				t.Fatalf("encoding %s: %v", mf.GetName(), err)
			}
		}
	}
	return b.String()
}

func gather(t *testing.T, g prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	return mfs
}

// series returns the only series of family name, or nil.
func series(t *testing.T, g prometheus.Gatherer, name string) *dto.Metric {
	t.Helper()
	for _, mf := range gather(t, g) {
		if mf.GetName() == name {
			if n := len(mf.GetMetric()); n != 1 {
				t.Fatalf("%s has %d series, want 1", name, n)
			}
			return mf.GetMetric()[0]
		}
	}
	return nil
}

func TestMetricsNamesAndLabels(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		reg := newRegistry()
		m, err := workqueue.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		q := newQueue(t, workqueue.Options[string]{Name: "widgets", Metrics: m, RateLimiter: expLimiter(time.Hour)})
		q.Add("a")
		q.Add("a") // stingy: not counted again
		q.Add("b")
		q.Done(get(t, q))
		q.AddRateLimited("c") // an hour away: a retry, not yet an add

		for _, name := range clientGoNames {
			s := series(t, reg, name)
			if s == nil {
				t.Errorf("no metric %s", name)
				continue
			}
			labels := make(map[string]string)
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["name"] != "widgets" {
				t.Errorf("%s labels = %v, want name=widgets", name, labels)
			}
		}

		const want = `# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{controller="widgets",name="widgets"} 2
# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{controller="widgets",name="widgets"} 1
# HELP workqueue_retries_total Total number of retries handled by workqueue
# TYPE workqueue_retries_total counter
workqueue_retries_total{controller="widgets",name="widgets"} 1
`
		if got := exposition(t, reg, "workqueue_adds_total", "workqueue_depth", "workqueue_retries_total"); got != want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
		}
		for _, name := range []string{"workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"} {
			if s := series(t, reg, name); s.GetHistogram().GetSampleCount() != 1 {
				t.Errorf("%s has %d samples, want 1 (one Get, one Done)", name, s.GetHistogram().GetSampleCount())
			}
		}
	})
}

// TestUnfinishedWorkMetrics drives the queue's clock by hand inside a
// synctest bubble: synctest.Wait lets the gauge goroutine catch up.
func TestUnfinishedWorkMetrics(t *testing.T) {
	forEach(t, func(t *testing.T, newQueue newFunc) {
		synctest.Test(t, func(t *testing.T) {
			reg := newRegistry()
			m, err := workqueue.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			q := newQueue(t, workqueue.Options[string]{Name: "q", Metrics: m, Clock: clk})
			q.Add("old")
			q.Add("new")
			get(t, q)
			synctest.Wait() // the gauge goroutine is waiting for its ticker
			clk.Step(1500 * time.Millisecond)
			get(t, q)
			synctest.Wait()
			clk.Step(500 * time.Millisecond) // a tick: "old" has run 2s, "new" 0.5s
			synctest.Wait()

			gauge := func(name string) float64 { return series(t, reg, name).GetGauge().GetValue() }
			if got := gauge("workqueue_unfinished_work_seconds"); got != 2.5 {
				t.Errorf("workqueue_unfinished_work_seconds = %v, want 2.5", got)
			}
			if got := gauge("workqueue_longest_running_processor_seconds"); got != 2 {
				t.Errorf("workqueue_longest_running_processor_seconds = %v, want 2", got)
			}
			q.ShutDown()
			clk.Step(time.Second) // client-go's gauge goroutine notices ShutDown on its next tick
		})
	})
}

func TestDepthByPriorityMetric(t *testing.T) {
	reg := newRegistry()
	m, err := workqueue.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := workqueue.New(workqueue.Options[string]{Name: "q", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer q.ShutDown()
	q.AddWithPriority("a", workqueue.PriorityLow)
	q.AddWithPriority("b", workqueue.PriorityHigh)
	q.AddWithPriority("c", workqueue.PriorityHigh)
	q.Add("d")
	const want = `# HELP ctrlkit_workqueue_depth_by_priority Current depth of workqueue per priority (low, normal, high)
# TYPE ctrlkit_workqueue_depth_by_priority gauge
ctrlkit_workqueue_depth_by_priority{name="q",priority="high"} 2
ctrlkit_workqueue_depth_by_priority{name="q",priority="low"} 1
ctrlkit_workqueue_depth_by_priority{name="q",priority="normal"} 1
`
	if got := exposition(t, reg, "ctrlkit_workqueue_depth_by_priority"); got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

func TestNewMetricsTwiceOnOneRegistry(t *testing.T) {
	reg := newRegistry()
	if _, err := workqueue.NewMetrics(reg); err != nil {
		t.Fatalf("first NewMetrics: %v", err)
	}
	_, err := workqueue.NewMetrics(reg)
	if err == nil {
		t.Fatal("second NewMetrics on the same registry succeeded, want an error")
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Errorf("error %v does not wrap prometheus.AlreadyRegisteredError", err)
	}
	if !strings.Contains(err.Error(), "own registry") {
		t.Errorf("error %q does not tell the caller to give each manager its own registry", err)
	}
}
