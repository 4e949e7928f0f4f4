package objects_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

func TestFinalizers(t *testing.T) {
	const f = "example.ctrlkit.io/cleanup"
	tests := []struct {
		name        string
		have        []string
		op          func(metav1.Object, string) bool
		want        []string
		wantChanged bool
	}{
		{name: "add to none", op: objects.AddFinalizer, want: []string{f}, wantChanged: true},
		{name: "add keeps others", have: []string{"other"}, op: objects.AddFinalizer, want: []string{"other", f}, wantChanged: true},
		{name: "add present", have: []string{f, "other"}, op: objects.AddFinalizer, want: []string{f, "other"}},
		{name: "remove present", have: []string{"a", f, "b"}, op: objects.RemoveFinalizer, want: []string{"a", "b"}, wantChanged: true},
		{name: "remove every copy", have: []string{f, "a", f}, op: objects.RemoveFinalizer, want: []string{"a"}, wantChanged: true},
		{name: "remove last", have: []string{f}, op: objects.RemoveFinalizer, want: []string{}, wantChanged: true},
		{name: "remove absent", have: []string{"a"}, op: objects.RemoveFinalizer, want: []string{"a"}},
		{name: "remove from none", op: objects.RemoveFinalizer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := slices.Clone(tt.have)
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Finalizers: tt.have}}
			if changed := tt.op(obj, f); changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if !slices.Equal(obj.Finalizers, tt.want) {
				t.Errorf("finalizers = %q, want %q", obj.Finalizers, tt.want)
			}
			if !slices.Equal(tt.have, orig) {
				t.Errorf("the original slice was written to: %q, was %q", tt.have, orig)
			}
			if got, want := objects.HasFinalizer(obj, f), slices.Contains(tt.want, f); got != want {
				t.Errorf("HasFinalizer = %v, want %v", got, want)
			}
		})
	}
}

// TestAddFinalizerDoesNotShareSpareCapacity: appending into the spare
// capacity of a slice another object still holds would change that object.
func TestAddFinalizerDoesNotShareSpareCapacity(t *testing.T) {
	shared := make([]string, 1, 4)
	shared[0] = "a"
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Finalizers: shared}}
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Finalizers: shared}}
	objects.AddFinalizer(a, "x")
	objects.AddFinalizer(b, "y")
	if !slices.Equal(a.Finalizers, []string{"a", "x"}) || !slices.Equal(b.Finalizers, []string{"a", "y"}) {
		t.Errorf("finalizers a=%q b=%q, want [a x] and [a y]", a.Finalizers, b.Finalizers)
	}
}
