package informer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// ErrNotDeclared is returned (wrapped) when an informer is asked for after
// the Cache started without having been declared before.
var ErrNotDeclared = errors.New("informer not declared before the cache started")

// Options are the factory options client-go users know. The zero value
// watches every namespace with no resync and strips managedFields.
type Options struct {
	// Namespace limits every namespaced informer to one namespace. Empty
	// means all namespaces. Cluster-scoped types are unaffected.
	Namespace string
	// TweakListOptions edits the list and watch options of every informer,
	// for example to set a label or field selector.
	TweakListOptions func(*metav1.ListOptions)
	// Resync is the default resync period; 0 disables resync.
	Resync time.Duration
	// ResyncByType overrides Resync per Go type, keyed by an example object
	// such as &corev1.ConfigMap{} (as client-go's WithCustomResyncConfig).
	ResyncByType map[runtime.Object]time.Duration
	// ByType narrows the informer of one Go type, keyed by an example
	// object such as &corev1.ConfigMap{}: a controller that only reads the
	// ConfigMaps of one namespace, or those with one label, caches only
	// those. Each type still has one informer, shared by every controller.
	ByType map[runtime.Object]TypeOptions
	// KeepManagedFields keeps metadata.managedFields in cached objects. By
	// default they are stripped: they are rarely read by controllers and
	// often make up a large share of an object's memory.
	KeepManagedFields bool
	// Scheme maps Go types to kinds for For. Nil means client-go's scheme
	// (built-in types only); add custom types with their AddToScheme.
	Scheme *runtime.Scheme
}

// TypeOptions narrow the informer of one type (Options.ByType).
type TypeOptions struct {
	// Namespace limits the type's informer to one namespace, instead of
	// Options.Namespace. It is an error for a cluster-scoped type.
	Namespace string
	// LabelSelector and FieldSelector, in the syntax of kubectl's -l and
	// --field-selector, select the objects the informer lists and watches.
	// They are added (with a comma) to any selector that
	// Options.TweakListOptions sets.
	LabelSelector, FieldSelector string
}

// Clients are what a Cache lists and watches through.
type Clients struct {
	// Kube serves built-in types.
	Kube kubernetes.Interface
	// Dynamic serves unstructured types, and custom Go types when Config
	// is nil.
	Dynamic dynamic.Interface
	// Mapper resolves kinds to resources and tells which resources the
	// server serves.
	Mapper meta.RESTMapper
	// Config, when set, is the rest config that custom Go types (For) are
	// listed and watched through, as JSON decoded straight into the Go
	// type and its List type (see the package doc). Nil means the dynamic
	// client, whose unstructured objects are converted to the Go type:
	// 2-3 times the CPU and 3-6 times the bytes allocated per object
	// (BenchmarkDecode in the bench module).
	Config *rest.Config
	// Metadata, when set, serves metadata-only informers (ForMetadata).
	// Nil means one built from Config; ForMetadata fails if both are nil.
	Metadata metadata.Interface
}

// Cache owns the informers of one manager. Its methods are safe for
// concurrent use.
type Cache struct {
	opts    Options
	scheme  *runtime.Scheme
	clients Clients
	factory informers.SharedInformerFactory
	resync  map[reflect.Type]time.Duration
	byType  map[reflect.Type]TypeOptions
	// factories are the extra factories of the types in byType, started
	// and shut down with factory.
	factories []informers.SharedInformerFactory

	mu      sync.Mutex
	started bool
	entries map[entryKey]*entry
	order   []*entry
	runners sync.WaitGroup
	typed   typedClients // custom types' REST clients and decode errors
	// byResource holds the informers of each resource once the Cache has
	// started (nil before), for AwaitWrite.
	byResource atomic.Pointer[map[schema.GroupVersionResource][]*entry]
}

type entryKey struct {
	gvr     schema.GroupVersionResource
	goType  reflect.Type // nil for unstructured
	untyped bool
}

type entry struct {
	name     string
	gvr      schema.GroupVersionResource
	inf      cache.SharedIndexInformer
	ownedRun bool  // run by the Cache, not by the factory
	scope    scope // what inf lists and watches, for AwaitWrite
	writes   writeTracker
}

// built is what declare's mk returns: the informer and its scope, whether
// the Cache (rather than the factory) runs it, and an optional transform
// that converts listed objects.
type built struct {
	inf     cache.SharedIndexInformer
	scope   scope
	owned   bool
	convert cache.TransformFunc
}

// New returns a Cache that lists and watches through clients. It fails if a
// client is missing or an option is out of range.
func New(clients Clients, opts Options) (*Cache, error) {
	switch {
	case clients.Kube == nil:
		return nil, errors.New("informer: Clients.Kube is nil: pass a kubernetes.Interface, e.g. kubernetes.NewForConfig(cfg)")
	case clients.Dynamic == nil:
		return nil, errors.New("informer: Clients.Dynamic is nil: pass a dynamic.Interface, e.g. dynamic.NewForConfig(cfg)")
	case clients.Mapper == nil:
		return nil, errors.New("informer: Clients.Mapper is nil: pass a meta.RESTMapper, e.g. one from restmapper.NewDeferredDiscoveryRESTMapper")
	case opts.Resync < 0:
		return nil, fmt.Errorf("informer: Options.Resync is %v: use 0 to disable resync, or a positive period", opts.Resync)
	}
	c := &Cache{
		opts:    opts,
		scheme:  opts.Scheme,
		clients: clients,
		resync:  make(map[reflect.Type]time.Duration),
		byType:  make(map[reflect.Type]TypeOptions),
		entries: make(map[entryKey]*entry),
	}
	for obj, to := range opts.ByType {
		if _, ok := obj.(metav1.Object); !ok {
			return nil, fmt.Errorf("informer: Options.ByType[%T]: keys must be API objects like &corev1.ConfigMap{}", obj)
		}
		if _, err := labels.Parse(to.LabelSelector); err != nil {
			return nil, fmt.Errorf("informer: Options.ByType[%T].LabelSelector %q: %w", obj, to.LabelSelector, err)
		}
		if _, err := fields.ParseSelector(to.FieldSelector); err != nil {
			return nil, fmt.Errorf("informer: Options.ByType[%T].FieldSelector %q: %w", obj, to.FieldSelector, err)
		}
		c.byType[reflect.TypeOf(obj)] = to
	}
	if c.scheme == nil {
		c.scheme = kubescheme.Scheme
	}
	custom := make(map[metav1.Object]time.Duration)
	for obj, d := range opts.ResyncByType {
		mo, ok := obj.(metav1.Object)
		if !ok || d < 0 {
			return nil, fmt.Errorf("informer: Options.ResyncByType[%T] = %v: keys must be API objects like &corev1.ConfigMap{}, periods >= 0", obj, d)
		}
		c.resync[reflect.TypeOf(obj)] = d
		custom[mo] = d
	}
	c.factory = informers.NewSharedInformerFactoryWithOptions(clients.Kube, opts.Resync,
		informers.WithNamespace(opts.Namespace),
		informers.WithTweakListOptions(opts.TweakListOptions),
		informers.WithCustomResyncConfig(custom))
	return c, nil
}

// Start starts every declared informer and returns at once. The informers
// stop when ctx is done; Wait blocks until they have. Declaring new
// informers after Start fails with ErrNotDeclared. Start may be called once.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return errors.New("informer: cache already started")
	}
	c.started = true
	// The informers are fixed from here on: AwaitWrite finds a resource's
	// informers in this map without taking c.mu.
	byResource := make(map[schema.GroupVersionResource][]*entry)
	for _, e := range c.order {
		byResource[e.gvr] = append(byResource[e.gvr], e)
	}
	c.byResource.Store(&byResource)
	c.factory.StartWithContext(ctx)
	for _, f := range c.factories {
		f.StartWithContext(ctx)
	}
	for _, e := range c.order {
		if e.ownedRun {
			c.runners.Go(func() { e.inf.RunWithContext(ctx) })
		}
	}
	return nil
}

// Wait blocks until every informer goroutine has ended, which happens after
// Start's ctx is done.
func (c *Cache) Wait() {
	c.factory.Shutdown()
	for _, f := range c.factories {
		f.Shutdown()
	}
	c.runners.Wait()
}

// Informers returns every declared informer in declaration order.
func (c *Cache) Informers() []Source {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Source, len(c.order))
	for i, e := range c.order {
		out[i] = e
	}
	return out
}

// WaitForSync blocks until every declared informer has synced, logging
// every progressEvery (when positive) how many objects each unsynced
// informer holds so far. If ctx ends first it returns an error naming each
// informer that did not sync.
func (c *Cache) WaitForSync(ctx context.Context, log logr.Logger, progressEvery time.Duration) error {
	srcs := c.Informers()
	pending := func() []Source {
		var out []Source
		for _, s := range srcs {
			if !s.HasSynced() {
				out = append(out, s)
			}
		}
		return out
	}
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	// A nil channel never fires: progressEvery <= 0 disables the progress
	// logs (time.NewTicker would panic on it).
	var progressC <-chan time.Time
	if progressEvery > 0 {
		progress := time.NewTicker(progressEvery)
		defer progress.Stop()
		progressC = progress.C
	}
	for {
		left := pending()
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			names := make([]string, len(left))
			for i, s := range left {
				names[i] = fmt.Sprintf("%s (%d objects listed)", s.Name(), s.Len())
			}
			return fmt.Errorf("informer: caches did not sync: %s: %w (check RBAC list/watch permissions and that the API server is reachable)",
				strings.Join(names, ", "), context.Cause(ctx))
		case <-progressC:
			for _, s := range left {
				log.Info("Waiting for cache to sync", "informer", s.Name(), "objects", s.Len())
			}
		case <-poll.C:
		}
	}
}

// declare returns the informer for key, creating it with mk if the Cache has
// not started. After Start an undeclared key is an ErrNotDeclared error.
// mk builds the informer.
func (c *Cache) declare(key entryKey, name, decl string, mk func() (built, error)) (*entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e, nil
	}
	if err := c.conflict(key, decl); err != nil {
		return nil, err
	}
	if c.started {
		return nil, fmt.Errorf("informer: %s: %w: declare it with %s before the manager runs", name, ErrNotDeclared, decl)
	}
	b, err := mk()
	if err != nil {
		return nil, err
	}
	if t := composeTransforms(b.convert, c.opts.KeepManagedFields); t != nil {
		if err := b.inf.SetTransform(t); err != nil {
			return nil, fmt.Errorf("informer: %s: setting transform: %w", name, err)
		}
	}
	e := &entry{name: name, gvr: key.gvr, inf: b.inf, ownedRun: b.owned, scope: b.scope}
	if err := e.trackWrites(); err != nil {
		return nil, err
	}
	c.entries[key] = e
	c.order = append(c.order, e)
	return e, nil
}

// scopeFor returns the namespace and list-options tweak of the informer of
// Go type t, whose resource is namespaced or not.
func (c *Cache) scopeFor(t reflect.Type, namespaced bool) (string, func(*metav1.ListOptions), error) {
	to, ok := c.byType[t]
	ns := c.opts.Namespace
	if ok && to.Namespace != "" {
		if !namespaced {
			return "", nil, fmt.Errorf("Options.ByType[%v].Namespace is %q, but the type is cluster-scoped: leave it empty", t, to.Namespace)
		}
		ns = to.Namespace
	}
	if !namespaced {
		ns = ""
	}
	tweak := c.opts.TweakListOptions
	if ok && (to.LabelSelector != "" || to.FieldSelector != "") {
		global := tweak
		tweak = func(o *metav1.ListOptions) {
			if global != nil {
				global(o)
			}
			o.LabelSelector = joinSelectors(o.LabelSelector, to.LabelSelector)
			o.FieldSelector = joinSelectors(o.FieldSelector, to.FieldSelector)
		}
	}
	return ns, tweak, nil
}

func joinSelectors(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// resyncFor returns the resync period for Go type t.
func (c *Cache) resyncFor(t reflect.Type) time.Duration {
	if d, ok := c.resync[t]; ok {
		return d
	}
	return c.opts.Resync
}

// Declared lists the names of the declared informers, sorted.
func (c *Cache) Declared() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.order))
	for _, e := range c.order {
		names = append(names, e.name)
	}
	slices.Sort(names)
	return names
}

// Source is a declared informer, seen without its Go type: what a manager
// needs to watch it and to wait for it.
type Source interface {
	// Name identifies the informer in logs and errors, e.g. "configmaps.v1 (*v1.ConfigMap)".
	Name() string
	// HasSynced reports whether the initial list has been delivered.
	HasSynced() bool
	// Len reports how many objects the cache holds.
	Len() int
	// Informer is the underlying client-go informer.
	Informer() cache.SharedIndexInformer
}

func (e *entry) Name() string                        { return e.name }
func (e *entry) HasSynced() bool                     { return e.inf.HasSynced() }
func (e *entry) Len() int                            { return len(e.inf.GetStore().ListKeys()) }
func (e *entry) Informer() cache.SharedIndexInformer { return e.inf }
