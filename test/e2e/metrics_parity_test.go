package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// parityPrefixes are the families a controller-runtime dashboard queries.
var parityPrefixes = []string{"workqueue_", "controller_runtime_", "rest_client_", "leader_election_"}

// parityAllowed are the families controller-runtime registers by default
// that ctrlkit does not serve, each with the reason. Keep it short.
var parityAllowed = map[string]string{
	"controller_runtime_webhook_panics_total":            "ctrlkit has no webhook server yet (issue 16)",
	"controller_runtime_conversion_webhook_panics_total": "ctrlkit has no webhook server yet (issue 16)",
}

// TestMetricsParity runs the same small workload (a controller over the
// ConfigMaps of one namespace, with leader election and a reconcile
// timeout) through controller-runtime and through ctrlkit, and checks that
// every workqueue_*, controller_runtime_*, rest_client_* and
// leader_election_* family controller-runtime registers by default exists
// in ctrlkit's registry with the same type, label names and histogram
// buckets, so a dashboard built for controller-runtime works unchanged.
func TestMetricsParity(t *testing.T) {
	ns := newNamespace(t)
	const objects = 5
	for i := range objects {
		createConfigMap(t, ns, fmt.Sprintf("cm-%d", i), map[string]string{"k": "v"}, nil)
	}
	want := controllerRuntimeFamilies(t, ns, objects)
	got := ctrlkitFamilies(t, ns, objects)

	var names []string
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		w := want[name]
		g, ok := got[name]
		if !ok {
			if why, allowed := parityAllowed[name]; allowed {
				t.Logf("%s: not served by ctrlkit (allowed: %s)", name, why)
				continue
			}
			t.Errorf("%s: controller-runtime serves it, ctrlkit does not", name)
			continue
		}
		if w.GetType() != g.GetType() {
			t.Errorf("%s: type %v, controller-runtime's %v", name, g.GetType(), w.GetType())
		}
		if wl, gl := labelNames(w), labelNames(g); !slices.Equal(wl, gl) {
			t.Errorf("%s: labels %v, controller-runtime's %v", name, gl, wl)
		}
		if wb, gb := bucketBounds(w), bucketBounds(g); !slices.Equal(wb, gb) {
			t.Errorf("%s: buckets %v, controller-runtime's %v", name, gb, wb)
		}
	}
	t.Logf("compared %d families", len(names))
}

// controllerRuntimeFamilies runs controller-runtime's manager with one
// controller until it has reconciled every object and returns the families
// of its default registry.
func controllerRuntimeFamilies(t *testing.T, ns string, objects int) map[string]*dto.MetricFamily {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                 server.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "parity-cr",
		LeaderElectionNamespace: ns,
		Logger:                  testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, objects*4)
	err = ctrl.NewControllerManagedBy(mgr).Named("parity").For(&corev1.ConfigMap{}).
		Complete(crreconcile.Func(func(context.Context, crreconcile.Request) (crreconcile.Result, error) {
			select {
			case done <- struct{}{}:
			default:
			}
			return crreconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("controller-runtime manager: %v", err)
		}
	}()
	waitN(t, done, objects, "controller-runtime's reconciles")
	return gather(t, crmetrics.Registry)
}

// ctrlkitFamilies does the same through a ctrlkit manager.
func ctrlkitFamilies(t *testing.T, ns string, objects int) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	mgr := newManager(t, cfg, ns, manager.Options{
		Registry:       reg,
		LeaderElection: &leader.Options{Name: "parity-ctrlkit", Namespace: ns},
	})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, objects*4)
	_, err = mgr.AddController("parity", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		select {
		case done <- struct{}{}:
		default:
		}
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{Timeout: time.Minute}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	waitN(t, done, objects, "ctrlkit's reconciles")
	fams := gather(t, reg)
	if err := r.stop(t); err != nil {
		t.Errorf("ctrlkit manager: %v", err)
	}
	return fams
}

func waitN(t *testing.T, done <-chan struct{}, n int, what string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for range n {
		select {
		case <-done:
		case <-deadline:
			t.Fatalf("%s did not happen within a minute", what)
		}
	}
}

// gather returns g's families with the parity prefixes, by name.
func gather(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*dto.MetricFamily)
	for _, f := range fams {
		if slices.ContainsFunc(parityPrefixes, func(p string) bool { return strings.HasPrefix(f.GetName(), p) }) {
			out[f.GetName()] = f
		}
	}
	return out
}

// labelNames is the sorted union of the label names of f's series.
func labelNames(f *dto.MetricFamily) []string {
	var names []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if !slices.Contains(names, l.GetName()) {
				names = append(names, l.GetName())
			}
		}
	}
	slices.Sort(names)
	return names
}

// bucketBounds are the upper bounds of the first series' buckets, if f is a
// histogram.
func bucketBounds(f *dto.MetricFamily) []float64 {
	for _, m := range f.GetMetric() {
		if h := m.GetHistogram(); h != nil {
			var b []float64
			for _, bk := range h.GetBucket() {
				b = append(b, bk.GetUpperBound())
			}
			return b
		}
	}
	return nil
}
