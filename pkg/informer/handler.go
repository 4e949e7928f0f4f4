package informer

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// EventType says what happened to an object.
type EventType int

// The event types an informer delivers.
const (
	Added EventType = iota
	Updated
	Deleted
)

func (t EventType) String() string {
	switch t {
	case Added:
		return "add"
	case Updated:
		return "update"
	case Deleted:
		return "delete"
	}
	return "unknown"
}

// Event is one informer notification, as predicates see it. Object is the
// object after the event (the last known state for deletes); Old is set for
// updates only. Both belong to the cache: do not mutate them.
type Event struct {
	Type   EventType
	Object metav1.Object
	Old    metav1.Object
	// InitialList is true for adds delivered while the informer lists the
	// objects that existed when it started.
	InitialList bool
}

// MapFunc turns an object into the keys to reconcile. It must not block or
// mutate obj.
type MapFunc func(obj metav1.Object) []types.NamespacedName

// ObjectKey maps an object to its own key.
func ObjectKey() MapFunc {
	return func(obj metav1.Object) []types.NamespacedName {
		return []types.NamespacedName{keyOf(obj)}
	}
}

// keyOf is obj's own key.
func keyOf(obj metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// OwnerKey maps an object to its controlling owner when that owner is of
// the namespaced kind owner (for example apps/Deployment), in the object's
// namespace. Objects without such an owner map to nothing.
func OwnerKey(owner schema.GroupKind) MapFunc {
	return ownerKey(owner, false)
}

// ClusterOwnerKey is OwnerKey for a cluster-scoped owner kind (for example
// /Namespace): the key has no namespace.
func ClusterOwnerKey(owner schema.GroupKind) MapFunc {
	return ownerKey(owner, true)
}

func ownerKey(owner schema.GroupKind, clusterScoped bool) MapFunc {
	return func(obj metav1.Object) []types.NamespacedName {
		ref := metav1.GetControllerOfNoCopy(obj)
		if ref == nil || ref.Kind != owner.Kind {
			return nil
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != owner.Group {
			return nil
		}
		key := types.NamespacedName{Name: ref.Name}
		if !clusterScoped {
			key.Namespace = obj.GetNamespace()
		}
		return []types.NamespacedName{key}
	}
}

// Handler turns informer events into keys: an event passes only if every
// predicate returns true, then Map (ObjectKey when nil) names the keys. For
// updates both the old and the new object are mapped, so a child that moves
// from one owner to another reaches both.
type Handler struct {
	Map        MapFunc
	Predicates []Predicate
}

// Enqueue receives the keys a Handler produces. It must not block.
type Enqueue func(key types.NamespacedName, ev Event)

// ResourceEventHandler returns a client-go event handler that feeds enqueue.
// Deletes that arrive as cache.DeletedFinalStateUnknown tombstones are
// unwrapped; objects without metadata are ignored.
func (h Handler) ResourceEventHandler(enqueue Enqueue) cache.ResourceEventHandler {
	mapf := h.Map
	emit := func(ev Event) {
		for _, p := range h.Predicates {
			if !p(ev) {
				return
			}
		}
		if mapf == nil {
			// The object's own key, as ObjectKey maps it, without the
			// slices a MapFunc returns: this runs for every event.
			k := keyOf(ev.Object)
			enqueue(k, ev)
			if ev.Old != nil {
				if old := keyOf(ev.Old); old != k {
					enqueue(old, ev)
				}
			}
			return
		}
		keys := mapf(ev.Object)
		if ev.Old != nil {
			// Clone first: appending to the slice mapf returned could
			// write into an array the MapFunc still owns.
			keys = slices.Clone(keys)
			for _, k := range mapf(ev.Old) {
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
		for _, k := range keys {
			enqueue(k, ev)
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if o := metaOf(obj); o != nil {
				emit(Event{Type: Added, Object: o, InitialList: initial})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := metaOf(oldObj), metaOf(newObj)
			if o != nil && n != nil {
				emit(Event{Type: Updated, Object: n, Old: o})
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o := metaOf(obj); o != nil {
				emit(Event{Type: Deleted, Object: o})
			}
		},
	}
}

func metaOf(obj any) metav1.Object {
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return o
}
