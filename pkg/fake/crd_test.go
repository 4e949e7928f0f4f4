package fake_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// widgetCRD is Widget's CRD as controller-gen writes it, with spec.tags a
// set (+listType=set), preceded by an empty document.
const widgetCRD = `---
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.ctrlkit.io
spec:
  group: test.ctrlkit.io
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          metadata: {type: object}
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
          status:
            type: object
            properties:
              ready: {type: boolean}
              phase: {type: string}
`

// TestCRDTypeConverter checks that applies to a custom resource merge by
// its CRD's schema, as kube-apiserver merges them: a set applied by two
// managers keeps both's values, and spec is a struct, with no "." entry
// of its own as the deduced schema gives it. Under the deduced schema the
// second apply of tags is a conflict instead.
func TestCRDTypeConverter(t *testing.T) {
	tc, err := fake.CRDTypeConverter([]byte(widgetCRD))
	if err != nil {
		t.Fatal(err)
	}
	c, err := fake.New(fake.Options{Scheme: newScheme(t), TypeConverter: tc})
	if err != nil {
		t.Fatal(err)
	}
	widgets := dynamicClient(t, c).Resource(widgetGVR).Namespace("ns")
	ctx := t.Context()
	apply := func(manager string, spec map[string]any, labels map[string]string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetAPIVersion(testGV.String())
		u.SetKind("Widget")
		u.SetName("w")
		u.SetLabels(labels)
		return widgets.Apply(ctx, "w", u, metav1.ApplyOptions{FieldManager: manager})
	}
	if _, err := apply("a", map[string]any{"size": int64(1), "tags": []any{"x"}}, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	got, err := apply("b", map[string]any{"tags": []any{"y"}}, nil)
	if err != nil {
		t.Fatalf("apply of another value of a set = %v, want it merged", err)
	}
	if tags, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "tags"); strings.Join(tags, ",") != "x,y" {
		t.Errorf("tags %v after two managers applied x and y, want [x y]", tags)
	}
	owners := map[string]string{}
	for _, e := range got.GetManagedFields() {
		owners[e.Manager] = e.FieldsV1.GetRawString()
	}
	if want := `{"f:metadata":{"f:labels":{"f:k":{}}},"f:spec":{"f:size":{},"f:tags":{"v:\"x\"":{}}}}`; owners["a"] != want {
		t.Errorf("a owns %s,\nwant %s", owners["a"], want)
	}
	if want := `{"f:spec":{"f:tags":{"v:\"y\"":{}}}}`; owners["b"] != want {
		t.Errorf("b owns %s,\nwant %s", owners["b"], want)
	}

	// The same two applies under the deduced schema: tags are atomic.
	deduced := dynamicClient(t, newCluster(t)).Resource(widgetGVR).Namespace("ns")
	widgets = deduced
	if _, err := apply("a", map[string]any{"tags": []any{"x"}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := apply("b", map[string]any{"tags": []any{"y"}}, nil); !apierrors.IsConflict(err) {
		t.Errorf("deduced schema: second apply of tags = %v, want a 409 (atomic list)", err)
	}
}

// TestCRDTypeConverterKindsItDoesNotDefine checks that a kind none of the
// manifests define merges by the deduced schema.
func TestCRDTypeConverterKindsItDoesNotDefine(t *testing.T) {
	tc, err := fake.CRDTypeConverter([]byte(widgetCRD))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"tags": []any{"x"}}}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "other.ctrlkit.io", Version: "v1", Kind: "Thing"})
	if _, err := tc.ObjectToTyped(u); err != nil {
		t.Errorf("ObjectToTyped of a kind no CRD defines = %v, want the deduced type", err)
	}
}

// TestCRDTypeConverterErrors checks that manifests that are not CRDs, or
// CRDs without what the schema needs, are refused with what is wrong.
func TestCRDTypeConverterErrors(t *testing.T) {
	for _, tt := range []struct {
		name, manifest, want string
	}{
		{"empty", "", "hold no CustomResourceDefinition"},
		{"not a CRD", "apiVersion: v1\nkind: ConfigMap\n", "document 1: v1 ConfigMap is not an apiextensions.k8s.io/v1 CustomResourceDefinition"},
		{"v1beta1", "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\n", "is not an apiextensions.k8s.io/v1"},
		{"no schema", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a.b.c}\nspec: {group: b.c, names: {kind: A}, versions: [{name: v1}]}\n", `version "v1" has no schema.openAPIV3Schema`},
		{"no group", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a}\nspec: {names: {kind: A}, versions: [{name: v1}]}\n", "needs spec.group"},
		{"a document that does not parse", widgetCRD + "---\nkind: [\n", "manifest 1, document "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fake.CRDTypeConverter([]byte(tt.manifest))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CRDTypeConverter = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
