package leader

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// FenceConfig returns a copy of cfg (which is not modified) whose clients
// fence their writes. Every request but a read (GET, HEAD, OPTIONS) whose
// context belongs to a term of leadership that is over (CheckLeading) is
// refused with an error wrapping ErrNotLeader, and not sent. The check
// runs in the transport, after client-go's client-side rate limiter, so a
// write that waited there, or in a process paused by SIGSTOP, while the
// term ended is refused. A write the check lets through is tied to the
// connection it goes out on; once its term is over, that connection sends
// nothing more (its next write fails with an error wrapping ErrNotLeader,
// and it is closed), so a process paused between the check and the socket
// does not send the write when it wakes either. A read it cut short is
// sent again once, on a new connection; other requests in flight on it
// fail, watches among them: keep the informers' watches on a client of
// their own, as the manager does.
// Requests whose context belongs to no term pass unchanged.
//
// It sets cfg's Dial (wrapping the one cfg has, or client-go's default:
// TCP with a 30s timeout and a 30s keep-alive) and adds a WrapTransport.
// The state it keeps is the returned config's own: build each client from
// one call's config.
func FenceConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	f := &fencer{dialed: make(map[string]*fencedConn)}
	dial := c.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	c.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return f.track(conn), nil
	}
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return fenceTransport{f, rt} })
	return c
}

// fencer is the state of one FenceConfig: the connections it dialed, by
// their addresses, to find one that the HTTP transport reports wrapped in
// a type that hides it (client-go does when it reloads client
// certificates from files).
type fencer struct {
	mu     sync.Mutex
	dialed map[string]*fencedConn // connKey → connection
}

func (f *fencer) track(conn net.Conn) *fencedConn {
	fc := &fencedConn{Conn: conn, f: f, key: connKey(conn)}
	if fc.key != "" {
		f.mu.Lock()
		f.dialed[fc.key] = fc
		f.mu.Unlock()
	}
	return fc
}

// carry ties a write of t to conn, as the HTTP transport reports it
// (httptrace.GotConnInfo), if f dialed it.
func (f *fencer) carry(conn net.Conn, t *term) {
	for c := conn; c != nil; {
		if fc, ok := c.(*fencedConn); ok && fc.f == f {
			fc.carry(t)
			return
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	if key := connKey(conn); key != "" {
		f.mu.Lock()
		fc := f.dialed[key]
		f.mu.Unlock()
		if fc != nil {
			fc.carry(t)
		}
	}
}

// connKey names a TCP connection by its two ends, or "" for connections
// whose addresses may not be unique (Unix sockets, pipes).
func connKey(c net.Conn) string {
	l, r := c.LocalAddr(), c.RemoteAddr()
	if l == nil || r == nil || l.Network() != "tcp" {
		return ""
	}
	return l.String() + ">" + r.String()
}

type fenceTransport struct {
	f    *fencer
	next http.RoundTripper
}

func (ft fenceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		resp, err := ft.next.RoundTrip(req)
		if errors.Is(err, ErrNotLeader) && req.Context().Err() == nil {
			// The connection closed under the read, refusing to send for a
			// term that is over: the retry dials a new one.
			return ft.next.RoundTrip(req)
		}
		return resp, err
	}
	ctx := req.Context()
	t, ok := ctx.Value(termKey{}).(*term)
	if !ok {
		return ft.next.RoundTrip(req)
	}
	if err := t.check(time.Now()); err != nil {
		return nil, fmt.Errorf("%s %s not sent: %w", req.Method, req.URL.Path, err)
	}
	// WithClientTrace composes with a trace ctx already has.
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { ft.f.carry(info.Conn, t) }}
	return ft.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
}

// fencedConn is a connection a FenceConfig dialed: it refuses to write
// once a term whose write it carried is over.
type fencedConn struct {
	net.Conn
	f   *fencer
	key string

	mu    sync.Mutex
	terms []*term // terms whose writes went out on it
	err   error   // set when it refused: every later write fails with it
}

// carry ties a write of t to c.
func (c *fencedConn) carry(t *term) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.terms, t) {
		c.terms = append(c.terms, t)
	}
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if err := c.admit(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// admit fails, and closes c, once a term c carried a write of is over.
func (c *fencedConn) admit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || len(c.terms) == 0 {
		return c.err
	}
	now := time.Now()
	for _, t := range c.terms {
		if err := t.check(now); err != nil {
			c.err = fmt.Errorf("leader: connection to %v closed before a write: it carried writes of a term of leadership that is over: %w", c.RemoteAddr(), err)
			_ = c.Close()
			return c.err
		}
	}
	return nil
}

// NetConn is the connection c wraps, as for tls.Conn.
func (c *fencedConn) NetConn() net.Conn { return c.Conn }

func (c *fencedConn) Close() error {
	if c.key != "" {
		c.f.mu.Lock()
		if c.f.dialed[c.key] == c {
			delete(c.f.dialed, c.key)
		}
		c.f.mu.Unlock()
	}
	return c.Conn.Close()
}
