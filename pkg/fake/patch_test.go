package fake_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestPatch checks the three patch types on a built-in kind: a strategic
// merge patch merges containers by name where a merge patch replaces the
// list, and a JSON patch edits by path.
func TestPatch(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			d := deployment("ns", "d", 1)
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "sidecar:1"})
			c := newCluster(t, d)
			ds := clientset(t, c, ct.contentType).AppsV1().Deployments("ns")
			ctx := t.Context()
			images := func(d *appsv1.Deployment) []string {
				var out []string
				for _, c := range d.Spec.Template.Spec.Containers {
					out = append(out, c.Name+"="+c.Image)
				}
				return out
			}

			got, err := ds.Patch(ctx, "d", types.StrategicMergePatchType,
				[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app:2"}]}}}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"app=app:2", "sidecar=sidecar:1"}; !slices.Equal(images(got), want) {
				t.Errorf("after a strategic merge patch, containers %v, want %v", images(got), want)
			}

			got, err = ds.Patch(ctx, "d", types.JSONPatchType,
				[]byte(`[{"op":"test","path":"/spec/template/spec/containers/1/name","value":"sidecar"},`+
					`{"op":"replace","path":"/spec/template/spec/containers/1/image","value":"sidecar:2"},`+
					`{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"app=app:2", "sidecar=sidecar:2"}; !slices.Equal(images(got), want) || got.Labels["a"] != "b" {
				t.Errorf("after a JSON patch, containers %v labels %v, want %v and a=b", images(got), got.Labels, want)
			}

			got, err = ds.Patch(ctx, "d", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"a":null,"c":"d"}},"spec":{"template":{"spec":{"containers":[{"name":"only","image":"only:1"}]}}}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"only=only:1"}; !slices.Equal(images(got), want) || len(got.Labels) != 1 || got.Labels["c"] != "d" {
				t.Errorf("after a merge patch, containers %v labels %v, want %v and only c=d", images(got), got.Labels, want)
			}

			_, err = ds.Patch(ctx, "d", types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/name","value":"other"}]`), metav1.PatchOptions{})
			if code := statusCode(err); code != http.StatusUnprocessableEntity {
				t.Errorf("a failing JSON patch test: %v (code %d), want 422", err, code)
			}
			if _, err = ds.Patch(ctx, "d", types.JSONPatchType, []byte(`{"not":"a list"}`), metav1.PatchOptions{}); !apierrors.IsBadRequest(err) {
				t.Errorf("a JSON patch that is not a list: %v, want BadRequest", err)
			}
			if _, err = ds.Patch(ctx, "missing", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a patch of a missing object: %v, want NotFound", err)
			}
		})
	}
}

func statusCode(err error) int {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return int(s.Status().Code)
	}
	return 0
}

// TestPatchCustomKind checks that a custom kind takes merge and JSON
// patches but, as kube-apiserver's CRD handler, refuses a strategic merge
// patch with 415.
func TestPatchCustomKind(t *testing.T) {
	c := newCluster(t, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}, Spec: WidgetSpec{Tags: []string{"a", "b"}}})
	ws := dynamicClient(t, c).Resource(widgetGVR).Namespace("ns")
	ctx := t.Context()
	got, err := ws.Patch(ctx, "w", types.MergePatchType, []byte(`{"spec":{"size":3,"tags":["c"]}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tags, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "tags")
	size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
	if size != 3 || !slices.Equal(tags, []string{"c"}) {
		t.Errorf("after a merge patch, spec %v, want size 3 and tags [c]", got.Object["spec"])
	}
	got, err = ws.Patch(ctx, "w", types.JSONPatchType, []byte(`[{"op":"add","path":"/spec/tags/-","value":"d"},{"op":"add","path":"/spec/tags/0","value":"z"}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tags, _, _ = unstructured.NestedStringSlice(got.Object, "spec", "tags"); !slices.Equal(tags, []string{"z", "c", "d"}) {
		t.Errorf("after a JSON patch, tags %v, want [z c d]", tags)
	}
	_, err = ws.Patch(ctx, "w", types.StrategicMergePatchType, []byte(`{"spec":{"size":4}}`), metav1.PatchOptions{})
	if !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("a strategic merge patch of a custom kind: %v, want UnsupportedMediaType", err)
	}
	code, body := rawDo(t, c, "PATCH", "/api/v1/namespaces/ns/configmaps/x", "text/plain", "{}")
	if code != http.StatusUnsupportedMediaType {
		t.Errorf("a patch as text/plain = %d %s, want 415", code, body)
	}
}

// TestPatchResourceVersion checks that a resourceVersion in a patch is a
// precondition, and that a patch without one is unconditional.
func TestPatchResourceVersion(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			c := newCluster(t, configMap("ns", "a", nil))
			cms := clientset(t, c, ct.contentType).CoreV1().ConfigMaps("ns")
			ctx := t.Context()
			cm, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1"},"data":{"k":"1"}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatalf("a patch with the current resourceVersion: %v", err)
			}
			_, err = cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1"},"data":{"k":"2"}}`), metav1.PatchOptions{})
			if !apierrors.IsConflict(err) {
				t.Errorf("a patch with a stale resourceVersion: %v, want Conflict", err)
			}
			_, err = cms.Patch(ctx, "a", types.StrategicMergePatchType, []byte(`{"metadata":{"resourceVersion":"1"},"data":{"k":"2"}}`), metav1.PatchOptions{})
			if !apierrors.IsConflict(err) {
				t.Errorf("a strategic merge patch with a stale resourceVersion: %v, want Conflict", err)
			}
			got, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"k":"3"}}`), metav1.PatchOptions{})
			if err != nil || got.Data["k"] != "3" || rv(t, got) <= rv(t, cm) {
				t.Errorf("a patch without resourceVersion = %v, %v; want k=3 at a newer resourceVersion", got, err)
			}
		})
	}
}
