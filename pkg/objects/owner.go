package objects

import (
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// ErrAlreadyControlled is returned (wrapped) by SetControllerReference when
// the child already has a controller other than the owner. An object has
// at most one controller; taking it over is a decision for a human.
var ErrAlreadyControlled = errors.New("object already has another controller")

// SetControllerReference makes owner, whose kind is ownerGVK, the
// controller of child: it adds an ownerReference with Controller and
// BlockOwnerDeletion true, keeping child's other owner references. The
// garbage collector then deletes child when owner is deleted, and
// informer.OwnerKey maps child's events to owner. A reference to the same
// group, kind and name is replaced in place, whatever its UID: the
// children left by an owner that was deleted and created again (before
// the garbage collector came) are adopted.
//
// owner must have been read from the API server (it needs a UID). It fails,
// changing nothing, when child is controlled by another object (wrapping
// ErrAlreadyControlled) and for references the garbage collector does not
// honour: a cluster-scoped child of a namespaced owner, or a child in
// another namespace than its owner. Calling it again with the same owner
// leaves child unchanged. child must be the caller's own copy.
func SetControllerReference(owner, child metav1.Object, ownerGVK schema.GroupVersionKind) error {
	switch {
	case ownerGVK.Kind == "" || ownerGVK.Version == "":
		return fmt.Errorf("objects: owner kind %q lacks a kind or version: pass e.g. v1alpha1.GroupVersion.WithKind(\"Website\")", ownerGVK)
	case owner.GetName() == "" || owner.GetUID() == "":
		return fmt.Errorf("objects: owner %s %q has no name or UID: pass the owner as read from the cache or the API server", ownerGVK.Kind, owner.GetName())
	case owner.GetNamespace() != "" && child.GetNamespace() == "":
		return fmt.Errorf("objects: cluster-scoped %q cannot be controlled by %s %s/%s: a namespaced owner can only own objects in its namespace",
			child.GetName(), ownerGVK.Kind, owner.GetNamespace(), owner.GetName())
	case owner.GetNamespace() != "" && child.GetNamespace() != owner.GetNamespace():
		return fmt.Errorf("objects: %s/%s cannot be controlled by %s %s/%s: owner references do not cross namespaces",
			child.GetNamespace(), child.GetName(), ownerGVK.Kind, owner.GetNamespace(), owner.GetName())
	}
	ref := metav1.OwnerReference{
		APIVersion:         ownerGVK.GroupVersion().String(),
		Kind:               ownerGVK.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
	if c := metav1.GetControllerOfNoCopy(child); c != nil && !sameObject(*c, ref) {
		return fmt.Errorf("objects: %s is controlled by %s %q, so %s %q cannot control it: %w",
			keyOf(child), c.Kind, c.Name, ref.Kind, ref.Name, ErrAlreadyControlled)
	}
	refs := slices.Clone(child.GetOwnerReferences())
	if i := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return sameObject(r, ref) }); i >= 0 {
		refs[i] = ref // the same owner, possibly recreated under a new UID
	} else {
		refs = append(refs, ref)
	}
	child.SetOwnerReferences(refs)
	return nil
}

// sameObject reports whether two references name the same object: the same
// group, kind and name (the version may differ).
func sameObject(a, b metav1.OwnerReference) bool {
	ag, errA := schema.ParseGroupVersion(a.APIVersion)
	bg, errB := schema.ParseGroupVersion(b.APIVersion)
	return errA == nil && errB == nil && ag.Group == bg.Group && a.Kind == b.Kind && a.Name == b.Name
}

func keyOf(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
