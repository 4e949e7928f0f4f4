package manager

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRESTMetricsCountRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	m := newRESTMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := m.register(reg); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: m.wrap(http.DefaultTransport)}
	for _, path := range []string{"/ok", "/ok", "/missing"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	failing := &http.Client{Transport: m.wrap(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("connection refused")
	}))}
	if _, err := failing.Post("http://unreachable.invalid/x", "", nil); err == nil {
		t.Fatal("request through a failing transport succeeded")
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	want := `
# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="` + host + `",method="GET"} 2
rest_client_requests_total{code="404",host="` + host + `",method="GET"} 1
rest_client_requests_total{code="<error>",host="unreachable.invalid",method="POST"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rest_client_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.latency); n != 2 {
		t.Errorf("rest_client_request_duration_seconds has %d series, want 2 (GET and POST)", n)
	}
}
