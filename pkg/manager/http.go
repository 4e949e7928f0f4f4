package manager

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"

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

// Handler serves what Options.HTTPAddr serves: /healthz (200 while every
// health check passes; with leader election that includes
// leader.Elector.Check, which passes on standbys), /readyz (200 once the
// caches have synced, until shutdown begins) and, without
// Options.SecureMetrics, /metrics (the manager's registry).
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	if m.metrics == nil {
		mux.Handle("/metrics", promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{}))
	}
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
		if err := m.notReady(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
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
// called (see serveOn).
func (m *Manager) serveHTTP(addr string) (stop func(abort bool), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("manager: listening on Options.HTTPAddr %q: %w", addr, err)
	}
	m.mu.Lock()
	m.addr = ln.Addr()
	m.mu.Unlock()
	if m.metrics == nil {
		m.log.Info("Serving metrics and health endpoints", "addr", ln.Addr().String())
	} else {
		m.log.Info("Serving health endpoints", "addr", ln.Addr().String())
	}
	return m.serveOn(m.newServer("http", m.Handler(), false), ln), nil
}
