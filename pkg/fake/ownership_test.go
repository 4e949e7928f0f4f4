package fake_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestApplyOwnership checks field ownership as kube-apiserver keeps it: a
// second applier of a field another owns conflicts (409, the cause naming
// the field and its manager) unless it forces; an update records an Update
// entry under its fieldManager, and an apply over its fields conflicts.
func TestApplyOwnership(t *testing.T) {
	c := newCluster(t)
	cms := clientset(t, c, "application/json").CoreV1().ConfigMaps("ns")
	ctx := t.Context()
	apply := func(manager string, force bool, data map[string]string) (*corev1.ConfigMap, error) {
		return cms.Apply(ctx, corev1ac.ConfigMap("a", "ns").WithData(data), metav1.ApplyOptions{FieldManager: manager, Force: force})
	}
	if _, err := apply("a", false, map[string]string{"x": "1", "y": "1"}); err != nil {
		t.Fatal(err)
	}
	_, err := apply("b", false, map[string]string{"x": "2"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply of a field another manager owns = %v, want a 409 Conflict", err)
	}
	var status apierrors.APIStatus
	if s, ok := err.(apierrors.APIStatus); ok {
		status = s
	}
	if d := status.Status().Details; d == nil || len(d.Causes) != 1 || d.Causes[0].Field != ".data.x" ||
		d.Causes[0].Message != `conflict with "a"` || d.Causes[0].Type != metav1.CauseTypeFieldManagerConflict {
		t.Errorf("conflict details %+v, want one cause: .data.x, conflict with \"a\"", d)
	}
	cm, err := apply("b", true, map[string]string{"x": "2"})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["x"] != "2" || cm.Data["y"] != "1" {
		t.Errorf("after the forced apply, data %v; want x=2, y=1", cm.Data)
	}
	owners := map[string]string{}
	for _, e := range cm.ManagedFields {
		owners[e.Manager] = string(e.Operation) + " " + e.FieldsV1.GetRawString()
	}
	if want := `Apply {"f:data":{"f:y":{}}}`; owners["a"] != want {
		t.Errorf("a owns %s, want %s", owners["a"], want)
	}
	if want := `Apply {"f:data":{"f:x":{}}}`; owners["b"] != want {
		t.Errorf("b owns %s, want %s", owners["b"], want)
	}

	// A merge patch under a field manager is an Update.
	if _, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"z":"3"}}`), metav1.PatchOptions{FieldManager: "editor"}); err != nil {
		t.Fatal(err)
	}
	_, err = apply("a", false, map[string]string{"y": "1", "z": "4"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply over a patched field = %v, want a 409 Conflict", err)
	}
	got, err := cms.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var update *metav1.ManagedFieldsEntry
	for i, e := range got.ManagedFields {
		if e.Manager == "editor" {
			update = &got.ManagedFields[i]
		}
	}
	if update == nil || update.Operation != metav1.ManagedFieldsOperationUpdate || update.FieldsV1.GetRawString() != `{"f:data":{"f:z":{}}}` {
		t.Errorf("editor's entry %+v, want an Update of data.z", update)
	}
}

// TestUpdateManagerFromUserAgent checks that a write without fieldManager
// is recorded under the user agent's first segment, as kube-apiserver
// does.
func TestUpdateManagerFromUserAgent(t *testing.T) {
	c := newCluster(t)
	cfg := c.Config()
	cfg.UserAgent = "reconciler/v1.2 (linux/amd64)"
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps("ns").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"x": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Operation != metav1.ManagedFieldsOperationUpdate || cm.ManagedFields[0].Manager != "reconciler" {
		t.Errorf("managedFields %+v, want one Update by reconciler", cm.ManagedFields)
	}
}
