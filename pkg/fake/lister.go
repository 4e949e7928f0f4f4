package fake

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// Lister returns a lister over the fake's objects of T's kind (T a pointer
// to a Go type the scheme serves, such as *corev1.ConfigMap), as an
// informer cache would hold them. Unlike a real cache it is never behind:
// every accepted write reaches it before the response does, so a
// Reconciler reads its own writes at once. Dry-run writes do not reach it.
//
// Listers of the same kind share one cache. Its objects must not be
// mutated (DeepCopy first), as with any informer cache. Lister fails if T
// is not a kind the fake serves.
func Lister[T runtime.Object](c *Cluster) (informer.Lister[T], error) {
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
		return informer.Lister[T]{}, fmt.Errorf("fake: Lister[%v]: T must be a pointer to an API struct, e.g. Lister[*corev1.ConfigMap]", rt)
	}
	r, ok := c.res.forObject(c.scheme, reflect.New(rt.Elem()).Interface().(runtime.Object))
	if !ok || reflect.PointerTo(r.goType) != rt {
		return informer.Lister[T]{}, fmt.Errorf("fake: Lister[%v]: the type is not a kind the scheme serves: register it in fake.Options.Scheme", rt)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ix := c.listers[r.gvr]
	if ix == nil {
		ix = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, obj := range c.objects[r.gvr] {
			// Errors come only from the key and index functions, which
			// cannot fail on an object with metadata.
			_ = ix.Add(obj.DeepCopyObject())
		}
		c.listers[r.gvr] = ix
	}
	return informer.NewLister[T](ix, r.groupResource()), nil
}
