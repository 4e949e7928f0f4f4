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

		// controller-runtime v0.25's label sets.
		for _, name := range clientGoNames {
			wantLabels := []string{"controller", "name"}
			if name == "workqueue_depth" {
				wantLabels = append(wantLabels, "priority")
			}
			mf := family(t, reg, name)
			if mf == nil || len(mf.GetMetric()) == 0 {
				t.Errorf("no metric %s", name)
				continue
			}
			for _, s := range mf.GetMetric() {
				var got []string
				for _, l := range s.GetLabel() {
					got = append(got, l.GetName())
					if l.GetName() == "name" && l.GetValue() != "widgets" {
						t.Errorf("%s: name=%q, want widgets", name, l.GetValue())
					}
				}
				if !slices.Equal(got, wantLabels) {
					t.Errorf("%s labels %v, want %v", name, got, wantLabels)
				}
			}
		}

		const want = `# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{controller="widgets",name="widgets"} 2
# HELP workqueue_retries_total Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)
# TYPE workqueue_retries_total counter
workqueue_retries_total{controller="widgets",name="widgets"} 1
`
		if got := exposition(t, reg, "workqueue_adds_total", "workqueue_retries_total"); got != want {
			t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
		}
		if got := total(t, reg, "workqueue_depth"); got != 1 {
			t.Errorf("workqueue_depth = %v, want 1", got)
		}
		for _, name := range []string{"workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"} {
			if s := series(t, reg, name); s.GetHistogram().GetSampleCount() != 1 {
				t.Errorf("%s has %d samples, want 1 (one Get, one Done)", name, s.GetHistogram().GetSampleCount())
			}
		}
	})
}

// family returns the family named name, or nil.
func family(t *testing.T, g prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	for _, mf := range gather(t, g) {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// total returns the sum over the series of a gauge or counter family, or
// of a histogram family's sample sums.
func total(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mf := family(t, g, name)
	if mf == nil {
		t.Fatalf("no metric %s", name)
	}
	var sum float64
	for _, s := range mf.GetMetric() {
		sum += s.GetGauge().GetValue() + s.GetCounter().GetValue() + s.GetHistogram().GetSampleSum()
	}
	return sum
}

// TestMetricsAgreeWithClientGo runs the same steps through each queue on a
// fake clock and checks the metrics client-go defines the way client-go
// computes them: ClientGoQueue is the reference.
func TestMetricsAgreeWithClientGo(t *testing.T) {
	tests := []struct {
		name   string
		do     func(t *testing.T, q workqueue.Interface[string], clk *clocktesting.FakeClock)
		metric string
		want   float64 // gauge or counter value; histogram sum in seconds
	}{
		{
			name: "depth counts a key re-added while in processing",
			do: func(t *testing.T, q workqueue.Interface[string], _ *clocktesting.FakeClock) {
				q.Add("a")
				get(t, q)
				q.Add("a")
			},
			metric: "workqueue_depth", want: 1,
		},
		{
			name: "retries count AddAfter",
			do: func(t *testing.T, q workqueue.Interface[string], _ *clocktesting.FakeClock) {
				q.AddAfter("a", time.Hour)
				q.AddAfter("b", time.Hour)
			},
			metric: "workqueue_retries_total", want: 2,
		},
		{
			name: "queue duration of a key re-added in processing runs from its Add",
			do: func(t *testing.T, q workqueue.Interface[string], clk *clocktesting.FakeClock) {
				q.Add("a")
				get(t, q) // waited 0s
				q.Add("a")
				clk.Step(2 * time.Second)
				q.Done("a")
				clk.Step(time.Second)
				get(t, q) // waited 3s
			},
			metric: "workqueue_queue_duration_seconds", want: 3,
		},
		{
			name: "a priority bump keeps the wait start",
			do: func(t *testing.T, q workqueue.Interface[string], clk *clocktesting.FakeClock) {
				pq, ok := q.(workqueue.PriorityInterface[string])
				if !ok {
					q.Add("a") // client-go: no priorities, the same wait
					clk.Step(4 * time.Second)
					get(t, q)
					return
				}
				pq.AddWithPriority("a", workqueue.PriorityLow)
				clk.Step(3 * time.Second)
				pq.AddWithPriority("a", workqueue.PriorityHigh)
				clk.Step(time.Second)
				get(t, q)
			},
			metric: "workqueue_queue_duration_seconds", want: 4,
		},
	}
	forEach(t, func(t *testing.T, newQueue newFunc) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				reg := newRegistry()
				m, err := workqueue.NewMetrics(reg)
				if err != nil {
					t.Fatal(err)
				}
				clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
				q := newQueue(t, workqueue.Options[string]{Name: "q", Metrics: m, Clock: clk})
				tt.do(t, q, clk)
				if got := total(t, reg, tt.metric); got != tt.want {
					t.Errorf("%s = %v, want %v", tt.metric, got, tt.want)
				}
			})
		}
	})
}

// TestHistogramBuckets: the duration histograms use controller-runtime
// v0.25's buckets, 10ns to 1000s, so a long backlog does not fall into +Inf.
func TestHistogramBuckets(t *testing.T) {
	want := prometheus.ExponentialBuckets(10e-9, 10, 12)
	forEach(t, func(t *testing.T, newQueue newFunc) {
		reg := newRegistry()
		m, err := workqueue.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		q := newQueue(t, workqueue.Options[string]{Name: "q", Metrics: m, Clock: clk})
		q.Add("a")
		clk.Step(500 * time.Second)
		get(t, q)
		clk.Step(500 * time.Second)
		q.Done("a")
		for _, name := range []string{"workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"} {
			h := series(t, reg, name).GetHistogram()
			var got []float64
			for _, b := range h.GetBucket() {
				got = append(got, b.GetUpperBound())
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s buckets %v, want %v", name, got, want)
				continue
			}
			if n := h.GetBucket()[len(want)-1].GetCumulativeCount(); n != 1 {
				t.Errorf("%s: a 500s sample is in %d buckets up to 1000s, want 1", name, n)
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

// TestDepthPriorityLabel: workqueue_depth carries controller-runtime's
// priority label, the priority as a number; a queue without priorities
// reports priority="", as controller-runtime's metrics provider does.
func TestDepthPriorityLabel(t *testing.T) {
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
	k, _ := q.Get() // b, then re-added at low: it counts at the priority it waits with
	q.AddWithPriority(k, workqueue.PriorityLow)
	cg, err := workqueue.NewClientGo(workqueue.Options[string]{Name: "cg", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.ShutDown()
	cg.Add("a")
	const want = `# HELP workqueue_depth Current depth of workqueue by workqueue and priority
# TYPE workqueue_depth gauge
workqueue_depth{controller="cg",name="cg",priority=""} 1
workqueue_depth{controller="q",name="q",priority="-1"} 2
workqueue_depth{controller="q",name="q",priority="0"} 1
workqueue_depth{controller="q",name="q",priority="1"} 1
`
	if got := exposition(t, reg, "workqueue_depth"); got != want {
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
