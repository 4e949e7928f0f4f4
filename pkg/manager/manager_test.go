package manager_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestTwoManagersInOneProcess checks that managers share no global state:
// each registers its metrics on its own registry, and controller names are
// unique per manager only.
func TestTwoManagersInOneProcess(t *testing.T) {
	tests := []struct {
		name string
		opts func() manager.Options
	}{
		{name: "default registries", opts: func() manager.Options { return manager.Options{} }},
		{name: "own registries", opts: func() manager.Options { return manager.Options{Registry: prometheus.NewRegistry()} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mgrs []*manager.Manager
			for i := range 2 {
				m, err := manager.New(cfg, tt.opts())
				if err != nil {
					t.Fatalf("manager %d: New: %v", i, err)
				}
				if _, err := m.AddController("configmaps", newRecorder(), manager.ControllerOptions{}); err != nil {
					t.Fatalf("manager %d: AddController: %v", i, err)
				}
				mgrs = append(mgrs, m)
			}
			if mgrs[0].Registry() == mgrs[1].Registry() {
				t.Error("both managers use the same registry")
			}
		})
	}
}

func TestManagersSharingARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := manager.New(cfg, manager.Options{Registry: reg}); err != nil {
		t.Fatal(err)
	}
	_, err := manager.New(cfg, manager.Options{Registry: reg})
	if err == nil {
		t.Fatal("second manager on the same registry: New succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "own registry") {
		t.Errorf("error %q does not tell to give each manager its own registry", err)
	}
}

func TestAddControllerErrors(t *testing.T) {
	m := newManager(t, newCluster(t), manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](m.Cache())
	if err != nil {
		t.Fatal(err)
	}
	other := newManager(t, newCluster(t), manager.Options{})
	otherCMs, err := informer.For[*corev1.ConfigMap](other.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddController("taken", newRecorder(), manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		ctrl    string
		r       reconcile.Reconciler
		opts    manager.ControllerOptions
		watches []manager.Watch
		want    string
	}{
		{name: "duplicate name", ctrl: "taken", r: newRecorder(), want: `a controller named "taken" already exists`},
		{name: "empty name", ctrl: "", r: newRecorder(), want: "controller name is empty"},
		{name: "nil reconciler", ctrl: "nil-reconciler", r: nil, want: "Reconciler is nil"},
		{
			name:    "watch without Source",
			ctrl:    "no-source",
			r:       newRecorder(),
			watches: []manager.Watch{{Source: cms}, {}},
			want:    "watch 1 has no Source",
		},
		{
			name:    "Source from another manager's cache",
			ctrl:    "foreign-source",
			r:       newRecorder(),
			watches: []manager.Watch{{Source: otherCMs}},
			want:    "Cache.Use(configmaps.v1 (*v1.ConfigMap)): the informer was not declared on this cache",
		},
		{
			name: "invalid controller options",
			ctrl: "bad-options",
			r:    newRecorder(),
			opts: manager.ControllerOptions{Workers: -1},
			want: "Options.Workers is -1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl, err := m.AddController(tt.ctrl, tt.r, tt.opts, tt.watches...)
			if err == nil || ctrl != nil {
				t.Fatalf("AddController = %v, %v; want an error", ctrl, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if tt.ctrl == "" || tt.ctrl == "taken" {
				return
			}
			// A refused controller leaves its name free.
			if _, err := m.AddController(tt.ctrl, newRecorder(), manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
				t.Errorf("AddController(%q) after the refused one: %v", tt.ctrl, err)
			}
		})
	}
}

func TestAddNil(t *testing.T) {
	m := newManager(t, newCluster(t), manager.Options{})
	if err := m.Add(nil); err == nil || !strings.Contains(err.Error(), "Add(nil)") {
		t.Errorf("Add(nil) = %v, want an error", err)
	}
}

func TestAddHealthCheckErrors(t *testing.T) {
	m := newManager(t, newCluster(t), manager.Options{})
	tests := []struct {
		name  string
		check string
		fn    func() error
		want  string // "" means success
	}{
		{name: "valid", check: "a", fn: func() error { return nil }},
		{name: "duplicate", check: "a", fn: func() error { return nil }, want: `health check "a" already exists`},
		{name: "empty name", check: "", fn: func() error { return nil }, want: "needs a name and a check"},
		{name: "nil check", check: "b", fn: nil, want: "needs a name and a check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.AddHealthCheck(tt.check, tt.fn)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("AddHealthCheck: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("AddHealthCheck error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestAfterRunStarted(t *testing.T) {
	m := newManager(t, newCluster(t), manager.Options{})
	r := run(t, m)
	eventually(t, "the manager to be ready", m.Ready)

	tests := []struct {
		name string
		do   func() error
		want string
	}{
		{
			name: "Add",
			do: func() error {
				return m.Add(runnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }))
			},
			want: "Add after Run started",
		},
		{
			name: "Run",
			do:   func() error { return m.Run(t.Context()) },
			want: "Run called twice",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if err := m.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "Run called twice") {
		t.Errorf("Run after Run returned: %v, want the twice error", err)
	}
	if _, err := m.AddController("late", newRecorder(), manager.ControllerOptions{}); err == nil || !strings.Contains(err.Error(), `AddController("late") after Run returned`) {
		t.Errorf("AddController after Run returned: %v, want an error saying so", err)
	}
}
