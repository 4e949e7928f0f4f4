package informer

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Predicate decides whether an event reaches the queue.
type Predicate func(Event) bool

// GenerationChanged passes adds and deletes, and updates whose
// metadata.generation changed: spec changes, not status-only writes.
// Note that objects without a generation (ConfigMaps, say) never pass an
// update through it.
func GenerationChanged() Predicate {
	return func(ev Event) bool {
		return ev.Type != Updated || ev.Old.GetGeneration() != ev.Object.GetGeneration()
	}
}

// LabelsChanged passes adds and deletes, and updates whose labels changed.
func LabelsChanged() Predicate {
	return func(ev Event) bool {
		return ev.Type != Updated || !maps.Equal(ev.Old.GetLabels(), ev.Object.GetLabels())
	}
}

// ResourceVersionChanged drops periodic resyncs: updates whose
// resourceVersion did not change, because nothing did.
func ResourceVersionChanged() Predicate {
	return func(ev Event) bool {
		return ev.Type != Updated || ev.Old.GetResourceVersion() != ev.Object.GetResourceVersion()
	}
}

// Filter passes events whose object (the new one, for updates) satisfies
// keep.
func Filter(keep func(obj metav1.Object) bool) Predicate {
	return func(ev Event) bool { return keep(ev.Object) }
}

// Any passes an event if at least one of preds does, e.g.
// Any(GenerationChanged(), LabelsChanged()).
func Any(preds ...Predicate) Predicate {
	return func(ev Event) bool {
		for _, p := range preds {
			if p(ev) {
				return true
			}
		}
		return false
	}
}
