package manager

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
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

// conns are the connections the manager's clients dialed (their HTTP
// client is the manager's own, not client-go's shared, cached one), so
// that Run closes them when it returns: client-go's HTTP/2 transport
// never closes an idle connection on its own, and each would keep a
// goroutine reading it.
type conns struct {
	mu   sync.Mutex
	open map[*trackedConn]struct{}
}

// dial wraps next (nil: client-go's default dialer, TCP with a 30s timeout
// and a 30s keep-alive) so that c tracks what it dials.
func (c *conns) dial(next func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	if next == nil {
		next = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := next(ctx, network, address)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: conn, set: c}
		c.mu.Lock()
		if c.open == nil {
			c.open = make(map[*trackedConn]struct{})
		}
		c.open[tc] = struct{}{}
		c.mu.Unlock()
		return tc, nil
	}
}

// closeAll closes every connection still open. Requests made later dial
// new ones.
func (c *conns) closeAll() {
	c.mu.Lock()
	open := c.open
	c.open = nil
	c.mu.Unlock()
	for tc := range open {
		_ = tc.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	set *conns
}

// NetConn is the connection tc wraps, as for tls.Conn: a fenced config
// (leader.FenceConfig) finds its own connection through it.
func (tc *trackedConn) NetConn() net.Conn { return tc.Conn }

func (tc *trackedConn) Close() error {
	tc.set.mu.Lock()
	delete(tc.set.open, tc)
	tc.set.mu.Unlock()
	return tc.Conn.Close()
}
