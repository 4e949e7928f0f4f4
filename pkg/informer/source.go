package informer

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// ErrRemoved is returned (wrapped) by the Lister, AddIndex and
// AddEventHandler of an informer whose last use was released (Cache.Use):
// it has stopped and its objects are freed. Declare the type again (For,
// ForResource, ForMetadata) for a new informer.
var ErrRemoved = errors.New("informer removed after its last use was released")

// Source is a declared informer, seen without its Go type: what a manager
// needs to watch it, to wait for it and to hold it. Only this package
// implements it; values come from For, ForResource and ForMetadata.
type Source interface {
	// Name identifies the informer in logs and errors, e.g. "configmaps.v1 (*v1.ConfigMap)".
	Name() string
	// HasSynced reports whether the informer runs and has delivered its
	// initial list, in every namespace it caches. It is false before the
	// Cache starts, while the type's API is not served, and again for a
	// while after the API is served anew (a CRD installed or recreated).
	HasSynced() bool
	// Served reports whether the type's API is served, as far as the
	// informer knows: true from a declaration that found it in discovery,
	// false while an informer declared with TypeOptions.WhenServed waits
	// for it, or after its CRD was deleted, until discovery serves it
	// again. A Source that is not Served holds no objects.
	Served() bool
	// Len reports how many objects the cache holds.
	Len() int
	// AddEventHandler adds h to the informer: h receives an add for each
	// object already cached, then every event, as client-go's
	// SharedInformer.AddEventHandler. h stays added when the informer
	// restarts (its API served again): it then gets a delete, as a
	// cache.DeletedFinalStateUnknown, for each object left when the API
	// went away, and an add for each object of the new initial list. For
	// an informer over several namespaces, h is called from one goroutine
	// per namespace, concurrently. It fails with ErrRemoved after the
	// informer was removed.
	AddEventHandler(h cache.ResourceEventHandler) (*Registration, error)
	// RemoveEventHandler removes a handler AddEventHandler added. It is
	// safe to call more than once.
	RemoveEventHandler(r *Registration) error
	// List returns every cached object, in all namespaces, in no
	// particular order. The objects belong to the cache: DeepCopy before
	// mutating.
	List() []any
	// Cached returns the metadata of the cached object namespace/name, if
	// the cache holds it; the object belongs to the cache. It is for code
	// that does not know the Go type, such as a manager; a Lister is the
	// typed way to read.
	Cached(namespace, name string) (metav1.Object, bool)
	// GroupVersionResource is the resource the informer watches; the zero
	// value while an informer declared with TypeOptions.WhenServed has not
	// found its API in discovery yet.
	GroupVersionResource() schema.GroupVersionResource
	// Scope is the Scope the informer was declared in, or nil.
	Scope() *Scope

	source() *entry
}

// Registration is a handler added with Source.AddEventHandler.
type Registration struct {
	e *entry
	h cache.ResourceEventHandler
	// regs are h's registrations on the running parts; guarded by the
	// entry's mu.
	regs map[*part]cache.ResourceEventHandlerRegistration
}

// HasSynced reports whether the handler has been delivered the initial
// list of every running informer of its Source (see Source.HasSynced).
func (r *Registration) HasSynced() bool {
	ps := r.e.current()
	if ps == nil {
		return false
	}
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	for _, p := range ps {
		reg, ok := r.regs[p]
		if !ok || !reg.HasSynced() {
			return false
		}
	}
	return true
}

// part is one client-go informer of an entry: the entry's objects in one
// namespace (all namespaces when the entry is not narrowed to a list).
type part struct {
	inf cache.SharedIndexInformer
	// alone is inf's indexer as a slice of one: what readers returns when
	// this part is the only one to read, without a slice per lookup.
	alone  []cache.Indexer
	scope  scope
	writes writeTracker
	// closed is closed when the part is taken out of its entry because the
	// API went away or the informer was removed; AwaitWrite stops waiting.
	closed chan struct{}
	synced atomic.Bool // inf has synced
	// gated is set on a part built for a new scope: its handlers get
	// events only once open, when the entry switches to it (switchTo).
	gated bool
	open  atomic.Bool
}

// entry is one declared informer: the objects of one resource as one Go
// type (or unstructured, or metadata only), over one or several
// namespaces. While it runs, each namespace is served by a part, a
// client-go informer of its own. The parts are built by the entry's
// supervisor (run) whenever the API is served, and thrown away when it
// no longer is or when the entry is removed; handlers and indexes live on
// the entry and are carried over to each new part.
type entry struct {
	c    *Cache
	key  entryKey
	name string
	// gk identifies the resource's kind for conflicts between declarations.
	gk schema.GroupKind
	// goType is T's type (metadataType for metadata, nil for unstructured),
	// for ByType and ResyncByType.
	goType reflect.Type
	plan   plan
	// typed is the *Informer[T] of the declaration, returned by every
	// later one; guarded by mu.
	typed any

	gvr    atomic.Pointer[schema.GroupVersionResource] // set once resolved
	parts  atomic.Pointer[[]*part]                     // nil until running
	served atomic.Bool

	mu       sync.Mutex
	handlers []*Registration
	indexers cache.Indexers // AddIndex's, copied onto each new part
	uses     int
	removed  bool
	stop     func()        // ends run; nil until the entry runs
	done     chan struct{} // closed when run returns; nil until the entry runs
	// lost is signalled by a part's watch error handler when a list or
	// watch found the resource gone (404).
	lost chan struct{}
	// rescoped is signalled by the entry's Scope when it changed; the
	// supervisor then builds pending, the parts of the new scope, and
	// switches to them once they have synced.
	rescoped chan struct{}
	pending  []*part
}

// builder builds a part's informer, not started, for resource gvr in
// namespace ns ("" for all), its list options edited by tweak. share, when
// not nil, is the sharer of the part's transform (Options.ShareMetadata),
// for a builder that can share metadata as it decodes lists.
type builder func(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions), share *sharer) (cache.SharedIndexInformer, error)

// plan is how an entry builds its parts once the API is served.
type plan struct {
	// gvk is the kind to resolve when the resource is not known yet.
	gvk schema.GroupVersionKind
	// resolved is true when gvr and namespaced are known (found in
	// discovery at declaration).
	resolved   bool
	gvr        schema.GroupVersionResource
	namespaced bool
	// newInformer builds a part's informer.
	newInformer builder
	// convert turns what the informer lists into what the cache holds.
	convert cache.TransformFunc
}

func (e *entry) source() *entry { return e }

func (e *entry) Name() string { return e.name }

func (e *entry) Scope() *Scope { return e.key.scope }

func (e *entry) Served() bool { return e.served.Load() }

func (e *entry) HasSynced() bool {
	ps := e.parts.Load()
	if ps == nil || !e.served.Load() {
		return false
	}
	for _, p := range *ps {
		if !p.hasSynced() {
			return false
		}
	}
	return true
}

// hasSynced is p.inf.HasSynced, remembered once true (an informer never
// unsyncs): client-go's takes the informer's and its queue's locks, and a
// manager asks before every Reconcile (the sync gate).
func (p *part) hasSynced() bool {
	if p.synced.Load() {
		return true
	}
	if !p.inf.HasSynced() {
		return false
	}
	p.synced.Store(true)
	return true
}

func (e *entry) Len() int {
	n := 0
	for _, p := range e.current() {
		n += len(p.inf.GetStore().ListKeys())
	}
	return n
}

func (e *entry) List() []any {
	var out []any
	for _, p := range e.current() {
		out = append(out, p.inf.GetStore().List()...)
	}
	return out
}

func (e *entry) Cached(namespace, name string) (metav1.Object, bool) {
	obj, ok, err := lookup(e, namespace, name)
	if err != nil || !ok {
		return nil, false
	}
	m, err := meta.Accessor(obj)
	return m, err == nil
}

func (e *entry) GroupVersionResource() schema.GroupVersionResource { return e.resource() }

// current returns the running parts, or nil.
func (e *entry) current() []*part {
	if ps := e.parts.Load(); ps != nil {
		return *ps
	}
	return nil
}

// resource is the entry's resource, or the zero value before it is known.
func (e *entry) resource() schema.GroupVersionResource {
	if g := e.gvr.Load(); g != nil {
		return *g
	}
	return schema.GroupVersionResource{}
}

func (e *entry) AddEventHandler(h cache.ResourceEventHandler) (*Registration, error) {
	if h == nil {
		return nil, fmt.Errorf("informer: %s: AddEventHandler(nil): pass a handler", e.name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed {
		return nil, fmt.Errorf("informer: %s: %w", e.name, ErrRemoved)
	}
	r := &Registration{e: e, h: h, regs: make(map[*part]cache.ResourceEventHandlerRegistration)}
	for _, p := range slices.Concat(e.current(), e.pending) {
		reg, err := p.inf.AddEventHandler(p.handler(h))
		if err != nil {
			e.unregister(r)
			return nil, fmt.Errorf("informer: %s: adding an event handler: %w", e.name, err)
		}
		r.regs[p] = reg
	}
	e.handlers = append(e.handlers, r)
	return r, nil
}

func (e *entry) RemoveEventHandler(r *Registration) error {
	if r == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handlers = slices.DeleteFunc(e.handlers, func(x *Registration) bool { return x == r })
	return e.unregister(r)
}

// unregister removes r from the parts it is on. Called under e.mu.
func (e *entry) unregister(r *Registration) error {
	var errs []error
	for p, reg := range r.regs {
		if err := p.inf.RemoveEventHandler(reg); err != nil {
			errs = append(errs, err)
		}
		delete(r.regs, p)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("informer: %s: removing an event handler: %w", e.name, err)
	}
	return nil
}

// readers returns the indexers that hold namespace's objects ("" for all
// namespaces), or an error when the entry does not cache namespace or was
// removed. Before the entry runs, and while its API is not served, it
// returns none: nothing is cached. The slice may be shared: callers
// only read it.
func (e *entry) readers(namespace string) ([]cache.Indexer, error) {
	ps := e.current()
	if len(ps) == 1 && (namespace == "" || ps[0].scope.namespace == "" || ps[0].scope.namespace == namespace) {
		return ps[0].alone, nil // the common case, every lister Get: no allocation
	}
	if ps == nil {
		e.mu.Lock()
		removed := e.removed
		e.mu.Unlock()
		if removed {
			return nil, fmt.Errorf("informer: %s: %w", e.name, ErrRemoved)
		}
	}
	out := make([]cache.Indexer, 0, len(ps))
	for _, p := range ps {
		if namespace == "" || p.scope.namespace == "" || p.scope.namespace == namespace {
			out = append(out, p.inf.GetIndexer())
		}
	}
	if namespace != "" && len(out) == 0 && len(ps) > 0 {
		nss := make([]string, len(ps))
		for i, p := range ps {
			nss[i] = p.scope.namespace
		}
		return nil, fmt.Errorf("informer: %s caches the namespaces %q, not %q: add it to Options.Namespaces or the type's TypeOptions.Namespaces: %w",
			e.name, nss, namespace, ErrNamespaceNotCached)
	}
	return out, nil
}

// ErrNamespaceNotCached is returned (wrapped) by a Lister asked for the
// objects of a namespace its informer does not cache: the answer would
// be empty whatever the cluster holds.
var ErrNamespaceNotCached = errors.New("namespace not cached")

// hasIndex reports whether index was declared with AddIndex.
func (e *entry) hasIndex(index string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.indexers[index]
	return ok
}

func (e *entry) groupResource() schema.GroupResource {
	if g := e.gvr.Load(); g != nil {
		return g.GroupResource()
	}
	return schema.GroupResource{Group: e.gk.Group, Resource: e.gk.Kind}
}
