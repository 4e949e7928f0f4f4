package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

func TestMetrics(t *testing.T) {
	success := func(int) (reconcile.Result, error) { return reconcile.Result{}, nil }
	tests := []struct {
		name string
		// call is the outcome of the n-th Reconcile (from 1); it may panic.
		call func(n int) (reconcile.Result, error)
		// viaQueue adds the key with Queue().Add instead of Enqueue: no event.
		viaQueue  bool
		wantCalls int

		wantSuccess, wantError, wantRequeueAfter float64
		wantErrors, wantTerminal, wantPanics     float64
		wantEventSamples                         uint64
	}{
		{
			name: "success", call: success, wantCalls: 1,
			wantSuccess: 1, wantEventSamples: 1,
		},
		{
			name: "error then success",
			call: func(n int) (reconcile.Result, error) {
				if n == 1 {
					return reconcile.Result{}, errBoom
				}
				return reconcile.Result{}, nil
			},
			wantCalls:   2,
			wantSuccess: 1, wantError: 1, wantErrors: 1,
			wantEventSamples: 1, // the retry was not event driven
		},
		{
			name: "requeue after then success",
			call: func(n int) (reconcile.Result, error) {
				if n == 1 {
					return reconcile.Result{RequeueAfter: time.Millisecond}, nil
				}
				return reconcile.Result{}, nil
			},
			wantCalls:   2,
			wantSuccess: 1, wantRequeueAfter: 1,
			wantEventSamples: 1,
		},
		{
			name:      "terminal error",
			call:      func(int) (reconcile.Result, error) { return reconcile.Result{}, reconcile.TerminalError(errBoom) },
			wantCalls: 1,
			wantError: 1, wantErrors: 1, wantTerminal: 1,
			wantEventSamples: 1,
		},
		{
			name: "panic then success",
			call: func(n int) (reconcile.Result, error) {
				if n == 1 {
					panic("kaboom")
				}
				return reconcile.Result{}, nil
			},
			wantCalls:   2,
			wantSuccess: 1, wantError: 1, wantErrors: 1, wantPanics: 1,
			wantEventSamples: 1,
		},
		{
			name: "added to the queue without an event", call: success, viaQueue: true, wantCalls: 1,
			wantSuccess: 1, wantEventSamples: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const name, workers = "metered", 3
			reg, opts := newMetrics(t)
			opts.Workers = workers
			opts.RateLimiter = fastLimiter()
			var n calls
			c, err := reconcile.New(name, reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
				return tt.call(n.inc(r))
			}), opts)
			if err != nil {
				t.Fatal(err)
			}
			s := start(t, c)
			key := req("ns", "obj")
			if tt.viaQueue {
				c.Queue().Add(key)
			} else {
				c.Enqueue(key)
			}
			eventually(t, waitTimeout, func() bool { return n.get(key) == tt.wantCalls }, fmt.Sprintf("%d reconciles", tt.wantCalls))
			if err := s.stop(t); err != nil { // waits for the last reconcile to be counted
				t.Fatalf("Start: %v", err)
			}
			if got := n.get(key); got != tt.wantCalls {
				t.Errorf("reconciled %d times, want %d", got, tt.wantCalls)
			}

			want := fmt.Sprintf(`# HELP controller_runtime_active_workers Number of currently used workers per controller
# TYPE controller_runtime_active_workers gauge
controller_runtime_active_workers{controller=%[1]q} 0
# HELP controller_runtime_max_concurrent_reconciles Maximum number of concurrent reconciles per controller
# TYPE controller_runtime_max_concurrent_reconciles gauge
controller_runtime_max_concurrent_reconciles{controller=%[1]q} %[8]v
# HELP controller_runtime_reconcile_errors_total Total number of reconciliation errors per controller
# TYPE controller_runtime_reconcile_errors_total counter
controller_runtime_reconcile_errors_total{controller=%[1]q} %[5]v
# HELP controller_runtime_reconcile_panics_total Total number of reconciliation panics per controller
# TYPE controller_runtime_reconcile_panics_total counter
controller_runtime_reconcile_panics_total{controller=%[1]q} %[7]v
# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller=%[1]q,result="error"} %[2]v
controller_runtime_reconcile_total{controller=%[1]q,result="requeue_after"} %[3]v
controller_runtime_reconcile_total{controller=%[1]q,result="success"} %[4]v
# HELP controller_runtime_terminal_reconcile_errors_total Total number of terminal reconciliation errors per controller
# TYPE controller_runtime_terminal_reconcile_errors_total counter
controller_runtime_terminal_reconcile_errors_total{controller=%[1]q} %[6]v
`, name, tt.wantError, tt.wantRequeueAfter, tt.wantSuccess, tt.wantErrors, tt.wantTerminal, tt.wantPanics, workers)
			got := exposition(t, reg,
				"controller_runtime_reconcile_total",
				"controller_runtime_reconcile_errors_total",
				"controller_runtime_terminal_reconcile_errors_total",
				"controller_runtime_reconcile_panics_total",
				"controller_runtime_max_concurrent_reconciles",
				"controller_runtime_active_workers",
			)
			if got != want {
				t.Errorf("metrics after Start returned:\n%s\nwant:\n%s", got, want)
			}

			ctl := map[string]string{"controller": name}
			if got := samples(t, reg, "ctrlkit_event_to_reconcile_seconds", ctl); got != tt.wantEventSamples {
				t.Errorf("ctrlkit_event_to_reconcile_seconds has %d samples, want %d", got, tt.wantEventSamples)
			}
			if got := samples(t, reg, "controller_runtime_reconcile_time_seconds", ctl); got != uint64(tt.wantCalls) {
				t.Errorf("controller_runtime_reconcile_time_seconds has %d samples, want %d", got, tt.wantCalls)
			}
			for _, metric := range []string{
				"workqueue_depth",
				"workqueue_adds_total",
				"workqueue_queue_duration_seconds",
				"workqueue_work_duration_seconds",
				"workqueue_unfinished_work_seconds",
				"workqueue_longest_running_processor_seconds",
				"workqueue_retries_total",
			} {
				if series(t, reg, metric, map[string]string{"name": name}) == nil {
					t.Errorf("no series %s{name=%q}", metric, name)
				}
			}
			if got := value(t, reg, "workqueue_adds_total", map[string]string{"name": name}); got != float64(tt.wantCalls) {
				t.Errorf("workqueue_adds_total{name=%q} = %v, want one add per reconcile (%d)", name, got, tt.wantCalls)
			}
		})
	}
}

// TestMetricsSeriesZeroedAtStart checks that a dashboard sees every series
// of a controller from New on, before anything has happened.
func TestMetricsSeriesZeroedAtStart(t *testing.T) {
	reg, opts := newMetrics(t)
	c, err := reconcile.New("idle", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Queue().ShutDown() // never started
	if n := count(t, reg, "controller_runtime_reconcile_total"); n != 3 {
		t.Errorf("controller_runtime_reconcile_total has %d series, want 3: success, error, requeue_after", n)
	}
	for _, metric := range []string{
		"controller_runtime_reconcile_errors_total",
		"controller_runtime_terminal_reconcile_errors_total",
		"controller_runtime_reconcile_panics_total",
		"controller_runtime_reconcile_timeouts_total",
		"controller_runtime_reconcile_time_seconds",
		"controller_runtime_max_concurrent_reconciles",
		"controller_runtime_active_workers",
		"ctrlkit_event_to_reconcile_seconds",
	} {
		if n := count(t, reg, metric); n != 1 {
			t.Errorf("%s has %d series, want 1", metric, n)
		}
	}
	if got := value(t, reg, "controller_runtime_max_concurrent_reconciles", map[string]string{"controller": "idle"}); got != 1 {
		t.Errorf("controller_runtime_max_concurrent_reconciles with Workers 0 = %v, want the default of 1", got)
	}
}

func TestNewMetricsTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := reconcile.NewMetrics(reg); err != nil {
		t.Fatalf("first NewMetrics: %v", err)
	}
	_, err := reconcile.NewMetrics(reg)
	if err == nil {
		t.Fatal("second NewMetrics on the same registry succeeded, want an error")
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Errorf("error %v does not wrap prometheus.AlreadyRegisteredError", err)
	}
	if !strings.Contains(err.Error(), "own registry") {
		t.Errorf("error %q does not tell the caller to give each manager its own registry", err)
	}
}

// TestMetricsTimeouts checks controller_runtime_reconcile_timeouts_total:
// a Reconcile whose ctx ran out of Options.Timeout counts once; one that
// returned in time, or was cancelled for another reason, does not.
func TestMetricsTimeouts(t *testing.T) {
	const name = "timed"
	reg, opts := newMetrics(t)
	opts.Timeout = 20 * time.Millisecond
	opts.RateLimiter = fastLimiter()
	var n calls
	c, err := reconcile.New(name, reconcile.Func(func(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
		if n.inc(r) == 1 && r.Name == "slow" {
			<-ctx.Done() // runs out of its Timeout
			return reconcile.Result{}, ctx.Err()
		}
		return reconcile.Result{}, nil
	}), opts)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, c)
	slow, fast := req("ns", "slow"), req("ns", "fast")
	c.Enqueue(slow)
	c.Enqueue(fast)
	eventually(t, waitTimeout, func() bool { return n.get(slow) == 2 && n.get(fast) == 1 }, "the slow key retried and the fast one reconciled")
	if err := s.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := value(t, reg, "controller_runtime_reconcile_timeouts_total", map[string]string{"controller": name}); got != 1 {
		t.Errorf("controller_runtime_reconcile_timeouts_total = %v, want 1", got)
	}
}
