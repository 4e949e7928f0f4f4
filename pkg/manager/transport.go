package manager

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// restMetrics are client-go's rest_client_* series, as controller-runtime
// exposes them, counted by a transport wrapper on the manager's rest config
// instead of client-go's process-global metrics hooks, so that each manager
// has its own and nothing global is registered.
type restMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newRESTMetrics() *restMetrics {
	return &restMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total",
			Help: "Number of HTTP requests, partitioned by status code, method, and host.",
		}, []string{"code", "method", "host"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            "rest_client_request_duration_seconds",
			Help:                            "Request latency in seconds. Broken down by verb and host.",
			Buckets:                         []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0},
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, []string{"verb", "host"}),
	}
}

// register adds the series to reg.
func (m *restMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// wrap is a rest.Config WrapTransport: it counts every HTTP request (each
// retry is a request, as in client-go) with its status code, or "<error>"
// when no response came, and times it to the response headers (for a
// watch, to the start of the stream).
func (m *restMetrics) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		code := "<error>"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		m.requests.WithLabelValues(code, req.Method, req.URL.Host).Inc()
		m.latency.WithLabelValues(req.Method, req.URL.Host).Observe(time.Since(start).Seconds())
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
