package fake_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestStatusSubresource checks that writes to the main resource keep the
// stored status and writes to /status change only the status, for a
// built-in kind with every write verb.
func TestStatusSubresource(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			seed := deployment("ns", "d", 1)
			seed.Status.Replicas = 1
			c := newCluster(t, seed)
			ds := clientset(t, c, ct.contentType).AppsV1().Deployments("ns")
			ctx := t.Context()
			check := func(what string, got *appsv1.Deployment, replicas, statusReplicas int32, label string) {
				t.Helper()
				var stored appsv1.Deployment
				if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "d"}, &stored); err != nil {
					t.Fatal(err)
				}
				for _, d := range []*appsv1.Deployment{got, &stored} {
					if *d.Spec.Replicas != replicas || d.Status.Replicas != statusReplicas || d.Labels["l"] != label {
						t.Errorf("after %s: spec.replicas %d, status.replicas %d, label %q; want %d, %d, %q",
							what, *d.Spec.Replicas, d.Status.Replicas, d.Labels["l"], replicas, statusReplicas, label)
					}
				}
			}

			d, err := ds.Get(ctx, "d", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d.Spec.Replicas = ptr.To[int32](2)
			d.Status.Replicas = 9
			d.Labels = map[string]string{"l": "1"}
			if d, err = ds.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			check("an update", d, 2, 1, "1")

			d.Spec.Replicas = ptr.To[int32](9)
			d.Status.Replicas = 2
			d.Labels = map[string]string{"l": "9"}
			if d, err = ds.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			check("a status update", d, 2, 2, "1")

			if d, err = ds.Patch(ctx, "d", types.MergePatchType, []byte(`{"spec":{"replicas":3},"status":{"replicas":9}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			check("a patch", d, 3, 2, "1")

			if d, err = ds.Patch(ctx, "d", types.MergePatchType, []byte(`{"metadata":{"labels":{"l":"9"}},"spec":{"replicas":9},"status":{"replicas":3}}`), metav1.PatchOptions{}, "status"); err != nil {
				t.Fatal(err)
			}
			check("a status patch", d, 3, 3, "1")

			stale := d.DeepCopy()
			stale.ResourceVersion = "1"
			if _, err := ds.UpdateStatus(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("a status update with a stale resourceVersion: %v, want Conflict", err)
			}
		})
	}
}

// TestStatusSubresourceCustomKind checks the same rules for a custom kind
// through the dynamic client.
func TestStatusSubresourceCustomKind(t *testing.T) {
	c := newCluster(t, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}, Spec: WidgetSpec{Size: 1}})
	ws := dynamicClient(t, c).Resource(widgetGVR).Namespace("ns")
	ctx := t.Context()
	w, err := ws.Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(w.Object, int64(2), "spec", "size")
	_ = unstructured.SetNestedField(w.Object, "Ready", "status", "phase")
	if w, err = ws.Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if phase, _, _ := unstructured.NestedString(w.Object, "status", "phase"); phase != "" {
		t.Errorf("an update set status.phase to %q, want the stored status kept", phase)
	}
	_ = unstructured.SetNestedField(w.Object, int64(3), "spec", "size")
	_ = unstructured.SetNestedField(w.Object, "Ready", "status", "phase")
	if _, err = ws.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var stored Widget
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "w"}, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.Size != 2 || stored.Status.Phase != "Ready" {
		t.Errorf("after a status update, spec.size %d, status.phase %q; want 2, Ready", stored.Spec.Size, stored.Status.Phase)
	}
}
