package workqueue

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Metrics reports queue metrics to Prometheus as controller-runtime v0.25
// does: client-go's names (workqueue_depth, workqueue_adds_total, ...),
// controller-runtime's label sets, help texts and histogram buckets, so
// dashboards built for client-go and controller-runtime keep working. Every
// series is labelled by queue name; the "controller" label repeats the
// name, and workqueue_depth adds a "priority" label, as controller-runtime
// does.
//
// What a ctrlkit Queue reports, as client-go and controller-runtime count
// it:
//   - workqueue_depth: keys waiting, counting a key added again while it is
//     in processing, by the priority they wait at ("-1", "0", "1": the
//     Priority as a number, as controller-runtime renders its priorities).
//     A queue built by NewClientGo has no priorities and reports
//     priority="", as controller-runtime's provider does for client-go's
//     queues.
//   - workqueue_adds_total: keys that started waiting (an Add of a waiting
//     key is not counted again; a delayed key counts when its delay ends).
//   - workqueue_retries_total: AddAfter and AddRateLimited calls with a
//     delay above zero, as controller-runtime counts them (client-go also
//     counts those whose delay is zero).
//   - workqueue_queue_duration_seconds: from the Add that made a key wait
//     (or the end of its delay) to the Get that hands it out. A priority
//     bump does not restart it; a key added again in processing is timed
//     from that Add, not from Done.
//   - workqueue_work_duration_seconds: from Get to Done.
//   - workqueue_unfinished_work_seconds and
//     workqueue_longest_running_processor_seconds: the keys in processing,
//     at scrape time.
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
	descs          queueDescs

	mu     sync.Mutex
	queues map[string]*queueEntry // ctrlkit Queues by name
}

var _ workqueue.MetricsProvider = (*Metrics)(nil)

// The help texts of controller-runtime v0.25's series.
const (
	depthHelp      = "Current depth of workqueue by workqueue and priority"
	addsHelp       = "Total number of adds handled by workqueue"
	latencyHelp    = "How long in seconds an item stays in workqueue before being requested"
	workHelp       = "How long in seconds processing an item from workqueue takes."
	unfinishedHelp = "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. " +
		"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."
	longestHelp = "How many seconds has the longest running processor for workqueue been running."
	retriesHelp = "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)"
)

// NewMetrics creates the queue metrics and registers them on reg. It fails
// if reg already holds metrics of the same names, for example when two
// managers share one registry.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{"name", "controller"}
	depthLabels := []string{"name", "controller", "priority"}
	desc := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("workqueue_"+name, help, labels, nil)
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: name, Help: help, Buckets: bucketBounds}, labels)
	}
	m := &Metrics{
		depth:          prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth", Help: depthHelp}, depthLabels),
		adds:           prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total", Help: addsHelp}, labels),
		latency:        histogram("queue_duration_seconds", latencyHelp),
		workDuration:   histogram("work_duration_seconds", workHelp),
		unfinished:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "unfinished_work_seconds", Help: unfinishedHelp}, labels),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "longest_running_processor_seconds", Help: longestHelp}, labels),
		retries:        prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total", Help: retriesHelp}, labels),
		descs: queueDescs{
			depth:          desc("depth", depthHelp, depthLabels),
			adds:           desc("adds_total", addsHelp, labels),
			latency:        desc("queue_duration_seconds", latencyHelp, labels),
			workDuration:   desc("work_duration_seconds", workHelp, labels),
			unfinished:     desc("unfinished_work_seconds", unfinishedHelp, labels),
			longestRunning: desc("longest_running_processor_seconds", longestHelp, labels),
			retries:        desc("retries_total", retriesHelp, labels),
		},
		queues: make(map[string]*queueEntry),
	}
	if err := reg.Register(collector{m}); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil, fmt.Errorf("workqueue: metrics already registered on this registry (give each manager its own registry): %w", err)
		}
		return nil, fmt.Errorf("workqueue: registering metrics: %w", err)
	}
	return m, nil
}

// NewDepthMetric implements workqueue.MetricsProvider. The series has
// priority="": client-go's queue has no priorities.
func (m *Metrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name, name, "")
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

// queueEntry is a ctrlkit Queue known to a Metrics: how to read it, and the
// totals of the queues of the same name it replaced.
type queueEntry struct {
	snapshot func() queueSnapshot
	retired  stats
}

// forQueue registers the ctrlkit Queue named name: its series are read
// from snapshot when the registry is scraped, so the queue's hot path only
// bumps plain numbers under the lock it already holds. A queue that
// replaces one of the same name (a controller restarted after losing the
// lease, say) continues its counters and histograms, as the series of a
// client-go queue of that name would.
func (m *Metrics) forQueue(name string, snapshot func() queueSnapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := &queueEntry{snapshot: snapshot}
	if old := m.queues[name]; old != nil {
		e.retired = old.retired
		e.retired.add(old.snapshot().stats)
	}
	m.queues[name] = e
}

// Forget deletes every series of the queue named name, once it is gone
// for good (a manager's RemoveController): a queue that replaces one of
// the same name otherwise continues its series (forQueue). A nil receiver
// does nothing.
func (m *Metrics) Forget(name string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	delete(m.queues, name)
	m.mu.Unlock()
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longestRunning, m.retries} {
		v.DeletePartialMatch(prometheus.Labels{"name": name})
	}
}

// collector is how a Metrics reaches its registry; it keeps Describe and
// Collect out of Metrics's API.
type collector struct{ m *Metrics }

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.m.vecs() {
		v.Describe(ch)
	}
}

// Collect implements prometheus.Collector: the series of queues built by
// NewClientGo (kept in the vectors), then those of each ctrlkit Queue,
// read from the queue at scrape time.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	for _, v := range m.vecs() {
		v.Collect(ch)
	}
	m.mu.Lock()
	queues := maps.Clone(m.queues)
	m.mu.Unlock()
	for name, e := range queues {
		s := e.snapshot()
		s.stats.add(e.retired)
		s.send(&m.descs, name, ch)
	}
}

func (m *Metrics) vecs() []prometheus.Collector {
	return []prometheus.Collector{m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longestRunning, m.retries}
}

// queueDescs describe the series a ctrlkit Queue reports; they match the
// vectors' descriptions, so both kinds of queue share one family per name.
type queueDescs struct {
	depth, adds, latency, workDuration, unfinished, longestRunning, retries *prometheus.Desc
}

// numBuckets is how many bounds the duration histograms have.
const numBuckets = 12

// bucketBounds are controller-runtime v0.25's workqueue histogram buckets,
// 10ns to 1000s, computed the same way so that the "le" labels match its
// series.
var bucketBounds = prometheus.ExponentialBuckets(10e-9, 10, numBuckets)

// histogram is a Prometheus histogram over bucketBounds kept as plain
// numbers: the queue's lock guards it.
type histogram struct {
	counts [numBuckets + 1]uint64 // one per bound, then +Inf
	sum    float64                // seconds
}

// observe records d, in the same bucket client_golang would put it in.
func (h *histogram) observe(d time.Duration) {
	v := d.Seconds()
	i := 0
	for i < len(bucketBounds) && v > bucketBounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
}

// metric returns h as a Prometheus histogram with cumulative buckets.
func (h *histogram) metric(desc *prometheus.Desc, name string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bucketBounds))
	var n uint64
	for i, b := range bucketBounds {
		n += h.counts[i]
		buckets[b] = n
	}
	n += h.counts[len(bucketBounds)]
	return prometheus.MustNewConstHistogram(desc, n, h.sum, buckets, name, name)
}

// stats are a ctrlkit Queue's counters and histograms, guarded by the
// queue's lock.
type stats struct {
	adds, retries         uint64
	latency, workDuration histogram
}

func (s *stats) add(o stats) {
	s.adds += o.adds
	s.retries += o.retries
	s.latency.add(&o.latency)
	s.workDuration.add(&o.workDuration)
}

func (h *histogram) add(o *histogram) {
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.sum += o.sum
}

// queueSnapshot is a ctrlkit Queue's metrics at one instant.
type queueSnapshot struct {
	stats
	depth                      [numLevels]int // by priority level
	unfinished, longestRunning float64        // seconds
}

// snapshot reads q's metrics; it runs when Prometheus scrapes.
func (q *Queue[T]) snapshot() queueSnapshot {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := queueSnapshot{stats: q.stats}
	for i := range q.levels {
		s.depth[i] = q.levels[i].n + q.held[i]
	}
	now := q.now()
	for n := q.procHead; n != nil; n = n.procNext { // at most one per worker
		age := (now - n.started).Seconds()
		s.unfinished += age
		s.longestRunning = max(s.longestRunning, age)
	}
	return s
}

// send writes s as the series of the queue named name.
func (s *queueSnapshot) send(d *queueDescs, name string, ch chan<- prometheus.Metric) {
	for i, n := range s.depth {
		ch <- prometheus.MustNewConstMetric(d.depth, prometheus.GaugeValue, float64(n), name, name, priorityLabels[i])
	}
	ch <- prometheus.MustNewConstMetric(d.adds, prometheus.CounterValue, float64(s.adds), name, name)
	ch <- prometheus.MustNewConstMetric(d.retries, prometheus.CounterValue, float64(s.retries), name, name)
	ch <- s.latency.metric(d.latency, name)
	ch <- s.workDuration.metric(d.workDuration, name)
	ch <- prometheus.MustNewConstMetric(d.unfinished, prometheus.GaugeValue, s.unfinished, name, name)
	ch <- prometheus.MustNewConstMetric(d.longestRunning, prometheus.GaugeValue, s.longestRunning, name, name)
}

// priorityLabels are the priority label values of the levels, the Priority
// as a number, as controller-runtime renders its priorities.
var priorityLabels = func() (l [numLevels]string) {
	for _, p := range []Priority{PriorityLow, PriorityNormal, PriorityHigh} {
		l[p.level()] = strconv.Itoa(int(p))
	}
	return l
}()
