package informer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Options are the factory options client-go users know. The zero value
// watches every namespace with no resync and strips managedFields.
type Options struct {
	// Namespaces limits every namespaced informer to these namespaces,
	// each listed and watched by a client-go informer of its own, read
	// through one Lister. Empty means all namespaces, through one
	// informer. Cluster-scoped types are unaffected.
	Namespaces []string
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
	// ConfigMaps of some namespaces, or those with one label, caches only
	// those. Each type still has one informer, shared by every controller.
	ByType map[runtime.Object]TypeOptions
	// KeepManagedFields keeps metadata.managedFields in cached objects. By
	// default they are stripped: they are rarely read by controllers and
	// often make up a large share of an object's memory.
	KeepManagedFields bool
	// ShareMetadata makes cached objects with equal labels, or equal
	// annotations, share one map, and those of one namespace one string,
	// instead of each holding the copy it was decoded with. A one-entry
	// label map costs about 330 bytes, so where label sets repeat (the
	// Pods of a ReplicaSet, the ConfigMaps of a release) it saves much of
	// what metadata costs. Built-in types' lists share while they decode,
	// so no decoded map is left behind as a hole in the heap. In the last
	// full make bench-e2e run, whose ConfigMaps carry one of two label
	// sets and an annotation of their own, the heap in use per ConfigMap
	// was 1,653 B against 1,912 B without it (0.66x controller-runtime's
	// defaults, 0.73x its best memory option). It costs a hash per event, and at most 4096 maps of up to
	// 32 entries and 4096 namespaces held per informer. It is off by
	// default because it turns a bug into a worse one: code that mutates
	// a cached object's labels in place, which Listers forbid (DeepCopy
	// first), would change every object sharing them.
	ShareMetadata bool
	// Scheme maps Go types to kinds for For. Nil means client-go's scheme
	// (built-in types only); add custom types with their AddToScheme.
	Scheme *runtime.Scheme
	// DiscoveryInterval is how often an informer whose API is not served
	// (TypeOptions.WhenServed, or a CRD deleted while the Cache runs) asks
	// the API server's discovery whether it is. 0 means
	// DefaultDiscoveryInterval.
	DiscoveryInterval time.Duration
}

// TypeOptions narrow the informer of one type (Options.ByType).
type TypeOptions struct {
	// Namespaces limits the type's informer to these namespaces, instead
	// of Options.Namespaces. It is an error for a cluster-scoped type.
	Namespaces []string
	// LabelSelector and FieldSelector, in the syntax of kubectl's -l and
	// --field-selector, select the objects the informer lists and watches.
	// They are added (with a comma) to any selector that
	// Options.TweakListOptions sets.
	LabelSelector, FieldSelector string
	// WhenServed lets For and ForMetadata declare the type even when the
	// API server does not serve it yet (its CRD is installed later): the
	// informer then waits, asking discovery every
	// Options.DiscoveryInterval, and starts when the API is served, with
	// no restart. Until then its Lister is empty, Source.Served is false,
	// and Cache.WaitForSync does not wait for it. Without WhenServed, a
	// type that is not served is an error at declaration, which catches a
	// misspelt group or a missing CRD early.
	WhenServed bool
}

// Clients are what a Cache lists and watches through.
type Clients struct {
	// Config is the rest config every informer lists and watches through
	// (required): built-in types in protobuf, custom types as JSON decoded
	// straight into the Go type and its List type, metadata-only and
	// unstructured informers through client-go's metadata and dynamic
	// clients (see the package doc). In a unit test, use pkg/fake's
	// Cluster.Config.
	Config *rest.Config
	// HTTPClient, when set, sends every request of the clients the cache
	// builds from Config. Nil means rest.HTTPClientFor(Config): client-go's
	// transport, shared process-wide by configs with the same TLS settings.
	// A manager sets its own, whose connections it closes when it stops.
	HTTPClient *http.Client
	// Mapper resolves kinds to resources and tells which resources the
	// server serves. Nil means a deferred discovery mapper over Config.
	Mapper meta.RESTMapper
}

// built are the clients a Cache builds from its Clients.
type built struct {
	discovery discovery.DiscoveryInterface
	dynamic   dynamic.Interface
	metadata  metadata.Interface
}

// Cache owns the informers of one manager. Its methods are safe for
// concurrent use.
type Cache struct {
	opts    Options
	scheme  *runtime.Scheme
	clients Clients
	built   built
	resync  map[reflect.Type]time.Duration
	byType  map[reflect.Type]TypeOptions

	mu      sync.Mutex
	ctx     context.Context // Start's; nil before
	entries map[entryKey]*entry
	order   []*entry
	runners sync.WaitGroup
	typed   typedClients // custom types' REST clients and decode errors
	// byResource holds the running informers of each resource once the
	// Cache has started (nil before), for AwaitWrite; replaced, never
	// changed, under mu.
	byResource atomic.Pointer[map[schema.GroupVersionResource][]*entry]
}

// entryKey identifies a declaration: a kind as a Go type (For,
// ForMetadata: gvk and goType), or a resource as unstructured objects
// (ForResource: gvr).
type entryKey struct {
	gvk    schema.GroupVersionKind
	gvr    schema.GroupVersionResource
	goType reflect.Type // nil for unstructured
	scope  *Scope       // nil: the informer declared without one
}

// New returns a Cache that lists and watches through clients. It fails if a
// client is missing or an option is out of range.
func New(clients Clients, opts Options) (*Cache, error) {
	switch {
	case clients.Config == nil:
		return nil, errors.New("informer: Clients.Config is nil: pass the rest config to list and watch through (a manager passes its own; in a unit test, pkg/fake's Cluster.Config)")
	case opts.Resync < 0:
		return nil, fmt.Errorf("informer: Options.Resync is %v: use 0 to disable resync, or a positive period", opts.Resync)
	case opts.DiscoveryInterval < 0:
		return nil, fmt.Errorf("informer: Options.DiscoveryInterval is %v: use 0 for the default of %v, or a positive period", opts.DiscoveryInterval, DefaultDiscoveryInterval)
	}
	b, err := clients.build()
	if err != nil {
		return nil, err
	}
	if err := checkNamespaces("Options.Namespaces", opts.Namespaces); err != nil {
		return nil, err
	}
	c := &Cache{
		opts:    opts,
		scheme:  opts.Scheme,
		clients: clients,
		built:   b,
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
		if err := checkNamespaces(fmt.Sprintf("Options.ByType[%T].Namespaces", obj), to.Namespaces); err != nil {
			return nil, err
		}
		c.byType[reflect.TypeOf(obj)] = to
	}
	if c.scheme == nil {
		c.scheme = kubescheme.Scheme
	}
	for obj, d := range opts.ResyncByType {
		if _, ok := obj.(metav1.Object); !ok || d < 0 {
			return nil, fmt.Errorf("informer: Options.ResyncByType[%T] = %v: keys must be API objects like &corev1.ConfigMap{}, periods >= 0", obj, d)
		}
		c.resync[reflect.TypeOf(obj)] = d
	}
	return c, nil
}

// build sets c's HTTPClient and Mapper if they are nil, and builds the
// discovery, dynamic and metadata clients on them. It does not contact the
// API server.
func (c *Clients) build() (built, error) {
	if c.HTTPClient == nil {
		hc, err := rest.HTTPClientFor(c.Config)
		if err != nil {
			return built{}, fmt.Errorf("informer: building the HTTP client from Clients.Config: %w", err)
		}
		c.HTTPClient = hc
	}
	var b built
	var err error
	if b.discovery, err = discovery.NewDiscoveryClientForConfigAndClient(c.Config, c.HTTPClient); err != nil {
		return built{}, fmt.Errorf("informer: building the discovery client from Clients.Config: %w", err)
	}
	if b.dynamic, err = dynamic.NewForConfigAndClient(c.Config, c.HTTPClient); err != nil {
		return built{}, fmt.Errorf("informer: building the dynamic client from Clients.Config: %w", err)
	}
	if b.metadata, err = metadata.NewForConfigAndClient(c.Config, c.HTTPClient); err != nil {
		return built{}, fmt.Errorf("informer: building the metadata client from Clients.Config: %w", err)
	}
	if c.Mapper == nil {
		c.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(b.discovery))
	}
	return b, nil
}

// checkNamespaces rejects an empty or repeated namespace in a list.
func checkNamespaces(field string, nss []string) error {
	for i, ns := range nss {
		switch {
		case ns == "":
			return fmt.Errorf("informer: %s[%d] is empty: list namespaces by name, or leave the list empty for all namespaces", field, i)
		case slices.Index(nss, ns) < i:
			return fmt.Errorf("informer: %s lists %q twice: list each namespace once", field, ns)
		}
	}
	return nil
}

// Start starts every declared informer and returns at once. The informers
// stop when ctx is done; Wait blocks until they have. Informers declared
// after Start start at their declaration. Start may be called once.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx != nil {
		return errors.New("informer: cache already started")
	}
	c.ctx = ctx
	c.publish()
	for _, e := range c.order {
		c.launch(ctx, e)
	}
	return nil
}

// publish replaces the map AwaitWrite reads with the current entries of
// each resolved resource. Called under c.mu, once started.
func (c *Cache) publish() {
	if c.ctx == nil {
		return
	}
	byResource := make(map[schema.GroupVersionResource][]*entry)
	for _, e := range c.order {
		if g := e.gvr.Load(); g != nil {
			byResource[*g] = append(byResource[*g], e)
		}
	}
	c.byResource.Store(&byResource)
}

// Wait blocks until every informer goroutine has ended, which happens after
// Start's ctx is done.
func (c *Cache) Wait() {
	c.runners.Wait()
}

// Informers returns every declared informer in declaration order, without
// those removed (Use).
func (c *Cache) Informers() []Source {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Source, len(c.order))
	for i, e := range c.order {
		out[i] = e
	}
	return out
}

// WaitForSync blocks until every declared informer whose API is served
// has synced (see WaitForSources), logging every progressEvery (when
// positive) how many objects each unsynced informer holds so far. If ctx
// ends first it returns an error naming each informer that did not sync.
func (c *Cache) WaitForSync(ctx context.Context, log logr.Logger, progressEvery time.Duration) error {
	return WaitForSources(ctx, log, progressEvery, c.Informers()...)
}

// WaitForSources blocks until each of srcs has synced or is not served
// (Source.Served: an informer waiting for its CRD holds nothing to wait
// for), logging every progressEvery (when positive) how many objects each
// unsynced informer holds so far. If ctx ends first it returns an error
// naming each informer that did not sync. It polls every 50ms.
func WaitForSources(ctx context.Context, log logr.Logger, progressEvery time.Duration, srcs ...Source) error {
	pending := func() []Source {
		var out []Source
		for _, s := range srcs {
			if s.Served() && !s.HasSynced() {
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

// declare returns the informer for key, creating it if needed from p. A
// new informer starts at once when the Cache has started. served says
// whether discovery serves its resource, p's gvr when p is resolved.
func (c *Cache) declare(key entryKey, gk schema.GroupKind, goType reflect.Type, name, decl string, served bool, mk func() (plan, error)) (*entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e, nil
	}
	if err := c.conflict(gk, key.goType == metadataType, decl); err != nil {
		return nil, err
	}
	p, err := mk()
	if err != nil {
		return nil, err
	}
	if key.scope != nil {
		name += " in scope " + key.scope.name
	}
	e := &entry{c: c, key: key, name: name, gk: gk, goType: goType, plan: p, lost: make(chan struct{}, 1), rescoped: make(chan struct{}, 1)}
	key.scope.add(e)
	if p.resolved {
		gvr := p.gvr
		e.gvr.Store(&gvr)
	}
	e.served.Store(served)
	c.entries[key] = e
	c.order = append(c.order, e)
	if c.ctx != nil {
		c.publish()
		c.launch(c.ctx, e)
	}
	return e, nil
}

// scopeFor returns the namespaces (one "" for all) and the list-options
// tweak of the informer of Go type t (nil: no ByType entry applies), whose
// resource is namespaced or not.
func (c *Cache) scopeFor(t reflect.Type, namespaced bool) ([]string, func(*metav1.ListOptions), error) {
	to, ok := c.byType[t]
	nss := c.opts.Namespaces
	if ok && len(to.Namespaces) > 0 {
		if !namespaced {
			return nil, nil, fmt.Errorf("Options.ByType[%v].Namespaces is %q, but the type is cluster-scoped: leave it empty", t, to.Namespaces)
		}
		nss = to.Namespaces
	}
	if !namespaced || len(nss) == 0 {
		nss = []string{""}
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
	return nss, tweak, nil
}

// whenServed reports whether Go type t may be declared before its API is
// served (TypeOptions.WhenServed).
func (c *Cache) whenServed(t reflect.Type) bool {
	return c.byType[t].WhenServed
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
