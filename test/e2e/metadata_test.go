package e2e

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// TestMetadataSecretsMappedToOwners: a Widget controller watches Secrets
// metadata-only (informer.ForMetadata, through client-go's metadata client
// built from the manager's config, against a real API server) and maps them
// to their controlling Widget with OwnerKey. Creating and then relabelling
// an owned Secret reconciles its Widget; the cached Secrets hold their
// metadata and kind, no data; a Secret owned by nothing reconciles no
// Widget.
func TestMetadataSecretsMappedToOwners(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{Scheme: newScheme(t)})
	widgets, err := informer.For[*Widget](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informer.ForMetadata[*corev1.Secret](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := informer.For[*corev1.Secret](mgr.Cache()); err == nil {
		t.Fatal("For[*corev1.Secret] after ForMetadata: no error; a resource has one informer")
	}
	var mu sync.Mutex
	reconciled := map[string]int{} // reconciles per Widget name
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return reconciled[name]
	}
	widgetGK := schema.GroupKind{Group: e2eGV.Group, Kind: "Widget"}
	_, err = mgr.AddController("widget-secrets", reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		reconciled[req.Name]++
		mu.Unlock()
		return reconcile.Result{}, nil
	}), manager.ControllerOptions{},
		manager.Watch{Source: widgets},
		manager.Watch{Source: secrets, Map: informer.OwnerKey(widgetGK)})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)

	wa := createWidget(t, ns, "a")
	createWidget(t, ns, "b")
	eventually(t, waitTimeout, func() bool { return count("a") > 0 && count("b") > 0 },
		"the first reconcile of Widgets a and b")

	api := kube.CoreV1().Secrets(ns)
	before := count("a")
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "a-secret", Namespace: ns, OwnerReferences: []metav1.OwnerReference{controlledBy(wa)}},
		Data:       map[string][]byte{"password": []byte("hunter2")},
	}
	s, err = api.Create(t.Context(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, func() bool { return count("a") > before },
		"a reconcile of Widget a after creating the Secret it owns")

	eventually(t, waitTimeout, func() bool {
		got, err := secrets.Lister().Get(ns, "a-secret")
		return err == nil && got.ResourceVersion == s.ResourceVersion
	}, "the Secret in the metadata cache")
	got, err := secrets.Lister().Get(ns, "a-secret")
	if err != nil {
		t.Fatal(err)
	}
	if gvk := got.GroupVersionKind(); gvk != corev1.SchemeGroupVersion.WithKind("Secret") {
		t.Errorf("cached Secret's kind is %v, want v1 Secret", gvk)
	}
	if got.UID != s.UID || len(got.OwnerReferences) != 1 || got.ManagedFields != nil {
		t.Errorf("cached Secret's metadata: uid %s (want %s), ownerReferences %v, managedFields %v",
			got.UID, s.UID, got.OwnerReferences, got.ManagedFields)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(got)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u["data"]; ok {
		t.Errorf("cached Secret holds data: %v", u)
	}

	before = count("a")
	s.Labels = map[string]string{"rotated": "yes"}
	if _, err := api.Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, func() bool { return count("a") > before },
		"a reconcile of Widget a after relabelling the Secret it owns")

	if count("b") != 1 {
		t.Errorf("Widget b reconciled %d times, want once: no Secret is its", count("b"))
	}
}
