package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestConfigMapEventsReachReconcile: creating, updating and deleting a
// watched object each reach Reconcile with the object's own key, and the
// lister already shows the change that caused the call.
func TestConfigMapEventsReachReconcile(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	_, err = mgr.AddController("configmaps", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		note := "absent"
		cm, err := cms.Lister().Get(req.Namespace, req.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			note = "lister error: " + err.Error()
		default:
			note = "v=" + cm.Data["v"]
		}
		rec.add(req, time.Now(), note)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: cms})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)

	a, b := key(ns, "a"), key(ns, "b")
	createConfigMap(t, ns, "a", map[string]string{"v": "1"}, nil)
	createConfigMap(t, ns, "b", map[string]string{"v": "1"}, nil)
	eventually(t, waitTimeout, func() bool { return rec.sawNote(a, "v=1") && rec.sawNote(b, "v=1") },
		"creates of %s and %s to reach Reconcile (a: %v, b: %v)", a, b, rec.notesLater(a), rec.notesLater(b))

	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, func() bool { return rec.sawNote(a, "v=2") }, "the update of %s to reach Reconcile (notes %v)", a, rec.notesLater(a))

	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, func() bool { return rec.sawNote(a, "absent") }, "the delete of %s to reach Reconcile (notes %v)", a, rec.notesLater(a))

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	for _, c := range rec.all() {
		if c.req != a && c.req != b {
			t.Errorf("Reconcile called with %+v (namespace %q, name %q); only %s and %s exist", c.req, c.req.Namespace, c.req.Name, a, b)
		}
	}
	if notes := rec.notes(b); slices.ContainsFunc(notes, func(n string) bool { return n != "v=1" }) {
		t.Errorf("untouched %s was reconciled with notes %q, want only v=1", b, notes)
	}
}

// TestChildEventsReachOwner: with informer.OwnerKey, the create, update and
// delete of a child Secret enqueue its controlling ConfigMap's key; a child
// moved to another owner reaches both; Secrets without a controlling
// ConfigMap owner enqueue nothing.
func TestChildEventsReachOwner(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{})
	secrets, err := informer.For[*corev1.Secret](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	// The reconciler notes what the child looks like in the cache, which
	// tells which of the child's events the call came after.
	_, err = mgr.AddController("owners", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		note := "child absent"
		if s, err := secrets.Lister().Get(req.Namespace, "child"); err == nil {
			note = "child v=" + string(s.Data["v"])
			if ref := metav1.GetControllerOf(s); ref != nil {
				note += " of " + ref.Name
			}
		}
		rec.add(req, time.Now(), note)
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{}, manager.Watch{Source: secrets, Map: informer.OwnerKey(schema.GroupKind{Kind: "ConfigMap"})})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, mgr)

	owner := createConfigMap(t, ns, "owner", nil, nil)
	owner2 := createConfigMap(t, ns, "owner2", nil, nil)
	other := createConfigMap(t, ns, "other", nil, nil)
	ref := func(apiVersion, kind, name string, uid types.UID, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(controller)}}
	}
	// Created before the child, so their events are delivered first: had
	// they enqueued a key, it would have been reconciled by the time the
	// child's key is.
	for name, refs := range map[string][]metav1.OwnerReference{
		"loose":    nil,                                                    // no owner
		"shared":   ref("v1", "ConfigMap", "other", other.UID, false),      // an owner, but not the controller
		"deployed": ref("apps/v1", "Deployment", "other", other.UID, true), // controlled by another kind
	} {
		createSecret(t, ns, name, "1", refs)
	}
	createSecret(t, ns, "child", "1", ref("v1", "ConfigMap", "owner", owner.UID, true))

	first, second := key(ns, "owner"), key(ns, "owner2")
	waitNote := func(req reconcile.Request, note, what string) {
		t.Helper()
		eventually(t, waitTimeout, func() bool { return rec.sawNote(req, note) }, "%s to reach %s (notes %v)", what, req, rec.notesLater(req))
	}
	waitNote(first, "child v=1 of owner", "the child's create")

	update := func(change func(*corev1.Secret)) {
		t.Helper()
		s, err := kube.CoreV1().Secrets(ns).Get(t.Context(), "child", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(s)
		if _, err := kube.CoreV1().Secrets(ns).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(func(s *corev1.Secret) { s.Data["v"] = []byte("2") })
	waitNote(first, "child v=2 of owner", "the child's update")

	// Both the old object (owned by owner) and the new one (owner2) map.
	update(func(s *corev1.Secret) { s.OwnerReferences = ref("v1", "ConfigMap", "owner2", owner2.UID, true) })
	waitNote(first, "child v=2 of owner2", "the child's move away")
	waitNote(second, "child v=2 of owner2", "the child's move")

	if err := kube.CoreV1().Secrets(ns).Delete(t.Context(), "child", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNote(second, "child absent", "the child's delete")

	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	for _, c := range rec.all() {
		if c.req != first && c.req != second {
			t.Errorf("Reconcile called with %s; only %s and %s have controlled children", c.req, first, second)
		}
	}
}

// createSecret creates namespace/name with data v=value and owners.
func createSecret(t testing.TB, namespace, name, value string, owners []metav1.OwnerReference) {
	t.Helper()
	_, err := kube.CoreV1().Secrets(namespace).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, OwnerReferences: owners},
		Data:       map[string][]byte{"v": []byte(value)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Secret %s/%s: %v", namespace, name, err)
	}
}
