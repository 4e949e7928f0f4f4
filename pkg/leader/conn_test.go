package leader_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// opaqueConn hides the connection it wraps, as client-go's does when it
// reloads client certificates from files.
type opaqueConn struct{ net.Conn }

// TestFenceConfigStopsAWriteFrozenAfterTheCheck: a write passes the
// fenced transport's check, then its process is paused (SIGSTOP) before the
// request reaches the socket; meanwhile the term ends. On waking, the
// request's goroutine runs before anything has cancelled its ctx (here:
// a ctx that keeps the term but never is). The connection it goes out on
// was dialed by the fenced config: it sends nothing, and the server never sees
// the write. A read with no term then gets through on a new connection.
func TestFenceConfigStopsAWriteFrozenAfterTheCheck(t *testing.T) {
	for _, c := range []struct {
		name   string
		http2  bool
		opaque bool
		traced bool // the request's ctx has a trace of its own
	}{
		{name: "HTTP/2", http2: true},
		{name: "HTTP/1.1"},
		{name: "HTTP/2, connection wrapped", http2: true, opaque: true},
		{name: "HTTP/2, ctx with a trace, wrapped twice", http2: true, traced: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var writes atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet {
					writes.Add(1)
				}
			}))
			srv.EnableHTTP2 = c.http2
			srv.StartTLS()
			defer srv.Close()

			froze, thaw := make(chan struct{}), make(chan struct{})
			var puts atomic.Int32
			cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
				CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
					if req.Method == http.MethodPut && puts.Add(1) == 2 {
						close(froze) // past the check: the pause begins here
						<-thaw
					}
					return rt.RoundTrip(req)
				})
			})
			cfg = leader.FenceConfig(cfg)
			if c.traced {
				cfg = leader.FenceConfig(cfg)
			}
			if c.opaque {
				dial := cfg.Dial
				cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
					conn, err := dial(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return opaqueConn{conn}, nil
				}
			}
			client, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer client.CloseIdleConnections()
			var gotConns atomic.Int32
			send := func(ctx context.Context, method string) (proto int, err error) {
				req, err := http.NewRequestWithContext(ctx, method, srv.URL+"/api/v1/namespaces/ns/configmaps/cm", nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := client.Do(req)
				if err != nil {
					return 0, err
				}
				resp.Body.Close()
				return resp.ProtoMajor, nil
			}

			var l logs
			e := newElector(t, newAPI(), options(&l))
			camp := start(t, e)
			ctx := context.WithoutCancel(<-camp.leading)
			camp.ret <- nil
			if c.traced {
				ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { gotConns.Add(1) }})
			}

			proto, err := send(ctx, http.MethodPut)
			if err != nil || writes.Load() != 1 {
				t.Fatalf("a write while leading: err = %v, the server saw %d writes; want it sent", err, writes.Load())
			}
			if want := map[bool]int{true: 2, false: 1}[c.http2]; proto != want {
				t.Fatalf("the write went out over HTTP/%d, want HTTP/%d", proto, want)
			}

			frozen := make(chan error, 1)
			go func() { _, err := send(ctx, http.MethodPut); frozen <- err }()
			<-froze
			leader.AgeRenewal(e, fenceBound+leaseDuration) // the pause, longer than the lease
			if err := leader.CheckLeading(ctx); !errors.Is(err, leader.ErrNotLeader) {
				t.Fatalf("CheckLeading after the pause = %v, want ErrNotLeader", err)
			}
			close(thaw)
			select {
			case err = <-frozen:
			case <-time.After(time.Minute):
				t.Fatal("the frozen write never returned")
			}
			if err == nil {
				t.Error("the write frozen after its check succeeded once the term was over, want it refused")
			}
			if n := writes.Load(); n != 1 {
				t.Errorf("the server saw %d writes, want 1: the one frozen after its check went out after the term ended", n)
			}
			if c.traced && gotConns.Load() < 2 {
				t.Errorf("the ctx's own trace saw %d connections for 2 writes, want it kept beside the fence's", gotConns.Load())
			}

			if _, err := send(context.Background(), http.MethodGet); err != nil {
				t.Errorf("a read with no term after the connection was closed: %v, want it sent on a new connection", err)
			}
			if err := <-camp.done; !errors.Is(err, leader.ErrLeaseLost) {
				t.Errorf("Run = %v, want ErrLeaseLost", err)
			}
		})
	}
}
