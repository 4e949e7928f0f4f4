package manager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AddHealthCheck adds a check to /healthz: the endpoint fails while check
// returns an error. Names are unique.
func (m *Manager) AddHealthCheck(name string, check func() error) error {
	if name == "" || check == nil {
		return errors.New("manager: AddHealthCheck needs a name and a check")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.checks[name]; ok {
		return fmt.Errorf("manager: health check %q already exists", name)
	}
	m.checks[name] = check
	return nil
}

// Handler serves /metrics (the manager's registry), /healthz (200 while
// every health check passes; with leader election that includes
// leader.Elector.Check, which passes on standbys) and /readyz (200 once the
// caches have synced, until shutdown begins).
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		m.mu.Lock()
		names := slices.Sorted(maps.Keys(m.checks))
		checks := maps.Clone(m.checks)
		m.mu.Unlock()
		var failed []string
		for _, n := range names {
			if err := checks[n](); err != nil {
				failed = append(failed, n+": "+err.Error())
			}
		}
		if len(failed) > 0 {
			http.Error(w, "unhealthy: "+strings.Join(failed, "; "), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.Ready() {
			http.Error(w, "not ready: caches have not synced, or the manager is stopping", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Addr is the address the HTTP endpoints listen on, or nil before Run has
// opened the listener (or when Options.HTTPAddr is empty).
func (m *Manager) Addr() net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// serveHTTP listens on addr and serves Handler until the returned stop is
// called; stop waits for the server to close: for requests in flight to
// finish (up to 5s), or, if abort, not at all.
func (m *Manager) serveHTTP(addr string) (stop func(abort bool), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("manager: listening on Options.HTTPAddr %q: %w", addr, err)
	}
	m.mu.Lock()
	m.addr = ln.Addr()
	m.mu.Unlock()
	m.log.Info("Serving metrics and health endpoints", "addr", ln.Addr().String())
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error(err, "HTTP server failed")
		}
	}()
	return func(abort bool) {
		if abort {
			_ = srv.Close()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		}
		<-done
	}, nil
}
