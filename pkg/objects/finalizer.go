package objects

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddFinalizer appends f to obj's finalizers unless it is there already,
// and reports whether it changed obj. obj must be the caller's own copy.
func AddFinalizer(obj metav1.Object, f string) bool {
	fs := obj.GetFinalizers()
	if slices.Contains(fs, f) {
		return false
	}
	// Clip so that append allocates: the old slice may still be shared.
	obj.SetFinalizers(append(slices.Clip(fs), f))
	return true
}

// RemoveFinalizer removes every occurrence of f from obj's finalizers, and
// reports whether it changed obj. obj must be the caller's own copy.
func RemoveFinalizer(obj metav1.Object, f string) bool {
	fs := obj.GetFinalizers()
	if !slices.Contains(fs, f) {
		return false
	}
	obj.SetFinalizers(slices.DeleteFunc(slices.Clone(fs), func(s string) bool { return s == f }))
	return true
}

// HasFinalizer reports whether obj's finalizers include f.
func HasFinalizer(obj metav1.Object, f string) bool {
	return slices.Contains(obj.GetFinalizers(), f)
}
