package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// workers is the number of concurrent reconciles of both controllers.
const workers = 4

// running is a started manager: synced reports whether its ConfigMap
// informer has synced, done yields what its Run/Start returned.
type running struct {
	synced func() bool
	done   <-chan error
}

// framework builds a manager with one ConfigMap controller whose
// reconciler reads the object from the cache and reports to rec, and starts
// it; it runs until ctx is cancelled. A non-empty selector (a label
// selector) limits what the cache holds.
type framework struct {
	name  string
	start func(ctx context.Context, cfg *rest.Config, rec *recorder, selector string) (*running, error)
}

var frameworks = []framework{
	{name: "ctrlkit", start: startCtrlkit},
	{name: "controller-runtime", start: startControllerRuntime},
}

// unlimited returns cfg with client-side rate limiting off.
func unlimited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// startCtrlkit runs ctrlkit with default options: informer.For, the lister,
// 4 workers.
func startCtrlkit(ctx context.Context, cfg *rest.Config, rec *recorder, selector string) (*running, error) {
	opts := manager.Options{Name: "bench-ctrlkit"}
	if selector != "" {
		opts.Informers.TweakListOptions = func(o *metav1.ListOptions) { o.LabelSelector = selector }
	}
	mgr, err := manager.New(unlimited(cfg), opts)
	if err != nil {
		return nil, err
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		return nil, err
	}
	lister := cms.Lister()
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		start := time.Now()
		cm, err := lister.Get(req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, nil // deleted
		}
		rec.observe(start, cm.Namespace, cm.Name, cm.Annotations)
		return reconcile.Result{}, nil
	})
	if _, err := mgr.AddController("bench", r, manager.ControllerOptions{Workers: workers}, manager.Watch{Source: cms}); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	return &running{synced: cms.HasSynced, done: done}, nil
}

// startControllerRuntime runs controller-runtime with default options (its
// cached client, the priority queue that is its default in v0.25), metrics
// and health servers off, 4 workers.
func startControllerRuntime(ctx context.Context, cfg *rest.Config, rec *recorder, selector string) (*running, error) {
	opts := ctrl.Options{
		Logger:     logr.Discard(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)}, // one manager per run, same name
	}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, err
		}
		opts.Cache.DefaultLabelSelector = sel
	}
	mgr, err := ctrl.NewManager(unlimited(cfg), opts)
	if err != nil {
		return nil, err
	}
	// Declared before Start, as the builder's For would on Start, so that
	// its HasSynced can be polled like ctrlkit's.
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	r := crreconcile.Func(func(ctx context.Context, req crreconcile.Request) (crreconcile.Result, error) {
		start := time.Now()
		var cm corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
			return crreconcile.Result{}, nil // deleted
		}
		rec.observe(start, cm.Namespace, cm.Name, cm.Annotations)
		return crreconcile.Result{}, nil
	})
	err = ctrl.NewControllerManagedBy(mgr).Named("bench").For(&corev1.ConfigMap{}).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: workers}).Complete(r)
	if err != nil {
		return nil, fmt.Errorf("building controller: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return &running{synced: inf.HasSynced, done: done}, nil
}
