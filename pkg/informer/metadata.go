package informer

import (
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// metadataType is the Go type of the objects a metadata-only informer
// caches; it is the goType of their entryKey, whatever the T of ForMetadata.
var metadataType = reflect.TypeFor[*metav1.PartialObjectMetadata]()

// ForMetadata declares, or returns the already declared, metadata-only
// informer of the Go type T's kind (T a pointer to an API type in the
// Cache's scheme, e.g. *corev1.Secret): it lists and watches only the
// objects' metadata (metav1.PartialObjectMetadata: name, namespace, labels,
// annotations, ownerReferences, finalizers, uid, resourceVersion and the
// other ObjectMeta fields, never spec, status or data), through client-go's
// metadata client.
// Watching Secrets or Pods cluster-wide only to map them to their owners
// then costs a fraction of the memory of For.
//
// The informer is scoped as For[T] would be: Options.Namespace,
// Options.ByType and Options.ResyncByType entries keyed by T's example
// object, Options.TweakListOptions, managedFields stripped. Its objects
// carry T's apiVersion and kind (v1, Secret), not the wire's
// meta.k8s.io/v1 PartialObjectMetadata, so that handlers and MapFuncs can
// tell what they are. It works with AddIndex (IndexByControllerOwner),
// Cache.AwaitWrite (a Write of T's resource), Handler and OwnerKey as any
// informer does.
//
// A resource has one informer: declaring T's kind with ForMetadata and
// with For or ForResource is an error, whichever comes second, naming the
// declaration that exists. The same declaration rules as For apply
// otherwise: it consults the API server's discovery (TypeOptions.WhenServed
// lets it wait for the API), and after Start the informer starts at once.
func ForMetadata[T runtime.Object](c *Cache, in ...*Scope) (*Informer[*metav1.PartialObjectMetadata], error) {
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("informer: ForMetadata[%v]: T must be a pointer to an API struct, e.g. ForMetadata[*corev1.Secret]", rt)
	}
	if rt == metadataType {
		return nil, fmt.Errorf("informer: ForMetadata[%v]: T names the kind to watch, e.g. ForMetadata[*corev1.Secret]", rt)
	}
	gvks, _, err := c.scheme.ObjectKinds(reflect.New(rt.Elem()).Interface().(runtime.Object))
	if err != nil {
		return nil, fmt.Errorf("informer: ForMetadata[%v]: type is not in the scheme: register it with its AddToScheme in informer.Options.Scheme (manager.Options.Scheme for a manager's cache): %w", rt, err)
	}
	gvk := gvks[0]
	scope, err := oneScope(fmt.Sprintf("informer: ForMetadata[%v]", rt), in)
	if err != nil {
		return nil, err
	}
	key := entryKey{gvk: gvk, goType: metadataType, scope: scope}
	if e := c.lookup(key); e != nil {
		return newInformer[*metav1.PartialObjectMetadata](e), nil
	}
	decl := fmt.Sprintf("informer.ForMetadata[%v]", rt)
	p, name, err := c.resolve(fmt.Sprintf("informer: ForMetadata[%v]", rt), rt, gvk, "metadata")
	if err != nil {
		return nil, err
	}
	e, err := c.declare(key, gvk.GroupKind(), rt, name, decl, p.resolved, func() (plan, error) {
		mc := c.built.metadata
		p.newInformer = func(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions), _ *sharer) (cache.SharedIndexInformer, error) {
			return metadatainformer.NewFilteredMetadataInformer(listingMetadata{Interface: mc}, gvr, ns, c.resyncFor(rt),
				indexersFor(ns), tweak).Informer(), nil
		}
		p.convert = withKind(gvk)
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return newInformer[*metav1.PartialObjectMetadata](e), nil
}

// conflict returns an error if kind gk is already declared with the other
// kind of informer: full objects (For, ForResource) against metadata only
// (ForMetadata, isMeta). A resource has one informer, so that its objects
// are cached once and every Lister of it agrees. decl is the declaration
// being made. Called under c.mu.
func (c *Cache) conflict(gk schema.GroupKind, isMeta bool, decl string) error {
	for _, e := range c.order {
		if e.gk != gk || (e.key.goType == metadataType) == isMeta {
			continue
		}
		return fmt.Errorf("informer: %s: %s is already declared as %s: a resource has one informer, "+
			"of full objects (informer.For, informer.ForResource) or of metadata only (informer.ForMetadata): pick one for every controller of the manager",
			decl, gk, e.name)
	}
	return nil
}
