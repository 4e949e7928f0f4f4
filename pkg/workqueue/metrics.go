package workqueue

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Metrics reports queue metrics to Prometheus under client-go's names
// (workqueue_depth, workqueue_adds_total, ...), labelled by queue name, so
// dashboards built for client-go and controller-runtime keep working. The
// "controller" label repeats the name, as controller-runtime does.
//
// One Metrics serves every queue of a manager. It implements client-go's
// workqueue.MetricsProvider.
type Metrics struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
	byPriority     *depthCollector
}

var _ workqueue.MetricsProvider = (*Metrics)(nil)

// NewMetrics creates the queue metrics and registers them on reg. It fails
// if reg already holds metrics of the same names, for example when two
// managers share one registry.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{"name", "controller"}
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 10)
	m := &Metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of workqueue",
		}, labels),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "adds_total",
			Help: "Total number of adds handled by workqueue",
		}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help:    "How long in seconds an item stays in workqueue before being requested",
			Buckets: buckets,
		}, labels),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "work_duration_seconds",
			Help:    "How long in seconds processing an item from workqueue takes",
			Buckets: buckets,
		}, labels),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. " +
				"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
		}, labels),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running",
		}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "retries_total",
			Help: "Total number of retries handled by workqueue",
		}, labels),
		byPriority: &depthCollector{
			desc: prometheus.NewDesc("ctrlkit_workqueue_depth_by_priority",
				"Current depth of workqueue per priority (low, normal, high)", []string{"name", "priority"}, nil),
			queues: make(map[string]func() [numLevels]int),
		},
	}
	for _, c := range []prometheus.Collector{m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longestRunning, m.retries, m.byPriority} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("workqueue: metrics already registered on this registry (give each manager its own registry): %w", err)
			}
			return nil, fmt.Errorf("workqueue: registering metrics: %w", err)
		}
	}
	return m, nil
}

// NewDepthMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name, name)
}

// NewAddsMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name, name)
}

// NewLatencyMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name, name)
}

// NewWorkDurationMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name, name)
}

// NewUnfinishedWorkSecondsMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name, name)
}

// NewLongestRunningProcessorSecondsMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longestRunning.WithLabelValues(name, name)
}

// NewRetriesMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name, name)
}

// forQueue resolves the series of the ctrlkit Queue named name; depth
// reports its waiting keys per priority at scrape time.
func (m *Metrics) forQueue(name string, depth func() [numLevels]int) queueMetrics {
	m.byPriority.set(name, depth)
	return queueMetrics{
		depth:        m.NewDepthMetric(name),
		adds:         m.NewAddsMetric(name),
		latency:      m.NewLatencyMetric(name),
		workDuration: m.NewWorkDurationMetric(name),
		unfinished:   m.NewUnfinishedWorkSecondsMetric(name),
		longest:      m.NewLongestRunningProcessorSecondsMetric(name),
		retries:      m.NewRetriesMetric(name),
	}
}

// depthCollector reports ctrlkit_workqueue_depth_by_priority by asking each
// queue at scrape time, so the hot path pays nothing for it.
type depthCollector struct {
	desc   *prometheus.Desc
	mu     sync.Mutex
	queues map[string]func() [numLevels]int
}

func (c *depthCollector) set(name string, f func() [numLevels]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queues[name] = f
}

// Describe implements prometheus.Collector.
func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	queues := maps.Clone(c.queues)
	c.mu.Unlock()
	for name, f := range queues {
		d := f()
		for i, n := range d {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), name, Priority(i-1).String())
		}
	}
}

// queueMetrics are one queue's series; the queue reaches Prometheus only
// through these small interfaces.
type queueMetrics struct {
	depth        workqueue.GaugeMetric
	adds         workqueue.CounterMetric
	latency      workqueue.HistogramMetric
	workDuration workqueue.HistogramMetric
	unfinished   workqueue.SettableGaugeMetric
	longest      workqueue.SettableGaugeMetric
	retries      workqueue.CounterMetric
}

// unfinishedWorkLoop updates the unfinished-work gauges every 500ms, as
// client-go's queue does.
func (q *Queue[T]) unfinishedWorkLoop() {
	t := q.clock.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-t.C():
		}
		q.mu.Lock()
		now := q.now()
		var total, oldest float64
		for n := q.procHead; n != nil; n = n.procNext { // at most one per worker
			age := (now - n.started).Seconds()
			total += age
			oldest = max(oldest, age)
		}
		q.mu.Unlock()
		q.m.unfinished.Set(total)
		q.m.longest.Set(oldest)
	}
}
