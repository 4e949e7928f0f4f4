package objects_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

func TestDynamicWriter(t *testing.T) {
	ctx := t.Context()
	dyn := newDynamic()
	res := dyn.Resource(siteGVR).Namespace("team-a")
	w := objects.NewDynamicWriter[*Site](res, siteGVK)
	stored := func() *unstructured.Unstructured {
		t.Helper()
		u, err := res.Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}

	// Create: apiVersion and kind come from the writer, not from the object.
	site := &Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}, Spec: SiteSpec{Image: "nginx:1"}}
	got, err := w.Create(ctx, site, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Image != "nginx:1" || got.Kind != "Site" || got.APIVersion != siteGV.String() {
		t.Errorf("Create returned %+v", got)
	}
	if u := stored(); u.GetKind() != "Site" || u.GetAPIVersion() != siteGV.String() {
		t.Errorf("stored apiVersion/kind = %s/%s", u.GetAPIVersion(), u.GetKind())
	}

	// Update.
	got.Spec.Image = "nginx:2"
	got, err = w.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img, _, _ := unstructured.NestedString(stored().Object, "spec", "image"); img != "nginx:2" || got.Spec.Image != "nginx:2" {
		t.Errorf("after Update: stored image %q, returned %q, want nginx:2", img, got.Spec.Image)
	}

	// UpdateStatus.
	objects.SetCondition(&got.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available"})
	got, err = w.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if last := dyn.Actions()[len(dyn.Actions())-1]; last.GetSubresource() != "status" {
		t.Errorf("UpdateStatus went to subresource %q, want status", last.GetSubresource())
	}
	if !objects.IsConditionTrue(got.Status.Conditions, "Ready") {
		t.Errorf("UpdateStatus returned conditions %+v", got.Status.Conditions)
	}
	conds, _, _ := unstructured.NestedSlice(stored().Object, "status", "conditions")
	if len(conds) != 1 {
		t.Errorf("stored status.conditions = %v, want one", conds)
	}

	// Errors come back as they are, for apierrors' predicates.
	missing := &Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "missing"}}
	if _, err := w.Update(ctx, missing, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Update of a missing object: %v, want NotFound", err)
	}
	if _, err := w.Create(ctx, site, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second Create: %v, want AlreadyExists", err)
	}
}

// TestCreateOrUpdateCustomType runs CreateOrUpdate for a custom type: the
// cache is a typed informer over the dynamic client, the writer a
// DynamicWriter.
func TestCreateOrUpdateCustomType(t *testing.T) {
	dyn := newDynamic()
	lister := newLister[*Site](t, fake.NewClientset(), dyn)
	w := objects.NewDynamicWriter[*Site](dyn.Resource(siteGVR).Namespace("team-a"), siteGVK)
	image := func(img string) func(*Site) error {
		return func(s *Site) error { s.Spec.Image = img; return nil }
	}

	got, op, err := objects.CreateOrUpdate(t.Context(), lister, w, "team-a", "web", image("nginx:1"))
	if err != nil || op != objects.Created || got.Spec.Image != "nginx:1" {
		t.Fatalf("first call: %q, %+v, %v; want created with nginx:1", op, got, err)
	}
	eventually(t, 10*time.Second, "the cache to hold the Site", func() bool {
		_, err := lister.Get("team-a", "web")
		return err == nil
	})
	if _, op, err := objects.CreateOrUpdate(t.Context(), lister, w, "team-a", "web", image("nginx:1")); err != nil || op != objects.Unchanged {
		t.Fatalf("same mutate: %q, %v; want unchanged", op, err)
	}
	if _, op, err := objects.CreateOrUpdate(t.Context(), lister, w, "team-a", "web", image("nginx:2")); err != nil || op != objects.Updated {
		t.Fatalf("new image: %q, %v; want updated", op, err)
	}
}
