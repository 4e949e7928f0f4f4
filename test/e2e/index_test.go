package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestIndexOwnedConfigMaps: a Widget controller counts the ConfigMaps it
// controls through an IndexByControllerOwner index (ByIndexInNamespace)
// and writes the count to the Widget's status with Status().Update (the
// e2e CRD's status has one integer, observedSize, which carries it).
// Creating, deleting and re-parenting ConfigMaps moves the counts; a
// ConfigMap that only references a Widget without controlling it, or
// controlled by another Widget, is not counted.
func TestIndexOwnedConfigMaps(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{Scheme: newScheme(t)})
	widgets, err := informer.For[*Widget](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if err := informer.AddIndex(cms, informer.ControllerIndex, informer.IndexByControllerOwner); err != nil {
		t.Fatal(err)
	}
	widgetGK := schema.GroupKind{Group: e2eGV.Group, Kind: "Widget"}
	_, err = mgr.AddController("widget-configmaps", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		w, err := widgets.Lister().Get(req.Namespace, req.Name)
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		owned, err := cms.Lister().ByIndexInNamespace(req.Namespace, informer.ControllerIndex,
			informer.ControllerKey(widgetGK, req.Namespace, req.Name))
		if err != nil {
			return reconcile.Result{}, err
		}
		if int(w.Status.ObservedSize) == len(owned) {
			return reconcile.Result{}, nil
		}
		w = w.DeepCopy() // the cache's object is shared
		w.Status.ObservedSize = int32(len(owned))
		return reconcile.Result{}, mgr.Client().Status().Update(ctx, w)
	}), manager.ControllerOptions{},
		manager.Watch{Source: widgets},
		manager.Watch{Source: cms, Map: informer.OwnerKey(widgetGK)})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)

	wa := createWidget(t, ns, "a")
	wb := createWidget(t, ns, "b")
	// count reads the count in Widget name's status on the server; -1 if
	// it cannot.
	count := func(name string) int64 {
		u, err := dyn.Resource(widgetGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return -1
		}
		n, _, err := unstructured.NestedInt64(u.Object, "status", "observedSize")
		if err != nil {
			return -1
		}
		return n
	}
	want := func(step string, a, b int64) {
		t.Helper()
		eventually(t, waitTimeout, func() bool { return count("a") == a && count("b") == b },
			"after %s: Widgets a and b to count %d and %d ConfigMaps (now %v)", step, a, b,
			later(func() any { return []int64{count("a"), count("b")} }))
	}

	cmAPI := kube.CoreV1().ConfigMaps(ns)
	create := func(name string, refs ...metav1.OwnerReference) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: refs}}
		if _, err := cmAPI.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ConfigMap %s: %v", name, err)
		}
	}
	create("a-1", controlledBy(wa))
	create("a-2", controlledBy(wa))
	create("b-1", controlledBy(wb))
	create("refers-to-a", referenceTo(wa)) // an owner, not the controller
	create("plain")
	want("creating a-1, a-2 and b-1", 2, 1)

	if err := cmAPI.Delete(t.Context(), "a-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want("deleting a-1", 1, 1)

	b1, err := cmAPI.Get(t.Context(), "b-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b1.OwnerReferences = []metav1.OwnerReference{controlledBy(wa)}
	if _, err := cmAPI.Update(t.Context(), b1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want("moving b-1 from b to a", 2, 0)

	create("a-3", controlledBy(wa))
	want("creating a-3", 3, 0)
}

// createWidget creates Widget namespace/name through the admin client.
func createWidget(t *testing.T, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(widgetGVR).Namespace(namespace).Create(t.Context(), widgetObject(namespace, name, 1, ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Widget %s: %v", name, err)
	}
	return u
}

// controlledBy is an owner reference to w with controller: true.
func controlledBy(w *unstructured.Unstructured) metav1.OwnerReference {
	ref := referenceTo(w)
	isController := true
	ref.Controller = &isController
	return ref
}

// referenceTo is an owner reference to w that does not make it the
// controller.
func referenceTo(w *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: e2eGV.String(), Kind: "Widget", Name: w.GetName(), UID: w.GetUID()}
}
