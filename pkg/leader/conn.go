package leader

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// FenceDial wraps dial, a rest.Config Dial (nil means client-go's own
// default: TCP with a 30s timeout and a 30s keep-alive), so that a
// connection stops at the wire what FenceTransport stops before it. Each
// write FenceTransport lets through is tied to the connection it goes out
// on. Once its term of leadership is over, that connection sends nothing
// more: its next write fails with an error wrapping ErrNotLeader, and it
// is closed. A process paused (SIGSTOP) after FenceTransport's check but
// before the request reached the socket therefore does not send it when it
// wakes, even if its goroutine runs before the elector's. Other requests
// that share the connection fail with it (client-go retries its reads; a
// lost term usually ends the process anyway); the next request dials a
// new one.
//
// Every client a manager builds but the Lease's (Manager.Client,
// Kubernetes, Dynamic, the cache's and the sharder's), and a client.New
// without Options.HTTPClient, dial through it. The check
// sits just before each write to the socket; only a pause between that
// check and the system call that follows it can still let a write out.
func FenceDial(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		fc := &fencedConn{Conn: c, key: connKey(c)}
		if fc.key != "" {
			dialed.Store(fc.key, fc)
		}
		return fc, nil
	}
}

// dialed finds a fencedConn by its addresses when the connection the HTTP
// transport reports wraps it in a type that does not expose it (client-go
// does when it reloads client certificates from files).
var dialed sync.Map // connKey → *fencedConn

// connKey names a TCP connection by its two ends, or "" for connections
// whose addresses may not be unique (Unix sockets, pipes).
func connKey(c net.Conn) string {
	l, r := c.LocalAddr(), c.RemoteAddr()
	if l == nil || r == nil || l.Network() != "tcp" {
		return ""
	}
	return l.String() + ">" + r.String()
}

// fencedConn is a connection FenceDial made: it refuses to write once a
// term whose write it carried is over.
type fencedConn struct {
	net.Conn
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
			_ = c.Conn.Close()
			return c.err
		}
	}
	return nil
}

func (c *fencedConn) Close() error {
	if c.key != "" {
		dialed.CompareAndDelete(c.key, c)
	}
	return c.Conn.Close()
}

// carryOn ties a write of t to the connection conn, as the HTTP transport
// reports it (httptrace.GotConnInfo), if FenceDial made it.
func carryOn(conn net.Conn, t *term) {
	for c := conn; c != nil; {
		if fc, ok := c.(*fencedConn); ok {
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
		if fc, ok := dialed.Load(key); ok {
			fc.(*fencedConn).carry(t)
		}
	}
}
