package manager

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
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

// TestFenceWrites checks the fence at the transport, after client-go's
// rate limiter: a write whose context belongs to a term of leadership that
// is over is not sent, a read is, and a write of a live term is.
func TestFenceWrites(t *testing.T) {
	var writes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writes.Add(1)
		}
	}))
	defer srv.Close()
	client, err := rest.HTTPClientFor(leader.FenceConfig(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	send := func(ctx context.Context, method string) error {
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+"/api/v1/namespaces/ns/configmaps/cm", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	e, err := leader.New(fake.NewClientset(), leader.Options{Name: "op", Namespace: "ns", Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	leading := make(chan context.Context, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- e.Run(runCtx, func(ctx context.Context) error {
			leading <- ctx
			<-ctx.Done()
			return nil
		})
	}()
	var term context.Context
	select {
	case term = <-leading:
	case <-time.After(time.Minute):
		t.Fatal("the elector did not lead within a minute on a fake clientset")
	}
	term = context.WithoutCancel(term) // the term's values, not its cancellation

	if err := send(term, http.MethodPut); err != nil {
		t.Fatalf("PUT while leading: %v", err)
	}
	if err := send(context.Background(), http.MethodPost); err != nil {
		t.Fatalf("POST outside any term: %v", err)
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := send(term, http.MethodPut); !errors.Is(err, leader.ErrNotLeader) {
		t.Errorf("PUT after the term ended: %v, want an error wrapping leader.ErrNotLeader", err)
	}
	if err := send(term, http.MethodGet); err != nil {
		t.Errorf("GET after the term ended: %v, want it sent (reads are not fenced)", err)
	}
	if n := writes.Load(); n != 2 {
		t.Errorf("the server received %d writes, want 2 (the PUT while leading and the POST outside any term)", n)
	}
}

// TestConnsCloseAll: the manager's dialer tracks every connection it
// makes until it is closed, and closeAll closes the ones still open, as
// Run does when it returns; a connection closed before is not closed
// twice, and a later dial is tracked anew.
func TestConnsCloseAll(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var set conns
	dial := set.dial((&net.Dialer{}).DialContext)
	open := func() (client, server net.Conn) {
		c, err := dial(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c, <-accepted
	}
	closedEarly, closedEarlyServer := open()
	defer closedEarlyServer.Close()
	kept, keptServer := open()
	defer keptServer.Close()
	if err := closedEarly.Close(); err != nil {
		t.Fatalf("closing a tracked connection: %v", err)
	}
	set.mu.Lock()
	n := len(set.open)
	set.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d connections tracked after one of two was closed, want 1", n)
	}

	set.closeAll()
	if _, err := kept.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("writing to a connection after closeAll: %v, want net.ErrClosed", err)
	}
	_ = keptServer.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := keptServer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the server's end of a connection closeAll closed read %v, want EOF", err)
	}

	later, laterServer := open()
	defer laterServer.Close()
	set.mu.Lock()
	_, tracked := set.open[later.(*trackedConn)]
	set.mu.Unlock()
	if !tracked {
		t.Error("a connection dialed after closeAll is not tracked")
	}
	set.closeAll()
}

// TestNewWithoutDial: a rest config without Dial (as from a kubeconfig or
// envtest) gets client-go's default dialer under the manager's connection
// tracking, for both its reading and its writing clients.
func TestNewWithoutDial(t *testing.T) {
	var reqs atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	m, err := New(&rest.Config{Host: srv.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.conns.closeAll()
	ctx := t.Context()
	if _, err := m.Kubernetes().CoreV1().ConfigMaps("ns").Get(ctx, "cm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get through the writing clientset = %v, want the server's 404", err)
	}
	// The mapper asks discovery through the cache's clientset.
	if _, err := m.RESTMapper().RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err == nil {
		t.Error("RESTMapping with discovery answering 404 succeeded")
	}
	if n := reqs.Load(); n < 2 {
		t.Errorf("the server saw %d requests, want the Get and discovery's", n)
	}
}
