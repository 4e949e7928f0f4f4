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
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
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
// custom type such as *v1alpha1.Website (listed through the dynamic client
// and converted to T once, before it enters the cache; no generated
// clientset needed).
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
	if err != nil {
		return nil, fmt.Errorf("informer: For[%v]: the API server does not serve %s (is its CRD installed?): %w", rt, gvk, err)
	}
	gvr := mapping.Resource
	name := fmt.Sprintf("%s (%v)", gvrString(gvr), rt)
	decl := fmt.Sprintf("informer.For[%v]", rt)
	e, err := c.declare(entryKey{gvr: gvr, goType: rt}, name, decl, func() (built, error) {
		ns, tweak, err := c.scopeFor(rt, mapping.Scope.Name() != meta.RESTScopeNameRoot)
		if err != nil {
			return built{}, fmt.Errorf("informer: For[%v]: %w", rt, err)
		}
		if builtin(gvk, rt) {
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
		inf := dynamicinformer.NewFilteredDynamicInformer(c.clients.Dynamic, gvr, ns, c.resyncFor(rt),
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, tweak).Informer()
		return built{inf: inf, scope: newScope(ns, tweak), owned: true, convert: toTyped(rt)}, nil
	})
	if err != nil {
		return nil, err
	}
	return &Informer[T]{entry: e, lister: Lister[T]{indexer: e.inf.GetIndexer(), gr: gvr.GroupResource()}}, nil
}

// ForResource declares, or returns the already declared, informer for any
// resource as unstructured objects, through the dynamic client. The same
// declaration rules as For apply.
func ForResource(c *Cache, gvr schema.GroupVersionResource) (*Informer[*unstructured.Unstructured], error) {
	if _, err := c.clients.Mapper.KindFor(gvr); err != nil {
		return nil, fmt.Errorf("informer: ForResource(%s): the API server does not serve it (is its CRD installed?): %w", gvrString(gvr), err)
	}
	name := fmt.Sprintf("%s (unstructured)", gvrString(gvr))
	decl := fmt.Sprintf("informer.ForResource(%q)", gvrString(gvr))
	e, err := c.declare(entryKey{gvr: gvr, untyped: true}, name, decl, func() (built, error) {
		ns := c.opts.Namespace
		if scoped, err := isNamespaced(c.clients.Mapper, gvr); err != nil {
			return built{}, err
		} else if !scoped {
			ns = ""
		}
		inf := dynamicinformer.NewFilteredDynamicInformer(c.clients.Dynamic, gvr, ns, c.opts.Resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, c.opts.TweakListOptions).Informer()
		return built{inf: inf, scope: newScope(ns, c.opts.TweakListOptions), owned: true}, nil
	})
	if err != nil {
		return nil, err
	}
	return &Informer[*unstructured.Unstructured]{entry: e, lister: Lister[*unstructured.Unstructured]{indexer: e.inf.GetIndexer(), gr: gvr.GroupResource()}}, nil
}

// builtin reports whether client-go's typed informers serve gvk with Go
// type rt, so the shared factory can be used.
func builtin(gvk schema.GroupVersionKind, rt reflect.Type) bool {
	t, ok := kubescheme.Scheme.AllKnownTypes()[gvk]
	return ok && reflect.PointerTo(t) == rt
}

func isNamespaced(m meta.RESTMapper, gvr schema.GroupVersionResource) (bool, error) {
	gvk, err := m.KindFor(gvr)
	if err != nil {
		return false, err
	}
	mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
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
