package informer_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// obj returns object metadata named name with the given generation,
// resourceVersion and labels.
func obj(name string, generation int64, rv string, labels map[string]string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: "default", Name: name, Generation: generation, ResourceVersion: rv, Labels: labels}
}

func added(o metav1.Object) informer.Event { return informer.Event{Type: informer.Added, Object: o} }
func deleted(o metav1.Object) informer.Event {
	return informer.Event{Type: informer.Deleted, Object: o}
}
func updated(oldObj, newObj metav1.Object) informer.Event {
	return informer.Event{Type: informer.Updated, Object: newObj, Old: oldObj}
}

func TestPredicates(t *testing.T) {
	base := obj("a", 1, "10", map[string]string{"app": "web"})
	never := func(informer.Event) bool { return false }
	always := func(informer.Event) bool { return true }
	tests := []struct {
		name string
		pred informer.Predicate
		ev   informer.Event
		want bool
	}{
		{"GenerationChanged passes adds", informer.GenerationChanged(), added(base), true},
		{"GenerationChanged passes deletes", informer.GenerationChanged(), deleted(base), true},
		{"GenerationChanged passes a spec change", informer.GenerationChanged(),
			updated(base, obj("a", 2, "11", map[string]string{"app": "web"})), true},
		{"GenerationChanged drops a status-only write", informer.GenerationChanged(),
			updated(base, obj("a", 1, "11", map[string]string{"app": "web"})), false},
		{"GenerationChanged drops a labels-only change", informer.GenerationChanged(),
			updated(base, obj("a", 1, "11", map[string]string{"app": "api"})), false},
		{"GenerationChanged drops updates of objects without generation", informer.GenerationChanged(),
			updated(obj("a", 0, "10", nil), obj("a", 0, "11", map[string]string{"x": "y"})), false},

		{"LabelsChanged passes adds", informer.LabelsChanged(), added(base), true},
		{"LabelsChanged passes deletes", informer.LabelsChanged(), deleted(base), true},
		{"LabelsChanged passes a changed value", informer.LabelsChanged(),
			updated(base, obj("a", 1, "11", map[string]string{"app": "api"})), true},
		{"LabelsChanged passes an added label", informer.LabelsChanged(),
			updated(base, obj("a", 1, "11", map[string]string{"app": "web", "tier": "1"})), true},
		{"LabelsChanged passes removed labels", informer.LabelsChanged(),
			updated(base, obj("a", 1, "11", nil)), true},
		{"LabelsChanged drops equal labels", informer.LabelsChanged(),
			updated(base, obj("a", 2, "11", map[string]string{"app": "web"})), false},
		{"LabelsChanged treats nil and empty labels as equal", informer.LabelsChanged(),
			updated(obj("a", 1, "10", nil), obj("a", 1, "11", map[string]string{})), false},

		{"ResourceVersionChanged passes adds", informer.ResourceVersionChanged(), added(base), true},
		{"ResourceVersionChanged passes deletes", informer.ResourceVersionChanged(), deleted(base), true},
		{"ResourceVersionChanged passes a real update", informer.ResourceVersionChanged(),
			updated(base, obj("a", 1, "11", map[string]string{"app": "web"})), true},
		{"ResourceVersionChanged drops a resync (same resourceVersion)", informer.ResourceVersionChanged(),
			updated(base, base), false},

		{"Filter passes a kept add", informer.Filter(named("a")), added(base), true},
		{"Filter drops another add", informer.Filter(named("b")), added(base), false},
		{"Filter passes a kept delete", informer.Filter(named("a")), deleted(base), true},
		{"Filter drops another delete", informer.Filter(named("b")), deleted(base), false},
		{"Filter judges the new object of an update", informer.Filter(named("b")),
			updated(obj("a", 1, "10", nil), obj("b", 1, "11", nil)), true},
		{"Filter ignores the old object of an update", informer.Filter(named("a")),
			updated(obj("a", 1, "10", nil), obj("b", 1, "11", nil)), false},

		{"Any of nothing drops", informer.Any(), added(base), false},
		{"Any passes when one passes", informer.Any(never, always), added(base), true},
		{"Any drops when none passes", informer.Any(never, never), added(base), false},
		{"Any(GenerationChanged, LabelsChanged) passes a labels-only change",
			informer.Any(informer.GenerationChanged(), informer.LabelsChanged()),
			updated(base, obj("a", 1, "11", map[string]string{"app": "api"})), true},
		{"Any(GenerationChanged, LabelsChanged) passes a spec-only change",
			informer.Any(informer.GenerationChanged(), informer.LabelsChanged()),
			updated(base, obj("a", 2, "11", map[string]string{"app": "web"})), true},
		{"Any(GenerationChanged, LabelsChanged) drops a status-only write",
			informer.Any(informer.GenerationChanged(), informer.LabelsChanged()),
			updated(base, obj("a", 1, "11", map[string]string{"app": "web"})), false},
		{"Any(GenerationChanged, LabelsChanged) passes deletes",
			informer.Any(informer.GenerationChanged(), informer.LabelsChanged()), deleted(base), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pred(tt.ev); got != tt.want {
				t.Errorf("predicate(%v event) = %v, want %v", tt.ev.Type, got, tt.want)
			}
		})
	}
}

func named(name string) func(metav1.Object) bool {
	return func(o metav1.Object) bool { return o.GetName() == name }
}
