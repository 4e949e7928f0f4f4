package reconcile

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Result labels of controller_runtime_reconcile_total.
const (
	labelSuccess      = "success"
	labelError        = "error"
	labelRequeueAfter = "requeue_after"
)

// Metrics holds the reconcile metrics of every controller of one manager,
// under controller-runtime's names so existing dashboards keep working,
// plus ctrlkit_event_to_reconcile_seconds.
type Metrics struct {
	total          *prometheus.CounterVec
	errors         *prometheus.CounterVec
	terminalErrors *prometheus.CounterVec
	panics         *prometheus.CounterVec
	timeouts       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	maxWorkers     *prometheus.GaugeVec
	activeWorkers  *prometheus.GaugeVec
	eventToStart   *prometheus.HistogramVec
}

// NewMetrics creates the reconcile metrics and registers them on reg. It
// fails if reg already holds metrics of the same names.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	ctl := []string{"controller"}
	m := &Metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_total",
			Help: "Total number of reconciliations per controller",
		}, []string{"controller", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_errors_total",
			Help: "Total number of reconciliation errors per controller",
		}, ctl),
		terminalErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_terminal_reconcile_errors_total",
			Help: "Total number of terminal reconciliation errors per controller",
		}, ctl),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_panics_total",
			Help: "Total number of reconciliation panics per controller",
		}, ctl),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_timeouts_total",
			Help: "Total number of reconciliation timeouts per controller",
		}, ctl),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "controller_runtime_reconcile_time_seconds",
			Help: "Length of time per reconciliation per controller",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
				1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60},
		}, ctl),
		maxWorkers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_max_concurrent_reconciles",
			Help: "Maximum number of concurrent reconciles per controller",
		}, ctl),
		activeWorkers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_active_workers",
			Help: "Number of currently used workers per controller",
		}, ctl),
		eventToStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ctrlkit_event_to_reconcile_seconds",
			Help: "Time from the first informer event that enqueued a key since its last Reconcile started " +
				"to the start of the next Reconcile of that key; retries and RequeueAfter are not timed " +
				"(an event ends a pending delay, so the key waits only behind the queue)",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18), // 1ms .. ~131s
		}, ctl),
	}
	for _, c := range []prometheus.Collector{m.total, m.errors, m.terminalErrors, m.panics, m.timeouts, m.duration, m.maxWorkers, m.activeWorkers, m.eventToStart} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("reconcile: registering metrics (give each manager its own registry): %w", err)
		}
	}
	return m, nil
}

// Forget deletes every series of the controller named name, once it is
// gone for good (a manager's RemoveController): a controller that stops
// and starts again under the same name, as after a lost lease, keeps its
// series and counts on. A nil receiver does nothing.
func (m *Metrics) Forget(name string) {
	if m == nil {
		return
	}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.total, m.errors, m.terminalErrors, m.panics, m.timeouts, m.duration, m.maxWorkers, m.activeWorkers, m.eventToStart} {
		v.DeletePartialMatch(prometheus.Labels{"controller": name})
	}
}

// controllerMetrics are one controller's series, resolved once so the hot
// path does no label lookups.
type controllerMetrics struct {
	success, failed, requeueAfter prometheus.Counter
	errors, terminalErrors        prometheus.Counter
	panics, timeouts              prometheus.Counter
	duration, eventToStart        prometheus.Observer
	activeWorkers                 prometheus.Gauge
}

// forController resolves and zeroes the series of one controller. A nil
// receiver yields series that are counted nowhere.
func (m *Metrics) forController(name string, workers int) controllerMetrics {
	if m == nil {
		m, _ = NewMetrics(prometheus.NewRegistry())
	}
	m.maxWorkers.WithLabelValues(name).Set(float64(workers))
	return controllerMetrics{
		success:        m.total.WithLabelValues(name, labelSuccess),
		failed:         m.total.WithLabelValues(name, labelError),
		requeueAfter:   m.total.WithLabelValues(name, labelRequeueAfter),
		errors:         m.errors.WithLabelValues(name),
		terminalErrors: m.terminalErrors.WithLabelValues(name),
		panics:         m.panics.WithLabelValues(name),
		timeouts:       m.timeouts.WithLabelValues(name),
		duration:       m.duration.WithLabelValues(name),
		eventToStart:   m.eventToStart.WithLabelValues(name),
		activeWorkers:  m.activeWorkers.WithLabelValues(name),
	}
}
