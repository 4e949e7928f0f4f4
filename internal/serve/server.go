package serve

import (
	"context"
	"errors"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// NewServer returns a server for h that speaks HTTP/1.1, and HTTP/2 only
// if http2 (HTTP/2 is off by default against rapid reset,
// CVE-2023-44487; without TLS a server speaks no HTTP/2 in any case). Its
// requests' contexts descend from base, without its cancellation: they
// outlive it while the server drains, and end with their connection.
// net/http's error lines go to log: failed TLS handshakes (a client that
// does not trust the certificate, a TCP probe) at V(1), as clients cause
// them and they may be many; the rest (a panic in a handler) as errors.
func NewServer(base context.Context, log logr.Logger, h http.Handler, http2 bool) *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(http2)
	base = logr.NewContext(context.WithoutCancel(base), log)
	return &http.Server{
		Handler:     h,
		Protocols:   protocols,
		ErrorLog:    stdlog.New(errorLog{log}, "", 0),
		BaseContext: func(net.Listener) context.Context { return base },
	}
}

type errorLog struct{ log logr.Logger }

func (e errorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		e.log.V(1).Info("TLS handshake failed", "err", msg)
	} else {
		e.log.Error(errors.New(msg), "HTTP server error")
	}
	return len(p), nil
}

// Serving is a server serving a listener, from Start.
type Serving struct {
	srv  *http.Server
	done chan struct{}
	err  error // set before done is closed
}

// Start serves srv on ln, over TLS with srv.TLSConfig when it is set, until
// Stop, or until serving fails (Done).
func Start(srv *http.Server, ln net.Listener) *Serving {
	s := &Serving{srv: srv, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s
}

// Done is closed once the server stopped serving; Err then says why, if
// it was not Stop.
func (s *Serving) Done() <-chan struct{} { return s.done }

// Err is why serving failed, once Done is closed; nil after Stop.
func (s *Serving) Err() error {
	<-s.done
	return s.err
}

// Stop stops accepting connections and waits up to drain for the requests
// in flight to finish (not at all if drain is 0), then closes the
// connections still open, and returns once the server stopped. It reports
// whether requests were cut off.
func (s *Serving) Stop(drain time.Duration) (cutOff bool) {
	if drain > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), drain)
		defer cancel()
		cutOff = s.srv.Shutdown(ctx) != nil
	}
	if drain <= 0 || cutOff {
		_ = s.srv.Close()
	}
	<-s.done
	return cutOff
}
