package webhook

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are a Server's, with controller-runtime's names, labels and
// buckets, so that dashboards built on them keep working.
type metrics struct {
	latency  *prometheus.HistogramVec
	requests *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
	// panics count the panics Admission and Conversion recover from.
	panics, conversionPanics prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            "controller_runtime_webhook_latency_seconds",
			Help:                            "Histogram of the latency of processing admission requests",
			Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, []string{"webhook"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_webhook_requests_total",
			Help: "Total number of admission requests by HTTP status code.",
		}, []string{"webhook", "code"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_webhook_requests_in_flight",
			Help: "Current number of admission requests being served.",
		}, []string{"webhook"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_runtime_webhook_panics_total",
			Help: "Total number of webhook panics",
		}),
		conversionPanics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_runtime_conversion_webhook_panics_total",
			Help: "Total number of conversion webhook panics",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.latency, m.requests, m.inFlight, m.panics, m.conversionPanics}
}

type metricsKey struct{}

// withMetrics gives the handlers under ctx the server's metrics, for their
// panic counters.
func withMetrics(ctx context.Context, m *metrics) context.Context {
	return context.WithValue(ctx, metricsKey{}, m)
}

// countPanic counts a recovered panic on the metrics of the server
// serving ctx's request, if any: a handler may also be served on its own.
func countPanic(ctx context.Context, conversion bool) {
	m, ok := ctx.Value(metricsKey{}).(*metrics)
	switch {
	case !ok:
	case conversion:
		m.conversionPanics.Inc()
	default:
		m.panics.Inc()
	}
}

// instrument counts h's requests under webhook=path. The series of the
// likely codes start at zero.
func (m *metrics) instrument(path string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"webhook": path}
	requests := m.requests.MustCurryWith(labels)
	requests.WithLabelValues("200")
	requests.WithLabelValues("500")
	return promhttp.InstrumentHandlerDuration(m.latency.MustCurryWith(labels),
		promhttp.InstrumentHandlerCounter(requests,
			promhttp.InstrumentHandlerInFlight(m.inFlight.With(labels), h)))
}
