package manager_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// Example is the shape of an operator's main: declare the informers the
// controllers read, add the controllers with their watches, then Run until
// SIGINT or SIGTERM. It needs a cluster, so it is compiled but not run.
func Example() {
	cfg, err := manager.GetConfig()
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := manager.New(cfg, manager.Options{Name: "configmap-auditor", HTTPAddr: ":8080"})
	if err != nil {
		log.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		log.Fatal(err)
	}
	audit := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		cm, err := cms.Lister().Get(req.Namespace, req.Name)
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // deleted meanwhile
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		logr.FromContextOrDiscard(ctx).Info("Audited", "keys", len(cm.Data))
		return reconcile.Result{}, nil
	})
	_, err = mgr.AddController("configmap-auditor", audit, manager.ControllerOptions{Workers: 2},
		manager.Watch{Source: cms, Predicates: []informer.Predicate{informer.ResourceVersionChanged()}})
	if err != nil {
		log.Fatal(err)
	}
	if err := mgr.Run(manager.SignalContext(context.Background())); err != nil {
		log.Fatal(err)
	}
}

// New names every invalid option and how to fix it, before anything runs.
func ExampleNew_invalidOptions() {
	cfg := &rest.Config{Host: "https://cluster.invalid:6443"}
	_, err := manager.New(cfg, manager.Options{
		HTTPAddr:         "8080",
		CacheSyncTimeout: -time.Second,
	})
	fmt.Println(err)
	// Output:
	// manager: Options.CacheSyncTimeout is -1s: use 0 for the default, or a positive duration
	// manager: Options.HTTPAddr is "8080": use host:port such as ":8080" or "127.0.0.1:0", or empty to disable
}

// Handler serves the health endpoints; here without a listener. /readyz
// stays 503 until Run has synced the caches, and /healthz fails while a
// health check does.
func ExampleManager_Handler() {
	mgr, err := manager.New(&rest.Config{Host: "https://cluster.invalid:6443"}, manager.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := mgr.AddHealthCheck("upstream", func() error { return errors.New("upstream unreachable") }); err != nil {
		log.Fatal(err)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		rec := httptest.NewRecorder()
		mgr.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// /readyz 503 not ready: caches have not synced, or the manager is stopping
	// /healthz 500 unhealthy: upstream: upstream unreachable
}
