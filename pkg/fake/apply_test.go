package fake_test

import (
	"net/http"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// TestApply checks the fake's server-side apply: create when absent, then
// a merge of the applied configuration in which the applier's fields it
// no longer applies go, containers merge by name, and FieldManager and
// Force are recorded.
func TestApply(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			c := newCluster(t)
			cs := clientset(t, c, ct.contentType)
			ctx := t.Context()
			opts := metav1.ApplyOptions{FieldManager: "me", Force: true}

			cm, err := cs.CoreV1().ConfigMaps("ns").Apply(ctx, corev1ac.ConfigMap("a", "ns").WithData(map[string]string{"x": "1"}), opts)
			if err != nil {
				t.Fatal(err)
			}
			if cm.UID == "" || cm.Data["x"] != "1" {
				t.Errorf("apply of an absent object = %+v, want it created", cm)
			}
			cm, err = cs.CoreV1().ConfigMaps("ns").Apply(ctx, corev1ac.ConfigMap("a", "ns").WithData(map[string]string{"y": "2"}), opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := cm.Data["x"]; ok || cm.Data["y"] != "2" {
				t.Errorf("second apply: data %v, want x gone (owned by me, no longer applied) and y=2", cm.Data)
			}
			if n := len(cm.ManagedFields); n != 1 || cm.ManagedFields[0].Manager != "me" || cm.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
				t.Errorf("managedFields %+v, want one Apply entry of me", cm.ManagedFields)
			}

			d := appsv1ac.Deployment("d", "ns").WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().WithSpec(
				corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("a").WithImage("a:1"), corev1ac.Container().WithName("b").WithImage("b:1")))))
			if _, err := cs.AppsV1().Deployments("ns").Apply(ctx, d, opts); err != nil {
				t.Fatal(err)
			}
			d.Spec.Template.Spec.Containers = d.Spec.Template.Spec.Containers[1:]
			got, err := cs.AppsV1().Deployments("ns").Apply(ctx, d, opts)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(got.Spec.Template.Spec.Containers); n != 1 {
				t.Errorf("after applying one container over two, %d containers; want the one no longer applied gone", n)
			}
			status := appsv1ac.Deployment("d", "ns").WithStatus(appsv1ac.DeploymentStatus().WithReplicas(5))
			if got, err = cs.AppsV1().Deployments("ns").ApplyStatus(ctx, status, opts); err != nil || got.Status.Replicas != 5 {
				t.Errorf("apply to status = %v, %v; want status.replicas 5", got, err)
			}

			writes := c.Writes()
			for _, w := range writes {
				if w.Verb != "apply" || w.FieldManager != "me" || !w.Force || w.PatchType != types.ApplyPatchType {
					t.Errorf("recorded %s manager %q force %v type %q; want apply, me, true, %s", w.Verb, w.FieldManager, w.Force, w.PatchType, types.ApplyPatchType)
				}
			}
			if w := writes[len(writes)-1]; w.Subresource != "status" {
				t.Errorf("ApplyStatus recorded subresource %q", w.Subresource)
			}
		})
	}
}

// TestApplyRefusals checks kube-apiserver's rules for applies: a field
// manager, apiVersion, kind and name, and no creating through /status.
func TestApplyRefusals(t *testing.T) {
	c := newCluster(t)
	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"no field manager", "/api/v1/namespaces/ns/configmaps/a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, http.StatusUnprocessableEntity},
		{"no kind", "/api/v1/namespaces/ns/configmaps/a?fieldManager=m", `{"apiVersion":"v1","metadata":{"name":"a"}}`, http.StatusBadRequest},
		{"no name", "/api/v1/namespaces/ns/configmaps/a?fieldManager=m", `{"apiVersion":"v1","kind":"ConfigMap"}`, http.StatusBadRequest},
		{"other kind", "/api/v1/namespaces/ns/configmaps/a?fieldManager=m", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}`, http.StatusBadRequest},
		{"absent, via status", "/apis/apps/v1/namespaces/ns/deployments/d/status?fieldManager=m", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}`, http.StatusNotFound},
		{"force on a merge patch", "/api/v1/namespaces/ns/configmaps/a?force=true", `{}`, http.StatusUnprocessableEntity},
	} {
		ct := string(types.ApplyPatchType)
		if tc.name == "force on a merge patch" {
			ct = string(types.MergePatchType)
		}
		if code, body := rawDo(t, c, "PATCH", tc.path, ct, tc.body); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
	}
}

// TestApplyCustomKind checks apply through the dynamic client, with YAML.
func TestApplyCustomKind(t *testing.T) {
	c := newCluster(t)
	ws := dynamicClient(t, c).Resource(widgetGVR).Namespace("ns")
	ctx := t.Context()
	w := widget("ns", "w", 1)
	_ = unstructured.SetNestedStringSlice(w.Object, []string{"a", "b"}, "spec", "tags")
	if _, err := ws.Apply(ctx, "w", w, metav1.ApplyOptions{FieldManager: "me"}); err != nil {
		t.Fatal(err)
	}
	code, body := rawDo(t, c, "PATCH", "/apis/test.ctrlkit.io/v1/namespaces/ns/widgets/w?fieldManager=me", string(types.ApplyPatchType),
		"apiVersion: test.ctrlkit.io/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  tags: [c]\n")
	if code != http.StatusOK {
		t.Fatalf("YAML apply = %d %s", code, body)
	}
	got, err := ws.Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tags, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "tags")
	_, sized, _ := unstructured.NestedInt64(got.Object, "spec", "size")
	if sized || !slices.Equal(tags, []string{"c"}) {
		t.Errorf("after the YAML apply, spec %v; want size gone (no longer applied), tags [c]", got.Object["spec"])
	}
	if _, err := ws.Apply(ctx, "w", w, metav1.ApplyOptions{}); err == nil {
		t.Error("apply without a field manager succeeded")
	}
	if body := c.Writes()[1].Body; string(body) != `{"apiVersion":"test.ctrlkit.io/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"tags":["c"]}}` {
		t.Errorf("the YAML apply recorded body %s, want it as JSON", body)
	}
}
