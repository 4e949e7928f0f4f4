package e2e

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// wantErr fails t unless err is non-nil and its message contains every one
// of parts.
func wantErr(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", parts)
	}
	t.Logf("error: %v", err) // go test -v lists every bad input's message
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

var nop = reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })

// TestInvalidOptions: manager.New rejects bad options with an error naming
// the field, before contacting the cluster.
func TestInvalidOptions(t *testing.T) {
	shared := prometheus.NewRegistry()
	if _, err := manager.New(cfg, manager.Options{Registry: shared}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		opts  manager.Options
		parts []string
	}{
		{"negative CacheSyncTimeout", manager.Options{CacheSyncTimeout: -time.Second}, []string{"CacheSyncTimeout"}},
		{"negative SyncProgressInterval", manager.Options{SyncProgressInterval: -time.Second}, []string{"SyncProgressInterval"}},
		{"negative ShutdownTimeout", manager.Options{ShutdownTimeout: -time.Second}, []string{"ShutdownTimeout"}},
		{"negative Resync", manager.Options{Informers: informer.Options{Resync: -time.Second}}, []string{"Resync"}},
		{"HTTPAddr without port", manager.Options{HTTPAddr: "localhost"}, []string{"HTTPAddr", "localhost"}},
		{"Registry that cannot gather", manager.Options{Registry: registererOnly{prometheus.NewRegistry()}}, []string{"Registry", "Gatherer"}},
		{"Registry shared with another manager", manager.Options{Registry: shared}, []string{"registry"}},
		{"several at once", manager.Options{CacheSyncTimeout: -1, ShutdownTimeout: -1}, []string{"CacheSyncTimeout", "ShutdownTimeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr, err := manager.New(cfg, tc.opts)
			wantErr(t, err, tc.parts...)
			if mgr != nil {
				t.Errorf("manager.New returned a Manager with the error")
			}
		})
	}
	t.Run("nil config", func(t *testing.T) {
		_, err := manager.New(nil, manager.Options{})
		wantErr(t, err, "config")
	})
}

// registererOnly hides the Gatherer side of a registry.
type registererOnly struct{ prometheus.Registerer }

// TestInvalidControllers: AddController and Run reject misuse with clear
// errors instead of failing later.
func TestInvalidControllers(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	other := newManager(t, cfg, ns, manager.Options{})
	foreign, err := informer.For[*corev1.Secret](other.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.AddController("taken", nop, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		ctrl    string
		r       reconcile.Reconciler
		opts    manager.ControllerOptions
		watches []manager.Watch
		parts   []string
	}{
		{"nil reconciler", "nil", nil, manager.ControllerOptions{}, nil, []string{"Reconciler is nil"}},
		{"empty name", "", nop, manager.ControllerOptions{}, nil, []string{"name"}},
		{"duplicate name", "taken", nop, manager.ControllerOptions{}, nil, []string{"taken", "already exists"}},
		{"negative workers", "workers", nop, manager.ControllerOptions{Workers: -1}, nil, []string{"Workers"}},
		{"negative timeout", "timeout", nop, manager.ControllerOptions{Timeout: -time.Second}, nil, []string{"Timeout"}},
		{"watch without source", "nosource", nop, manager.ControllerOptions{}, []manager.Watch{{}}, []string{"no Source"}},
		{"source of another manager", "foreign", nop, manager.ControllerOptions{}, []manager.Watch{{Source: foreign}}, []string{"secrets", "not declared"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := mgr.AddController(tc.ctrl, tc.r, tc.opts, tc.watches...)
			wantErr(t, err, tc.parts...)
			if c != nil {
				t.Errorf("AddController returned a controller with the error")
			}
		})
	}

	r := start(t, mgr)
	eventually(t, waitTimeout, mgr.Ready, "the manager to be ready")
	wantErr(t, mgr.Run(t.Context()), "twice")
	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
}

// TestUnknownResources: declaring an informer for something the API server
// does not serve fails at once with an error naming it.
func TestUnknownResources(t *testing.T) {
	ns := newNamespace(t)
	t.Run("Go type without a CRD", func(t *testing.T) {
		mgr := newManager(t, cfg, ns, manager.Options{Scheme: newScheme(t)})
		_, err := informer.For[*Gadget](mgr.Cache())
		wantErr(t, err, "Gadget", "does not serve", "CRD")
	})
	t.Run("Go type not in the scheme", func(t *testing.T) {
		mgr := newManager(t, cfg, ns, manager.Options{})
		_, err := informer.For[*Widget](mgr.Cache())
		wantErr(t, err, "Widget", "scheme")
	})
	t.Run("unknown GroupVersionResource", func(t *testing.T) {
		mgr := newManager(t, cfg, ns, manager.Options{})
		_, err := informer.ForResource(mgr.Cache(), schema.GroupVersionResource{Group: "e2e.ctrlkit.io", Version: "v1", Resource: "gizmos"})
		wantErr(t, err, "gizmos.v1.e2e.ctrlkit.io", "does not serve")
	})
	t.Run("known GroupVersionResource", func(t *testing.T) {
		mgr := newManager(t, cfg, ns, manager.Options{})
		if _, err := informer.ForResource(mgr.Cache(), widgetGVR); err != nil {
			t.Errorf("ForResource(%v): %v", widgetGVR, err)
		}
	})
}

// TestCacheSyncTimeout: a manager whose user may not list ConfigMaps never
// syncs; Run fails after CacheSyncTimeout with an error naming the
// informer, /readyz answers 503 for as long as it runs, and nothing is left
// running.
func TestCacheSyncTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	ns := newNamespace(t)
	nobody, err := env.AddUser(envtest.User{Name: "nobody"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Open nobody's connection to the API server (client-go shares it
	// process-wide per TLS identity, for the life of the process) before
	// taking the goroutine baseline.
	if err := discover(nobody.Config()); err != nil {
		t.Fatalf("discovery as nobody: %v", err)
	}
	baseline := goleak.IgnoreCurrent()
	mgr := newManager(t, nobody.Config(), ns, manager.Options{
		HTTPAddr:         "127.0.0.1:0",
		CacheSyncTimeout: timeout,
	})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatalf("declaring ConfigMaps as nobody (discovery is open to every user): %v", err)
	}
	rec := &recorder{}
	_, err = mgr.AddController("forbidden", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		rec.add(req, time.Now(), "")
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	r := start(t, mgr)

	// Poll /readyz until Run gives up: every answer must be 503.
	var answers []int
	eventually(t, timeout+waitTimeout, func() bool {
		if addr := mgr.Addr(); addr != nil && !r.returned() {
			code, _, err := get(addr.String(), "/readyz")
			if err == nil {
				answers = append(answers, code)
			}
		}
		return r.returned()
	}, "Run to fail after CacheSyncTimeout %v", timeout)
	err = r.wait(t, stopTimeout)
	elapsed := time.Since(started)
	t.Logf("Run returned after %v: %v", elapsed, err)

	wantErr(t, err, "configmaps.v1", "did not sync", "CacheSyncTimeout")
	if elapsed < timeout {
		t.Errorf("Run failed after %v, before CacheSyncTimeout %v", elapsed, timeout)
	}
	if len(answers) == 0 {
		t.Errorf("/readyz never answered while Run was waiting for the cache")
	}
	if i := slices.IndexFunc(answers, func(code int) bool { return code != http.StatusServiceUnavailable }); i >= 0 {
		t.Errorf("/readyz answer %d of %d was %d, want 503 for as long as the cache cannot sync", i+1, len(answers), answers[i])
	}
	if n := len(rec.all()); n != 0 {
		t.Errorf("%d Reconcile calls without a synced cache, want 0", n)
	}
	goleak.VerifyNone(t, baseline)
}

// discover makes one request with c: a discovery call every user may make.
func discover(c *rest.Config) error {
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return err
	}
	_, err = cs.Discovery().ServerVersion()
	return err
}

// TestHTTPAddrInUse: Run fails at once when it cannot listen, and leaves
// nothing running.
func TestHTTPAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ns := newNamespace(t)
	baseline := goleak.IgnoreCurrent()
	mgr := newManager(t, cfg, ns, manager.Options{HTTPAddr: ln.Addr().String()})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.AddController("addr", nop, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)
	wantErr(t, r.wait(t, waitTimeout), "HTTPAddr", ln.Addr().String())
	goleak.VerifyNone(t, baseline)
}
