package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestMetricsEndpoint: /metrics serves the metric names dashboards built for
// controller-runtime and client-go query, with values that follow what the
// controller did; /healthz serves the health checks.
func TestMetricsEndpoint(t *testing.T) {
	const ctrlName = "metrics"
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{HTTPAddr: "127.0.0.1:0"})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	var healthy atomic.Bool
	healthy.Store(true)
	if err := mgr.AddHealthCheck("toggle", func() error {
		if healthy.Load() {
			return nil
		}
		return errors.New("toggled off")
	}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	slowEntered, slowRelease := make(chan struct{}), make(chan struct{})
	var slowOnce sync.Once
	_, err = mgr.AddController(ctrlName, reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		n := rec.add(req, time.Now(), "")
		switch req.Name {
		case "fail-once":
			if n == 0 {
				return reconcile.Result{}, errors.New("first attempt fails")
			}
		case "slow":
			slowOnce.Do(func() {
				close(slowEntered)
				<-slowRelease
			})
		}
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{Workers: 2}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	eventually(t, waitTimeout, func() bool { return mgr.Addr() != nil }, "the HTTP endpoints to listen")
	addr := mgr.Addr().String()
	unblock := sync.OnceFunc(func() { close(slowRelease) })
	t.Cleanup(unblock) // before Run is stopped, should the test fail early

	createConfigMap(t, ns, "ok", nil, nil)
	createConfigMap(t, ns, "fail-once", nil, nil)
	eventually(t, waitTimeout, func() bool { return rec.count(key(ns, "ok")) == 1 && rec.count(key(ns, "fail-once")) == 2 },
		"ok to reconcile, and fail-once to fail and be retried")

	scrape := func() metrics {
		t.Helper()
		code, body, err := get(addr, "/metrics")
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /metrics: %d %v", code, err)
		}
		m, err := parseMetrics(body)
		if err != nil {
			t.Fatalf("parsing /metrics: %v", err)
		}
		return m
	}
	c, q := []string{"controller", ctrlName}, []string{"name", ctrlName}

	// While one Reconcile is stuck, the in-flight gauges show it.
	createConfigMap(t, ns, "slow", nil, nil)
	select {
	case <-slowEntered:
	case <-time.After(waitTimeout):
		t.Fatal("Reconcile of slow did not start")
	}
	eventually(t, waitTimeout, func() bool {
		m := scrape()
		active, _ := m.get("controller_runtime_active_workers", c...)
		unfinished, _ := m.get("workqueue_unfinished_work_seconds", q...)
		longest, _ := m.get("workqueue_longest_running_processor_seconds", q...)
		return active == 1 && unfinished > 0 && longest > 0
	}, "active_workers 1 and unfinished/longest-running work > 0 while a Reconcile is stuck")
	unblock()
	eventually(t, waitTimeout, func() bool {
		active, _ := scrape().get("controller_runtime_active_workers", c...)
		return active == 0
	}, "active_workers back to 0")

	m := scrape()
	for _, want := range []struct {
		name   string
		labels []string
		ok     func(float64) bool
		what   string
	}{
		{"controller_runtime_reconcile_total", append(c, "result", "success"), positive, "> 0"},
		{"controller_runtime_reconcile_total", append(c, "result", "error"), equals(1), "1"},
		{"controller_runtime_reconcile_errors_total", c, equals(1), "1"},
		{"controller_runtime_reconcile_time_seconds_count", c, atLeast(4), ">= 4"},
		{"controller_runtime_max_concurrent_reconciles", c, equals(2), "2 (Workers)"},
		{"controller_runtime_active_workers", c, equals(0), "0"},
		{"workqueue_adds_total", q, atLeast(4), ">= 4"},
		{"workqueue_depth", q, equals(0), "0"},
		{"workqueue_queue_duration_seconds_count", q, atLeast(4), ">= 4"},
		{"workqueue_work_duration_seconds_count", q, atLeast(4), ">= 4"},
		{"workqueue_unfinished_work_seconds", q, atLeast(0), "present"},
		{"workqueue_longest_running_processor_seconds", q, atLeast(0), "present"},
		{"workqueue_retries_total", q, equals(1), "1"},
		{"ctrlkit_event_to_reconcile_seconds_count", c, atLeast(3), ">= 3"},
	} {
		v, found := m.get(want.name, want.labels...)
		if !found || !want.ok(v) {
			t.Errorf("%s%v = %v (present %v), want %s", want.name, want.labels, v, found, want.what)
		}
	}

	if code, body, err := get(addr, "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz with passing checks: %d %q %v, want 200", code, body, err)
	}
	healthy.Store(false)
	if code, body, err := get(addr, "/healthz"); err != nil || code != http.StatusInternalServerError || !strings.Contains(body, "toggle") {
		t.Errorf("GET /healthz with check toggle failing: %d %q %v, want 500 naming toggle", code, body, err)
	}
	if code, _, err := get(addr, "/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /readyz while running: %d %v, want 200", code, err)
	}

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if _, _, err := get(addr, "/readyz"); err == nil {
		t.Errorf("the HTTP endpoints still answer after Run returned")
	}
}

func positive(v float64) bool                { return v > 0 }
func equals(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func atLeast(min float64) func(float64) bool { return func(v float64) bool { return v >= min } }

// TestReadyzFlipsAfterSync: /readyz answers 503 while the cache has not
// synced (held back deterministically by a gate on the ConfigMap list)
// while /healthz is already 200; once the list goes through it turns 200,
// and no Reconcile runs before the manager is ready.
func TestReadyzFlipsAfterSync(t *testing.T) {
	ns := newNamespace(t)
	createConfigMap(t, ns, "pre", nil, nil)
	g := newGate("/api/v1/namespaces/" + ns + "/configmaps")
	mgr := newManager(t, g.config(cfg), ns, manager.Options{HTTPAddr: "127.0.0.1:0"})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	var readyAtFirst atomic.Value // mgr.Ready() in the first Reconcile
	var once sync.Once
	_, err = mgr.AddController("readyz", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		once.Do(func() { readyAtFirst.Store(mgr.Ready()) })
		rec.add(req, time.Now(), "")
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	release := sync.OnceFunc(func() { close(g.open) })
	t.Cleanup(release) // before Run is stopped, should the test fail early
	eventually(t, waitTimeout, func() bool { return mgr.Addr() != nil }, "the HTTP endpoints to listen")
	addr := mgr.Addr().String()
	select {
	case <-g.hit:
	case <-time.After(waitTimeout):
		t.Fatal("the ConfigMap informer never listed")
	}

	// The informer's list is held: the cache cannot have synced.
	if code, body, err := get(addr, "/readyz"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz before sync: %d %q %v, want 503", code, body, err)
	}
	if code, body, err := get(addr, "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz before sync: %d %q %v, want 200: liveness does not wait for caches", code, body, err)
	}
	if n := len(rec.all()); n != 0 {
		t.Errorf("%d Reconcile calls before the cache synced, want 0", n)
	}
	// The controller's series exist from the start, at zero, so that rate()
	// and absent() queries work before the first event.
	code, body, err := get(addr, "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	m, err := parseMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	c, q := []string{"controller", "readyz"}, []string{"name", "readyz"}
	for _, s := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"controller_runtime_reconcile_total", append(c, "result", "success"), 0},
		{"controller_runtime_reconcile_total", append(c, "result", "error"), 0},
		{"controller_runtime_reconcile_total", append(c, "result", "requeue_after"), 0},
		{"controller_runtime_reconcile_errors_total", c, 0},
		{"controller_runtime_terminal_reconcile_errors_total", c, 0},
		{"controller_runtime_reconcile_panics_total", c, 0},
		{"controller_runtime_max_concurrent_reconciles", c, 1},
		{"controller_runtime_active_workers", c, 0},
		{"workqueue_adds_total", q, 0},
		{"workqueue_depth", q, 0},
		{"workqueue_retries_total", q, 0},
	} {
		if v, ok := m.get(s.name, s.labels...); !ok || v != s.want {
			t.Errorf("before the first event, %s%v = %v (present %v), want %v", s.name, s.labels, v, ok, s.want)
		}
	}

	release()
	eventually(t, waitTimeout, func() bool {
		code, _, err := get(addr, "/readyz")
		return err == nil && code == http.StatusOK
	}, "/readyz to answer 200 after sync")
	eventually(t, waitTimeout, func() bool { return rec.count(key(ns, "pre")) == 1 }, "Reconcile of the object that existed before start")
	if ready, _ := readyAtFirst.Load().(bool); !ready {
		t.Errorf("the first Reconcile ran while the manager was not ready")
	}

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
}
