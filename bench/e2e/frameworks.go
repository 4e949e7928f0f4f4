package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// kind is the type of object the benchmarked controller watches.
type kind int

const (
	configMaps kind = iota
	pods
	sites // the crd section's custom resource, Site
)

// setup is what one manager run caches and what its reconciler costs.
type setup struct {
	kind     kind
	selector string        // a label selector limiting the cache; empty caches every object
	cost     time.Duration // simulated work in each Reconcile after the cache read; 0 for none
	lean     bool          // the framework's best memory option instead of its defaults
}

// running is a started manager: synced reports whether its informer has
// synced, done yields what its Run/Start returned.
type running struct {
	synced func() bool
	done   <-chan error
}

// framework builds a manager with one controller for the setup's kind,
// whose reconciler reads the object from the cache and reports to rec, and
// starts it; it runs until ctx is cancelled.
type framework struct {
	name string
	// lean says what setup.lean changes; empty when the defaults already
	// are the framework's best memory option, and lean runs are skipped.
	lean  string
	start func(ctx context.Context, cfg *rest.Config, rec *recorder, s setup) (*running, error)
}

var frameworks = []framework{
	{name: "ctrlkit", lean: "informer.Options{ShareMetadata: true}", start: startCtrlkit},
	{name: "controller-runtime", lean: "cache.Options{DefaultTransform: cache.TransformStripManagedFields()}", start: startControllerRuntime},
}

// unlimited returns cfg with client-side rate limiting off.
func unlimited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// simulate stands in for the work a real reconciler does. A sleep is the
// point here: the cost is simulated, nothing is waited for.
func simulate(cost time.Duration) {
	if cost > 0 {
		time.Sleep(cost)
	}
}

// startCtrlkit runs ctrlkit with default options: informer.For, the lister,
// 4 workers. It strips managedFields by default; s.lean adds its best
// memory option, informer.Options.ShareMetadata.
func startCtrlkit(ctx context.Context, cfg *rest.Config, rec *recorder, s setup) (*running, error) {
	opts := manager.Options{Name: "bench-ctrlkit"}
	opts.Informers.ShareMetadata = s.lean
	if s.selector != "" {
		opts.Informers.TweakListOptions = func(o *metav1.ListOptions) { o.LabelSelector = s.selector }
	}
	if s.kind == sites {
		opts.Scheme = siteScheme()
	}
	mgr, err := manager.New(traced(unlimited(cfg), "ctrlkit"), opts)
	if err != nil {
		return nil, err
	}
	var synced func() bool
	switch s.kind {
	case pods:
		synced, err = ctrlkitController[*corev1.Pod](mgr, rec, s.cost)
	case sites:
		synced, err = ctrlkitController[*Site](mgr, rec, s.cost)
	default:
		synced, err = ctrlkitController[*corev1.ConfigMap](mgr, rec, s.cost)
	}
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	return &running{synced: synced, done: done}, nil
}

// ctrlkitController adds the bench controller for T to mgr and returns its
// informer's HasSynced.
func ctrlkitController[T interface {
	runtime.Object
	metav1.Object
}](mgr *manager.Manager, rec *recorder, cost time.Duration) (func() bool, error) {
	inf, err := informer.For[T](mgr.Cache())
	if err != nil {
		return nil, err
	}
	lister := inf.Lister()
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		start := time.Now()
		obj, err := lister.Get(req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, nil // deleted
		}
		rec.observe(start, obj.GetNamespace(), obj.GetName(), obj.GetAnnotations())
		simulate(cost)
		return reconcile.Result{}, nil
	})
	if _, err := mgr.AddController("bench", r, manager.ControllerOptions{Workers: workers}, manager.Watch{Source: inf}); err != nil {
		return nil, err
	}
	phaseLen = inf.Len
	return inf.HasSynced, nil
}

// startControllerRuntime runs controller-runtime with default options (its
// cached client, the priority queue that is its default in v0.25), metrics
// and health servers off, 4 workers. With s.lean its cache strips
// managedFields, the memory option its cache documentation suggests.
func startControllerRuntime(ctx context.Context, cfg *rest.Config, rec *recorder, s setup) (*running, error) {
	opts := ctrl.Options{
		Logger:     logr.Discard(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)}, // one manager per run, same name
	}
	if s.selector != "" {
		sel, err := labels.Parse(s.selector)
		if err != nil {
			return nil, err
		}
		opts.Cache.DefaultLabelSelector = sel
	}
	if s.lean {
		opts.Cache.DefaultTransform = crcache.TransformStripManagedFields()
	}
	if s.kind == sites {
		opts.Scheme = siteScheme()
	}
	mgr, err := ctrl.NewManager(traced(unlimited(cfg), "controller-runtime"), opts)
	if err != nil {
		return nil, err
	}
	newObj := func() client.Object { return &corev1.ConfigMap{} }
	switch s.kind {
	case pods:
		newObj = func() client.Object { return &corev1.Pod{} }
	case sites:
		newObj = func() client.Object { return &Site{} }
	}
	// Declared before Start, as the builder's For would on Start, so that
	// its HasSynced can be polled like ctrlkit's.
	inf, err := mgr.GetCache().GetInformer(ctx, newObj())
	if err != nil {
		return nil, err
	}
	if si, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
		phaseLen = func() int { return len(si.GetStore().ListKeys()) }
	}
	c := mgr.GetClient()
	r := crreconcile.Func(func(ctx context.Context, req crreconcile.Request) (crreconcile.Result, error) {
		start := time.Now()
		obj := newObj()
		if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
			return crreconcile.Result{}, nil // deleted
		}
		rec.observe(start, obj.GetNamespace(), obj.GetName(), obj.GetAnnotations())
		simulate(s.cost)
		return crreconcile.Result{}, nil
	})
	err = ctrl.NewControllerManagedBy(mgr).Named("bench").For(newObj()).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: workers}).Complete(r)
	if err != nil {
		return nil, fmt.Errorf("building controller: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return &running{synced: inf.HasSynced, done: done}, nil
}
