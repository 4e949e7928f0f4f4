package informer

import (
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/internal/kube"
)

// Informer is a declared informer whose cache holds objects of type T.
type Informer[T runtime.Object] struct {
	*entry
	lister Lister[T]
}

// newInformer returns e's Informer[T], the same value on every call: an
// entry is declared for one T.
func newInformer[T runtime.Object](e *entry) *Informer[T] {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i, ok := e.typed.(*Informer[T]); ok {
		return i
	}
	i := &Informer[T]{entry: e, lister: Lister[T]{src: e}}
	e.typed = i
	return i
}

// Lister reads the cache. It never calls the API server.
func (i *Informer[T]) Lister() Lister[T] { return i.lister }

// For declares, or returns the already declared, informer for the Go type T,
// a pointer to an API type registered in the Cache's scheme: a built-in
// type such as *corev1.ConfigMap (listed and watched in protobuf) or a
// custom type such as *v1alpha1.Website (listed and watched as JSON
// decoded straight into T; no generated clientset needed), through REST
// clients built from Clients.Config. A custom type's List type, named
// after its kind (WebsiteList), must be in the scheme too.
//
// For consults the API server's discovery and fails if the server does not
// serve the type, unless the type's TypeOptions.WhenServed is set: the
// informer then waits for it. An informer declared after the Cache started
// starts at once; wait for it with WaitForSources before reading its
// Lister, or let a manager's controller do it.
func For[T runtime.Object](c *Cache, in ...*Scope) (*Informer[T], error) {
	// TypeFor, not TypeOf(zero): for an interface T the zero value is nil
	// and the error would name <nil> instead of T.
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("informer: For[%v]: T must be a pointer to an API struct, e.g. For[*corev1.ConfigMap]", rt)
	}
	gvks, _, err := c.scheme.ObjectKinds(reflect.New(rt.Elem()).Interface().(runtime.Object))
	if err != nil {
		return nil, fmt.Errorf("informer: For[%v]: type is not in the scheme: register it with its AddToScheme in informer.Options.Scheme (manager.Options.Scheme for a manager's cache): %w", rt, err)
	}
	gvk := gvks[0]
	scope, err := oneScope(fmt.Sprintf("informer: For[%v]", rt), in)
	if err != nil {
		return nil, err
	}
	key := entryKey{gvk: gvk, goType: rt, scope: scope}
	if e := c.lookup(key); e != nil {
		return newInformer[T](e), nil
	}
	decl := fmt.Sprintf("informer.For[%v]", rt)
	p, name, err := c.resolve(fmt.Sprintf("informer: For[%v]", rt), rt, gvk, "")
	if err != nil {
		return nil, err
	}
	e, err := c.declare(key, gvk.GroupKind(), rt, name, decl, p.resolved, func() (plan, error) {
		// The one choice of a backend (builtin.go says why each).
		switch {
		case kube.BuiltIn(gvk, rt):
			newInf, err := c.builtInInformer(rt, gvk)
			if err != nil {
				return plan{}, fmt.Errorf("informer: For[%v]: %w", rt, err)
			}
			p.newInformer = newInf
			return p, nil
		}
		newInf, err := c.typedInformer(rt, gvk, name)
		if err != nil {
			return plan{}, fmt.Errorf("informer: For[%v]: %w", rt, err)
		}
		p.newInformer = newInf
		p.convert = withKind(gvk)
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return newInformer[T](e), nil
}

// lookup returns the entry declared under key, or nil.
func (c *Cache) lookup(key entryKey) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key]
}

// resolve finds the resource of kind gvk (Go type rt) in discovery and
// returns the plan's resource part and the informer's name, its resource
// followed by what (rt when empty). When the kind is not served and rt's
// TypeOptions.WhenServed is set, the plan is unresolved and the resource
// in the name is guessed from the kind. Errors begin with where.
func (c *Cache) resolve(where string, rt reflect.Type, gvk schema.GroupVersionKind, what string) (plan, string, error) {
	if what == "" {
		what = rt.String()
	}
	p := plan{gvk: gvk}
	mapping, err := c.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err) && c.whenServed(rt):
		guess, _ := meta.UnsafeGuessKindToResource(gvk)
		return p, fmt.Sprintf("%s (%s)", gvrString(guess), what), nil
	case meta.IsNoMatchError(err):
		return p, "", fmt.Errorf("%s: the API server does not serve %s (is its CRD installed? To start the informer once it is, set TypeOptions.WhenServed): %w", where, gvk, err)
	case err != nil:
		return p, "", fmt.Errorf("%s: could not read the API server's discovery to find the resource of %s: %w", where, gvk, err)
	}
	p.resolved, p.gvr = true, mapping.Resource
	p.namespaced = mapping.Scope.Name() != meta.RESTScopeNameRoot
	if _, _, err := c.scopeFor(rt, p.namespaced); err != nil {
		return p, "", fmt.Errorf("%s: %w", where, err)
	}
	return p, fmt.Sprintf("%s (%s)", gvrString(p.gvr), what), nil
}

// dynamicInformer builds informers of the dynamic client, resynced as Go
// type rt (nil: the Cache's default).
func (c *Cache) dynamicInformer(rt reflect.Type) builder {
	return func(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions), _ *sharer) (cache.SharedIndexInformer, error) {
		return dynamicinformer.NewFilteredDynamicInformer(listingDynamic{Interface: c.built.dynamic}, gvr, ns, c.resyncFor(rt),
			indexersFor(ns), tweak).Informer(), nil
	}
}

// ForResource declares, or returns the already declared, informer for any
// resource as unstructured objects, through the dynamic client. The same
// declaration rules as For apply, except that the resource must be served
// (WhenServed is for Go types), and so do the entries of Options.ByType
// and Options.ResyncByType whose Go type the Cache's scheme maps to the
// resource's kind: the unstructured informer of a resource is narrowed and
// resynced like its typed one.
func ForResource(c *Cache, gvr schema.GroupVersionResource, in ...*Scope) (*Informer[*unstructured.Unstructured], error) {
	scope, err := oneScope(fmt.Sprintf("informer: ForResource(%s)", gvrString(gvr)), in)
	if err != nil {
		return nil, err
	}
	key := entryKey{gvr: gvr, scope: scope}
	if e := c.lookup(key); e != nil {
		return newInformer[*unstructured.Unstructured](e), nil
	}
	decl := fmt.Sprintf("informer.ForResource(%q)", gvrString(gvr))
	where := fmt.Sprintf("informer: ForResource(%s)", gvrString(gvr))
	gvk, err := c.clients.Mapper.KindFor(gvr)
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("%s: the API server does not serve it (is its CRD installed?): %w", where, err)
	} else if err != nil {
		return nil, fmt.Errorf("%s: could not read the API server's discovery to find it: %w", where, err)
	}
	// The Go type of the kind, if the scheme has one: ByType and
	// ResyncByType are keyed by it. Nil leaves the Cache's defaults.
	var rt reflect.Type
	if t, ok := c.scheme.AllKnownTypes()[gvk]; ok {
		rt = reflect.PointerTo(t)
	}
	p, name, err := c.resolve(where, rt, gvk, "unstructured")
	if err != nil {
		return nil, err
	}
	if !p.resolved {
		return nil, fmt.Errorf("%s: the API server does not serve it (is its CRD installed?)", where)
	}
	p.gvr = gvr // the version asked for
	e, err := c.declare(key, gvk.GroupKind(), rt, name, decl, true, func() (plan, error) {
		p.newInformer = c.dynamicInformer(rt)
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return newInformer[*unstructured.Unstructured](e), nil
}

func gvrString(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource + "." + gvr.Version
	}
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}

// Lister reads objects of type T from an informer's cache. The objects
// belong to the cache: DeepCopy before mutating. Safe for concurrent use.
// An informer over several namespaces is read as one.
type Lister[T runtime.Object] struct {
	src reader
}

// reader is what a Lister reads: the indexers holding a namespace's
// objects.
type reader interface {
	// readers returns the indexers that hold namespace's objects ("" for
	// all), or an error when the namespace is not cached.
	readers(namespace string) ([]cache.Indexer, error)
	groupResource() schema.GroupResource
	// hasIndex reports whether the index name was declared.
	hasIndex(name string) bool
}

// fixed is the reader of NewLister: one indexer.
type fixed struct {
	idx cache.Indexer
	gr  schema.GroupResource
}

func (f fixed) readers(string) ([]cache.Indexer, error) { return []cache.Indexer{f.idx}, nil }
func (f fixed) groupResource() schema.GroupResource     { return f.gr }
func (f fixed) hasIndex(name string) bool {
	// IndexKeys fails only for an undeclared index; unlike GetIndexers,
	// it reads under the store's lock.
	_, err := f.idx.IndexKeys(name, "")
	return err == nil
}

// NewLister returns a Lister[T] that reads indexer, whose keys must be
// namespace/name (name alone for cluster-scoped objects), as
// cache.MetaNamespaceKeyFunc makes them; gr names the resource in NotFound
// errors. ListInNamespace uses indexer's cache.NamespaceIndex when it has
// one and scans every object otherwise. For tests, and for caches built
// outside a Cache: a Lister from an Informer needs no NewLister.
func NewLister[T runtime.Object](indexer cache.Indexer, gr schema.GroupResource) Lister[T] {
	return Lister[T]{src: fixed{idx: indexer, gr: gr}}
}

// Get returns the object namespace/name (namespace empty for cluster-scoped
// objects), or an error for which apierrors.IsNotFound is true. A
// namespace the informer does not cache is an ErrNamespaceNotCached error,
// not NotFound.
func (l Lister[T]) Get(namespace, name string) (T, error) {
	var zero T
	obj, ok, err := lookup(l.src, namespace, name)
	switch {
	case err != nil:
		return zero, err
	case !ok:
		return zero, apierrors.NewNotFound(l.src.groupResource(), name)
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("informer: cache for %s holds %T, not %T", l.src.groupResource(), obj, zero)
	}
	return t, nil
}

// lookup returns the object namespace/name from the indexer of r that
// holds it, if any.
func lookup(r reader, namespace, name string) (any, bool, error) {
	idxs, err := r.readers(namespace)
	if err != nil {
		return nil, false, err
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	for _, idx := range idxs {
		obj, ok, err := idx.GetByKey(key)
		if err != nil || ok {
			return obj, ok, err
		}
	}
	return nil, false, nil
}

// List returns the objects in all namespaces that match selector; a nil
// selector matches everything.
func (l Lister[T]) List(selector labels.Selector) ([]T, error) {
	return l.ListInNamespace("", selector)
}

// ListInNamespace returns the objects in namespace that match selector; an
// empty namespace means all namespaces, a nil selector matches everything.
// A namespace the informer does not cache is an ErrNamespaceNotCached
// error.
func (l Lister[T]) ListInNamespace(namespace string, selector labels.Selector) ([]T, error) {
	if selector == nil {
		selector = labels.Everything()
	}
	idxs, err := l.src.readers(namespace)
	if err != nil {
		return nil, err
	}
	var out []T
	var bad error
	add := func(obj any) {
		t, ok := obj.(T)
		if !ok {
			var zero T
			bad = fmt.Errorf("informer: cache for %s holds %T, not %T", l.src.groupResource(), obj, zero)
			return
		}
		out = append(out, t)
	}
	for _, idx := range idxs {
		if err := listInNamespace(idx, namespace, selector, add); err != nil {
			return nil, err
		}
	}
	return out, bad
}

// indexersFor returns the indexers an informer of namespace ns ("": all
// namespaces, or a cluster-scoped resource) starts with: client-go's
// namespace index for an informer of all namespaces, none for an informer
// of one namespace, where it would file every object under the same value.
// Such an index is not only useless but costly: client-go leaves an
// object's entry alone when an update keeps its namespace, so the index
// keeps, for the life of the object, the key string made when the object
// was first cached, between whatever short-lived allocations surrounded
// it then (a sharded replica's keys arrive one by one during a move), and
// each such string keeps its page of the heap in use. (A Cache without a
// rest config builds built-in types' informers from a clientset's
// generated factory, whose informers always have the index.)
func indexersFor(ns string) cache.Indexers {
	if ns != metav1.NamespaceAll {
		return cache.Indexers{}
	}
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}

// listInNamespace calls add with each object of idx in namespace ("": all)
// that selector matches: through idx's namespace index if it has one, by a
// scan of every object otherwise (the indexer of one namespace's informer
// has none, and all its objects are in that namespace).
func listInNamespace(idx cache.Indexer, namespace string, selector labels.Selector, add cache.AppendFunc) error {
	if namespace == metav1.NamespaceAll {
		return cache.ListAll(idx, selector, add)
	}
	// IndexKeys fails only for an undeclared index, and no namespace is
	// named "/": the lookup allocates nothing.
	if _, err := idx.IndexKeys(cache.NamespaceIndex, "/"); err == nil {
		return cache.ListAllByNamespace(idx, namespace, selector, add)
	}
	return cache.ListAll(idx, selector, func(obj any) {
		if m, err := meta.Accessor(obj); err == nil && m.GetNamespace() == namespace {
			add(obj)
		}
	})
}
