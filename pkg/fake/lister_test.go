package fake_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// TestListerIsNeverBehind checks that a lister holds the seeded objects
// and every accepted write by the time the client has its answer, with no
// waiting, and ignores dry runs.
func TestListerIsNeverBehind(t *testing.T) {
	c := newCluster(t, configMap("ns", "seed", nil), &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}})
	cms := clientset(t, c, "application/vnd.kubernetes.protobuf").CoreV1().ConfigMaps("ns")
	ctx := t.Context()
	l, err := fake.Lister[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get("ns", "seed"); err != nil {
		t.Errorf("seeded object: %v", err)
	}

	created, err := cms.Create(ctx, configMap("ns", "a", map[string]string{"k": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Get("ns", "a")
	if err != nil || got.ResourceVersion != created.ResourceVersion {
		t.Errorf("right after create, lister has %v, %v; want resourceVersion %s", got, err, created.ResourceVersion)
	}
	created.Data["k"] = "2"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Get("ns", "a"); got.Data["k"] != "2" || got.ResourceVersion != updated.ResourceVersion {
		t.Errorf("right after update, lister has %+v; want k=2 at %s", got, updated.ResourceVersion)
	}
	if _, err := cms.Create(ctx, configMap("ns", "dry", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get("ns", "dry"); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run create reached the lister: %v", err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get("ns", "a"); !apierrors.IsNotFound(err) {
		t.Errorf("right after delete, lister Get: %v, want NotFound", err)
	}

	again, err := fake.Lister[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	if all, err := again.ListInNamespace("ns", labels.Everything()); err != nil || len(all) != 1 || all[0].Name != "seed" {
		t.Errorf("a second lister lists %v, %v; want only seed", all, err)
	}
	widgets, err := fake.Lister[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := widgets.Get("ns", "w"); err != nil || w.Name != "w" {
		t.Errorf("custom kind lister Get = %v, %v", w, err)
	}
}

// TestListerRefusesUnknownTypes checks the error for a type not served.
func TestListerRefusesUnknownTypes(t *testing.T) {
	c := newCluster(t)
	if _, err := fake.Lister[*unregistered](c); err == nil {
		t.Error("Lister of a type not in the scheme succeeded")
	}
	if _, err := fake.Lister[*corev1.ConfigMapList](c); err == nil {
		t.Error("Lister of a List type succeeded")
	}
}
