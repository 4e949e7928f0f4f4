package fake

import (
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// A lister holds a kind's objects in one of the three forms an informer
// caches them in.
type form int

const (
	typedForm        form = iota // informer.For: the Go type
	metadataForm                 // informer.ForMetadata: *metav1.PartialObjectMetadata
	unstructuredForm             // informer.ForResource: *unstructured.Unstructured
)

// listerKey names the lister of one resource in one form.
type listerKey struct {
	gvr  schema.GroupVersionResource
	form form
}

// Lister returns a lister over the fake's objects of T's kind (T a pointer
// to a Go type the scheme serves, such as *corev1.ConfigMap), as the cache
// of informer.For[T] would hold them. Unlike a real cache it is never
// behind: every accepted write reaches it before the response does, so a
// Reconciler reads its own writes at once. Dry-run writes do not reach it.
//
// indexes are declared on it, for Lister.ByIndex and ByIndexInNamespace:
// build each with informer.Indexers, from the same informer.IndexFunc the
// Reconciler's informer.AddIndex uses.
//
// Listers of the same kind and form share one cache, and so its indexes:
// an index name is declared once per Cluster and form, and declaring it
// again fails with informer.ErrIndexExists. Its objects must not be
// mutated (DeepCopy first), as with any informer cache. Lister fails if T
// is not a kind the fake serves.
func Lister[T runtime.Object](c *Cluster, indexes ...cache.Indexers) (informer.Lister[T], error) {
	rt := reflect.TypeFor[T]()
	where := fmt.Sprintf("fake: Lister[%v]", rt)
	switch rt {
	case reflect.TypeFor[*metav1.PartialObjectMetadata]():
		return informer.Lister[T]{}, fmt.Errorf("%s: a metadata-only lister is of a kind: use fake.MetadataLister[T], T the kind's Go type, as informer.ForMetadata[T]", where)
	case reflect.TypeFor[*unstructured.Unstructured]():
		return informer.Lister[T]{}, fmt.Errorf("%s: an unstructured lister is of a resource: use fake.ResourceLister(c, gvr), as informer.ForResource", where)
	}
	r, err := c.kindOf(where, rt)
	if err != nil {
		return informer.Lister[T]{}, err
	}
	ix, err := c.lister(where, listerKey{r.gvr, typedForm}, r, indexes)
	if err != nil {
		return informer.Lister[T]{}, err
	}
	return informer.NewLister[T](ix, r.groupResource()), nil
}

// MetadataLister returns a lister over the metadata of the fake's objects
// of T's kind (T as for Lister), as the cache of informer.ForMetadata[T]
// would hold them: *metav1.PartialObjectMetadata whose TypeMeta names the
// kind. It is never behind, and takes indexes, as Lister's does; build
// them with informer.Indexers[*metav1.PartialObjectMetadata].
func MetadataLister[T runtime.Object](c *Cluster, indexes ...cache.Indexers) (informer.Lister[*metav1.PartialObjectMetadata], error) {
	where := fmt.Sprintf("fake: MetadataLister[%v]", reflect.TypeFor[T]())
	r, err := c.kindOf(where, reflect.TypeFor[T]())
	if err != nil {
		return informer.Lister[*metav1.PartialObjectMetadata]{}, err
	}
	ix, err := c.lister(where, listerKey{r.gvr, metadataForm}, r, indexes)
	if err != nil {
		return informer.Lister[*metav1.PartialObjectMetadata]{}, err
	}
	return informer.NewLister[*metav1.PartialObjectMetadata](ix, r.groupResource()), nil
}

// ResourceLister returns a lister over the fake's objects of resource gvr
// as unstructured objects, as the cache of informer.ForResource would hold
// them. It is never behind, and takes indexes, as Lister's does; build
// them with informer.Indexers[*unstructured.Unstructured].
func ResourceLister(c *Cluster, gvr schema.GroupVersionResource, indexes ...cache.Indexers) (informer.Lister[*unstructured.Unstructured], error) {
	where := fmt.Sprintf("fake: ResourceLister(%s)", gvr)
	r, ok := c.res.byGVR[gvr]
	if !ok {
		return informer.Lister[*unstructured.Unstructured]{}, fmt.Errorf("%s: the fake serves no such resource: register its kind in fake.Options.Scheme, and name the resource in the plural, e.g. {Version: \"v1\", Resource: \"configmaps\"}", where)
	}
	ix, err := c.lister(where, listerKey{r.gvr, unstructuredForm}, r, indexes)
	if err != nil {
		return informer.Lister[*unstructured.Unstructured]{}, err
	}
	return informer.NewLister[*unstructured.Unstructured](ix, r.groupResource()), nil
}

// kindOf returns the resource that serves Go type rt.
func (c *Cluster) kindOf(where string, rt reflect.Type) (*resource, error) {
	if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s: T must be a pointer to an API struct, e.g. *corev1.ConfigMap", where)
	}
	obj, ok := reflect.New(rt.Elem()).Interface().(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("%s: T is not a runtime.Object", where)
	}
	r, ok := c.res.forObject(c.scheme, obj)
	if !ok || reflect.PointerTo(r.goType) != rt {
		return nil, fmt.Errorf("%s: the type is not a kind the scheme serves: register it in fake.Options.Scheme", where)
	}
	return r, nil
}

// lister returns the cache of key, made and filled the first time, with
// indexes declared on it.
func (c *Cluster) lister(where string, key listerKey, r *resource, indexes []cache.Indexers) (cache.Indexer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ix := c.listers[key]
	if ix == nil {
		ix = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, obj := range c.objects[r.gvr] {
			if err := ix.Add(inForm(key.form, r, obj)); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		c.listers[key] = ix
	}
	for _, idx := range indexes {
		for name := range idx {
			if _, ok := ix.GetIndexers()[name]; ok {
				return nil, fmt.Errorf("%s: index %q: %w: listers of one kind share their cache, so declare each index once per Cluster", where, name, informer.ErrIndexExists)
			}
		}
		if err := ix.AddIndexers(idx); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return ix, nil
}

// updateListers brings every lister of r up to date with the change of
// stored (removed when deleted). Called under c.mu.
func (c *Cluster) updateListers(r *resource, stored runtime.Object, deleted bool) {
	for f := typedForm; f <= unstructuredForm; f++ {
		ix := c.listers[listerKey{r.gvr, f}]
		if ix == nil {
			continue
		}
		// Errors come only from the key function, which cannot fail on an
		// object with metadata (client-go panics on an index function's).
		// A delete needs only the key: the indexer unfiles what it holds.
		if deleted {
			_ = ix.Delete(stored)
		} else {
			_ = ix.Add(inForm(f, r, stored))
		}
	}
}

// inForm is a copy of the stored object obj of r in form f, as the
// informer of that form caches it.
func inForm(f form, r *resource, obj runtime.Object) runtime.Object {
	switch f {
	case metadataForm:
		// What a metadata-only request is answered with, in the informer's
		// TypeMeta.
		p := partial(obj).DeepCopy()
		p.TypeMeta = metav1.TypeMeta{APIVersion: r.gvk.GroupVersion().String(), Kind: r.gvk.Kind}
		return p
	case unstructuredForm:
		// Cannot fail: the object is one of the scheme's, stored after a
		// JSON round trip.
		content, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(r.gvk)
		return u
	}
	return obj.DeepCopyObject()
}
