package informer

import (
	"errors"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// ErrIndexExists is returned (wrapped) by AddIndex when the informer
// already has an index of that name. An informer and its indexes are
// shared by every controller that declares the type: two controllers that
// want the same index, by the same function, may both declare it and
// ignore this error (the second function is not used).
var ErrIndexExists = errors.New("index already declared")

// ControllerIndex is the conventional name of an IndexByControllerOwner
// index, for controllers that share it.
const ControllerIndex = "controller"

// IndexFunc returns the keys under which obj is indexed: none, one or
// several (repeats are harmless). It is called with the cache's write lock
// held, so it must be fast, must not block and must not read the cache (a
// Lister call from it deadlocks); it must not mutate obj; and its result
// must depend on obj alone, because the keys of the old object are
// computed again, from the old object, to remove them on update and
// delete.
type IndexFunc[T runtime.Object] func(obj T) []string

// AddIndex declares the index name on inf's cache: each cached object is
// filed under the keys f returns for it, for Lister.ByIndex, and under
// namespace/key, for Lister.ByIndexInNamespace: two client-go indexes, so
// f runs twice per object stored. A name is declared once per informer: a
// second AddIndex with the same name, through any Informer value that For
// returned for the same type, fails with ErrIndexExists, as does a name
// client-go already uses (cache.NamespaceIndex). An empty name or a nil f
// is an error.
//
// AddIndex may be called before or after the Cache starts. Before, it
// records f and indexes nothing yet. After, it files every object already
// cached before it returns, holding the cache's write lock meanwhile:
// events and every Lister read of this informer wait for it, for a time
// proportional to the number of objects cached, and no event is applied
// to the index half built. Once AddIndex returns, ByIndex reflects every
// object cached and every later change. After the Cache's ctx is done and
// the informer has stopped, AddIndex fails.
//
// AddIndex is safe for concurrent use with itself, Lister reads and the
// informer's events. f runs on the informer's goroutine for events and on
// AddIndex's caller for the objects already cached. Objects that are not a
// T (only a cache fed outside ctrlkit holds any) are not indexed.
func AddIndex[T runtime.Object](inf *Informer[T], name string, f IndexFunc[T]) error {
	switch {
	case inf == nil:
		return fmt.Errorf("informer: AddIndex %q: the informer is nil: pass one from informer.For or informer.ForResource", name)
	case name == "":
		return errors.New("informer: AddIndex: the index name is empty: name it, e.g. informer.ControllerIndex")
	case f == nil:
		return fmt.Errorf("informer: AddIndex %q on %s: the index function is nil", name, inf.Name())
	}
	return inf.addIndex(name, Indexers(name, f))
}

// addIndex declares the index name, made of idx (the index and its
// companion), on every running part and on the parts to come.
func (e *entry) addIndex(name string, idx cache.Indexers) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed {
		return fmt.Errorf("informer: AddIndex %q on %s: %w", name, e.name, ErrRemoved)
	}
	if _, ok := e.indexers[name]; ok || name == cache.NamespaceIndex {
		return fmt.Errorf("informer: AddIndex %q on %s: %w: declare each name once per informer, or share the one declared",
			name, e.name, ErrIndexExists)
	}
	for _, p := range e.current() {
		// Both indexes in one call: one lock, so no reader sees one
		// without the other.
		if err := p.inf.AddIndexers(maps.Clone(idx)); err != nil {
			return fmt.Errorf("informer: AddIndex %q on %s: %w", name, e.name, err)
		}
	}
	if e.indexers == nil {
		e.indexers = make(cache.Indexers)
	}
	maps.Copy(e.indexers, idx)
	return nil
}

// Indexers returns the client-go indexers that AddIndex declares for the
// index name: name itself, keyed by f, and a companion keyed by
// namespace/key for ByIndexInNamespace. AddIndex needs no Indexers; it is
// for a cache.Indexer built outside a Cache and read through NewLister, as
// in a unit test:
//
//	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, informer.Indexers(informer.ControllerIndex, informer.IndexByControllerOwner[*corev1.ConfigMap]))
func Indexers[T runtime.Object](name string, f IndexFunc[T]) cache.Indexers {
	return cache.Indexers{
		name: func(obj any) ([]string, error) {
			t, ok := obj.(T)
			if !ok {
				return nil, nil
			}
			return f(t), nil
		},
		namespacedIndex(name): func(obj any) ([]string, error) {
			t, ok := obj.(T)
			if !ok {
				return nil, nil
			}
			m, err := meta.Accessor(obj)
			if err != nil || m.GetNamespace() == "" {
				// Cluster-scoped: found by ByIndex, which
				// ByIndexInNamespace("") is.
				return nil, nil
			}
			keys := f(t)
			if len(keys) == 0 {
				return nil, nil
			}
			ns := m.GetNamespace()
			out := make([]string, len(keys))
			for i, k := range keys {
				out[i] = ns + "/" + k
			}
			return out, nil
		},
	}
}

// namespacedIndex names the companion index of index, keyed by
// namespace/key. It is a separate index, not more keys in index, so that a
// key containing a slash never collides with a namespace/key.
func namespacedIndex(index string) string { return index + "\x00namespaced" }

// ByIndex returns the cached objects that the index declared with AddIndex
// files under key, in no particular order; none is an empty result, not an
// error. It fails, naming the index, when no index of that name was
// declared on this Lister's informer, and when the cache holds an object
// that is not a T. It takes the cache's read lock, so it waits while
// AddIndex files the objects already cached. The objects belong to the
// cache: DeepCopy before mutating. Safe for concurrent use.
func (l Lister[T]) ByIndex(index, key string) ([]T, error) {
	return l.byIndex("", index, index, key)
}

// ByIndexInNamespace is ByIndex for the objects in namespace only: one
// lookup of namespace/key in a companion index AddIndex maintains, not a
// filter over ByIndex's result. An empty namespace means all namespaces,
// as in ListInNamespace, and is the only way to find cluster-scoped
// objects. A namespace the informer does not cache is an
// ErrNamespaceNotCached error.
func (l Lister[T]) ByIndexInNamespace(namespace, index, key string) ([]T, error) {
	if namespace == "" {
		return l.ByIndex(index, key)
	}
	return l.byIndex(namespace, index, namespacedIndex(index), namespace+"/"+key)
}

// byIndex looks key up in the client-go index named in, for the index the
// user declared as index, in namespace's indexers.
func (l Lister[T]) byIndex(namespace, index, in, key string) ([]T, error) {
	undeclared := func(err error) error {
		if namespace == "" {
			return fmt.Errorf("informer: %s has no index %q: declare it with informer.AddIndex before reading it: %w", l.src.groupResource(), index, err)
		}
		return fmt.Errorf("informer: %s has no index %q for lookups by namespace: declare it with informer.AddIndex before reading it "+
			"(for a Lister from NewLister, give its indexer informer.Indexers): %w", l.src.groupResource(), index, err)
	}
	if !l.src.hasIndex(in) {
		return nil, undeclared(errors.New("not declared"))
	}
	idxs, err := l.src.readers(namespace)
	if err != nil {
		return nil, err
	}
	var objs []any
	for _, idx := range idxs {
		o, err := idx.ByIndex(in, key)
		if err != nil {
			return nil, undeclared(err)
		}
		objs = append(objs, o...)
	}
	return l.typed(objs)
}

func (l Lister[T]) typed(objs []any) ([]T, error) {
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		t, ok := obj.(T)
		if !ok {
			var zero T
			return nil, fmt.Errorf("informer: cache for %s holds %T, not %T", l.src.groupResource(), obj, zero)
		}
		out = append(out, t)
	}
	return out, nil
}

// IndexByControllerOwner is an IndexFunc that files an object under the
// ControllerKey of its controlling owner (the owner reference with
// controller: true), in the object's namespace; objects without one are
// not indexed. Pass it uninstantiated, T is inferred:
//
//	err := informer.AddIndex(configMaps, informer.ControllerIndex, informer.IndexByControllerOwner)
//	owned, err := configMaps.Lister().ByIndex(informer.ControllerIndex,
//		informer.ControllerKey(widgetGroupKind, w.Namespace, w.Name))
//
// The namespace in the key is the object's, which is the owner's for a
// namespaced owner: Kubernetes looks a namespaced owner up in its
// dependent's namespace. The dependents of a cluster-scoped owner are
// therefore filed per namespace; to find them in every namespace at once,
// declare an index of your own keyed by the owner's name.
func IndexByControllerOwner[T runtime.Object](obj T) []string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil
	}
	return []string{ControllerKey(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, m.GetNamespace(), ref.Name)}
}

// ControllerKey is the key under which IndexByControllerOwner files the
// objects controlled by the owner of kind gk named name, in namespace
// (empty for cluster-scoped objects): "Kind.group/namespace/name", or
// "Kind.group/name" without a namespace ("Kind" alone for the core group).
// The owner's API version is not part of it.
func ControllerKey(gk schema.GroupKind, namespace, name string) string {
	if namespace == "" {
		return gk.String() + "/" + name
	}
	return gk.String() + "/" + namespace + "/" + name
}
