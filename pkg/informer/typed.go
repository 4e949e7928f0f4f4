package informer

import (
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/internal/kube"
)

// Informer is a declared informer whose cache holds objects of type T.
type Informer[T runtime.Object] struct {
	*entry
	lister Lister[T]
}

// Lister reads the cache. It never calls the API server.
func (i *Informer[T]) Lister() Lister[T] { return i.lister }

// GroupVersionResource is the resource the informer watches.
func (i *Informer[T]) GroupVersionResource() schema.GroupVersionResource { return i.gvr }

// For declares, or returns the already declared, informer for the Go type T,
// a pointer to an API type registered in the Cache's scheme: a built-in
// type such as *corev1.ConfigMap (served by the SharedInformerFactory) or a
// custom type such as *v1alpha1.Website (listed and watched as JSON decoded
// straight into T, through a REST client built from Clients.Config, or
// through the dynamic client and converted to T when Config is nil; no
// generated clientset needed). With Config, the custom type's List type,
// named after its kind (WebsiteList), must be in the scheme too.
//
// Before the Cache starts, For consults the API server's discovery and fails
// if the server does not serve the type. After Start it only returns
// informers declared before, and otherwise fails with ErrNotDeclared.
func For[T runtime.Object](c *Cache) (*Informer[T], error) {
	// TypeFor, not TypeOf(zero): for an interface T the zero value is nil
	// and the error would name <nil> instead of T.
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("informer: For[%v]: T must be a pointer to an API struct, e.g. For[*corev1.ConfigMap]", rt)
	}
	gvks, _, err := c.scheme.ObjectKinds(reflect.New(rt.Elem()).Interface().(runtime.Object))
	if err != nil {
		return nil, fmt.Errorf("informer: For[%v]: type is not in the scheme: register it with its AddToScheme in informer.Options.Scheme: %w", rt, err)
	}
	gvk := gvks[0]
	mapping, err := c.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("informer: For[%v]: the API server does not serve %s (is its CRD installed?): %w", rt, gvk, err)
	} else if err != nil {
		return nil, fmt.Errorf("informer: For[%v]: could not read the API server's discovery to find the resource of %s: %w", rt, gvk, err)
	}
	gvr := mapping.Resource
	name := fmt.Sprintf("%s (%v)", gvrString(gvr), rt)
	decl := fmt.Sprintf("informer.For[%v]", rt)
	e, err := c.declare(entryKey{gvr: gvr, goType: rt}, name, decl, func() (built, error) {
		ns, tweak, err := c.scopeFor(rt, mapping.Scope.Name() != meta.RESTScopeNameRoot)
		if err != nil {
			return built{}, fmt.Errorf("informer: For[%v]: %w", rt, err)
		}
		if kube.BuiltIn(gvk, rt) {
			factory := c.factory
			if _, narrowed := c.byType[rt]; narrowed {
				// Its own factory: the shared one has one scope for all.
				factory = informers.NewSharedInformerFactoryWithOptions(c.clients.Kube, c.resyncFor(rt),
					informers.WithNamespace(ns), informers.WithTweakListOptions(tweak))
				c.factories = append(c.factories, factory)
			}
			gi, err := factory.ForResource(gvr)
			if err != nil {
				return built{}, fmt.Errorf("informer: For[%v]: %w", rt, err)
			}
			return built{inf: gi.Informer(), scope: newScope(ns, tweak)}, nil
		}
		if c.clients.Config == nil {
			inf := dynamicinformer.NewFilteredDynamicInformer(c.clients.Dynamic, gvr, ns, c.resyncFor(rt),
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, tweak).Informer()
			return built{inf: inf, scope: newScope(ns, tweak), owned: true, convert: toTyped(rt)}, nil
		}
		inf, err := c.typedInformer(rt, gvk, gvr, ns, tweak, name)
		if err != nil {
			return built{}, fmt.Errorf("informer: For[%v]: %w", rt, err)
		}
		return built{inf: inf, scope: newScope(ns, tweak), owned: true, convert: withKind(gvk)}, nil
	})
	if err != nil {
		return nil, err
	}
	return &Informer[T]{entry: e, lister: Lister[T]{indexer: e.inf.GetIndexer(), gr: gvr.GroupResource()}}, nil
}

// ForResource declares, or returns the already declared, informer for any
// resource as unstructured objects, through the dynamic client. The same
// declaration rules as For apply, and so do the entries of Options.ByType
// and Options.ResyncByType whose Go type the Cache's scheme maps to the
// resource's kind: the unstructured informer of a resource is narrowed and
// resynced like its typed one.
func ForResource(c *Cache, gvr schema.GroupVersionResource) (*Informer[*unstructured.Unstructured], error) {
	gvk, err := c.clients.Mapper.KindFor(gvr)
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("informer: ForResource(%s): the API server does not serve it (is its CRD installed?): %w", gvrString(gvr), err)
	} else if err != nil {
		return nil, fmt.Errorf("informer: ForResource(%s): could not read the API server's discovery to find it: %w", gvrString(gvr), err)
	}
	name := fmt.Sprintf("%s (unstructured)", gvrString(gvr))
	decl := fmt.Sprintf("informer.ForResource(%q)", gvrString(gvr))
	e, err := c.declare(entryKey{gvr: gvr, untyped: true}, name, decl, func() (built, error) {
		mapping, err := c.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return built{}, fmt.Errorf("informer: ForResource(%s): %w", gvrString(gvr), err)
		}
		// The Go type of the kind, if the scheme has one: ByType and
		// ResyncByType are keyed by it. Nil leaves the Cache's defaults.
		var rt reflect.Type
		if t, ok := c.scheme.AllKnownTypes()[gvk]; ok {
			rt = reflect.PointerTo(t)
		}
		ns, tweak, err := c.scopeFor(rt, mapping.Scope.Name() != meta.RESTScopeNameRoot)
		if err != nil {
			return built{}, fmt.Errorf("informer: ForResource(%s): %w", gvrString(gvr), err)
		}
		inf := dynamicinformer.NewFilteredDynamicInformer(c.clients.Dynamic, gvr, ns, c.resyncFor(rt),
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, tweak).Informer()
		return built{inf: inf, scope: newScope(ns, tweak), owned: true}, nil
	})
	if err != nil {
		return nil, err
	}
	return &Informer[*unstructured.Unstructured]{entry: e, lister: Lister[*unstructured.Unstructured]{indexer: e.inf.GetIndexer(), gr: gvr.GroupResource()}}, nil
}

// toTyped converts unstructured objects from the dynamic client into new
// values of the pointer type rt.
func toTyped(rt reflect.Type) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		out := reflect.New(rt.Elem()).Interface()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
			return nil, fmt.Errorf("converting %s %s/%s to %v: %w", u.GetKind(), u.GetNamespace(), u.GetName(), rt, err)
		}
		return out, nil
	}
}

func gvrString(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource + "." + gvr.Version
	}
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}

// Lister reads objects of type T from an informer's cache. The objects
// belong to the cache: DeepCopy before mutating. Safe for concurrent use.
type Lister[T runtime.Object] struct {
	indexer cache.Indexer
	gr      schema.GroupResource
}

// NewLister returns a Lister[T] that reads indexer, whose keys must be
// namespace/name (name alone for cluster-scoped objects), as
// cache.MetaNamespaceKeyFunc makes them; gr names the resource in NotFound
// errors. ListInNamespace uses indexer's cache.NamespaceIndex when it has
// one and scans every object otherwise. For tests, and for caches built
// outside a Cache: a Lister from an Informer needs no NewLister.
func NewLister[T runtime.Object](indexer cache.Indexer, gr schema.GroupResource) Lister[T] {
	return Lister[T]{indexer: indexer, gr: gr}
}

// Get returns the object namespace/name (namespace empty for cluster-scoped
// objects), or an error for which apierrors.IsNotFound is true.
func (l Lister[T]) Get(namespace, name string) (T, error) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	var zero T
	obj, ok, err := l.indexer.GetByKey(key)
	if err != nil {
		return zero, err
	}
	if !ok {
		return zero, apierrors.NewNotFound(l.gr, name)
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("informer: cache for %s holds %T, not %T", l.gr, obj, zero)
	}
	return t, nil
}

// List returns the objects in all namespaces that match selector; a nil
// selector matches everything.
func (l Lister[T]) List(selector labels.Selector) ([]T, error) {
	return l.ListInNamespace("", selector)
}

// ListInNamespace returns the objects in namespace that match selector; an
// empty namespace means all namespaces, a nil selector matches everything.
func (l Lister[T]) ListInNamespace(namespace string, selector labels.Selector) ([]T, error) {
	if selector == nil {
		selector = labels.Everything()
	}
	var out []T
	var bad error
	add := func(obj any) {
		t, ok := obj.(T)
		if !ok {
			var zero T
			bad = fmt.Errorf("informer: cache for %s holds %T, not %T", l.gr, obj, zero)
			return
		}
		out = append(out, t)
	}
	var err error
	if namespace == "" {
		err = cache.ListAll(l.indexer, selector, add)
	} else {
		err = cache.ListAllByNamespace(l.indexer, namespace, selector, add)
	}
	if err != nil {
		return nil, err
	}
	return out, bad
}
