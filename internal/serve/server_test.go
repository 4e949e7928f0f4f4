package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lines is a logger that keeps what it is given, with its level.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.all = append(l.all, args)
	}, funcr.Options{Verbosity: 1})
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// A request in flight is waited for up to the drain, and cut off after it;
// its context does not end with base's.
func TestStopDrainsThenCutsOff(t *testing.T) {
	base, cancelBase := context.WithCancel(context.Background())
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	srv := NewServer(base, logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
			_, _ = io.WriteString(w, "done")
		case <-r.Context().Done():
		}
	}), false)
	ln := listen(t)
	s := Start(srv, ln)
	url := "http://" + ln.Addr().String() + "/"

	// Drained: the request finishes within the drain.
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-entered
	cancelBase() // requests outlive base
	stopped := make(chan bool, 1)
	go func() { stopped <- s.Stop(time.Minute) }()
	close(release)
	if b := <-got; b != "done" {
		t.Errorf("the request in flight got %q, want it to finish with \"done\"", b)
	}
	if cut := <-stopped; cut {
		t.Error("Stop reported requests cut off, but the one in flight finished")
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Stop = %v, want nil", err)
	}

	// Cut off: a request that does not finish within the drain.
	srv2 := NewServer(context.Background(), logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done()
	}), false)
	ln2 := listen(t)
	s2 := Start(srv2, ln2)
	failed := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln2.Addr().String() + "/")
		if err == nil {
			resp.Body.Close()
		}
		failed <- err
	}()
	<-entered
	if !s2.Stop(10 * time.Millisecond) {
		t.Error("Stop did not report the request it cut off")
	}
	if err := <-failed; err == nil {
		t.Error("the request cut off got a response")
	}
}

// A server that cannot serve is Done, with the reason.
func TestDoneWhenServingFails(t *testing.T) {
	ln := listen(t)
	ln.Close()
	s := Start(NewServer(context.Background(), logr.Discard(), http.NotFoundHandler(), false), ln)
	select {
	case <-s.Done():
	case <-time.After(time.Minute):
		t.Fatal("Done not closed after serving on a closed listener")
	}
	if err := s.Err(); err == nil || errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Err = %v, want why serving failed", err)
	}
	s.Stop(0)
}

// Failed handshakes are logged at V(1), other server errors as errors; the
// server speaks HTTP/2 only when asked.
func TestServerLogsAndProtocols(t *testing.T) {
	var l lines
	srv := NewServer(context.Background(), l.logger(), http.NotFoundHandler(), false)
	srv.ErrorLog.Print("http: TLS handshake error from 10.0.0.1:1234: EOF")
	srv.ErrorLog.Print("http: panic serving 10.0.0.1:1234: boom")
	out := l.text()
	if !strings.Contains(out, `"level"=1 "msg"="TLS handshake failed"`) {
		t.Errorf("handshake failure not logged at V(1):\n%s", out)
	}
	if !strings.Contains(out, `"msg"="HTTP server error" "error"="http: panic serving`) {
		t.Errorf("panic not logged as an error:\n%s", out)
	}
	if srv.Protocols.HTTP2() || !srv.Protocols.HTTP1() {
		t.Errorf("protocols %v, want HTTP/1.1 only", srv.Protocols)
	}
	if h2 := NewServer(context.Background(), logr.Discard(), http.NotFoundHandler(), true); !h2.Protocols.HTTP2() {
		t.Error("http2 = true did not turn HTTP/2 on")
	}
	if _, err := TLSConfig(nil, func(c *tls.Config) { c.MinVersion = tls.VersionTLS11 }); err == nil {
		t.Error("TLSConfig accepted TLS 1.1")
	}
}
