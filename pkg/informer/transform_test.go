package informer_test

import (
	"fmt"
	"maps"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

var managedFields = []metav1.ManagedFieldsEntry{{
	Manager:    "kubectl",
	Operation:  metav1.ManagedFieldsOperationApply,
	APIVersion: "v1",
	FieldsType: "FieldsV1",
	FieldsV1:   metav1.NewFieldsV1(`{"f:data":{"f:key":{}}}`),
}}

func withManagedFields(cm *corev1.ConfigMap) *corev1.ConfigMap {
	cm.ManagedFields = managedFields
	return cm
}

func TestStripManagedFields(t *testing.T) {
	tombstone := cache.DeletedFinalStateUnknown{Key: "default/a", Obj: withManagedFields(configMap("default", "a", nil))}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{
			name: "typed object loses its managedFields",
			in:   withManagedFields(configMap("default", "a", map[string]string{"k": "v"})),
			want: configMap("default", "a", map[string]string{"k": "v"}),
		},
		{
			name: "object without managedFields is unchanged",
			in:   configMap("default", "a", nil),
			want: configMap("default", "a", nil),
		},
		{
			name: "object without metadata is returned as is",
			in:   "not an object",
			want: "not an object",
		},
		{
			name: "tombstones are returned as is",
			in:   tombstone,
			want: tombstone,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := informer.StripManagedFields(tt.in)
			if err != nil {
				t.Fatalf("StripManagedFields: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("StripManagedFields = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// TestCachedManagedFields runs a real informer over a fake API server that
// holds objects with managedFields, typed and custom.
func TestCachedManagedFields(t *testing.T) {
	tests := []struct {
		name string
		keep bool
		want []metav1.ManagedFieldsEntry
	}{
		{name: "stripped by default", keep: false, want: nil},
		{name: "kept with KeepManagedFields", keep: true, want: managedFields},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := unstructuredWidget("default", "w", 3)
			w.SetManagedFields(managedFields)
			kube := newCluster(t, withManagedFields(configMap("default", "a", nil)), w)
			c, err := informer.New(kube.withMapper(newMapper(widgetGVK)),
				informer.Options{KeepManagedFields: tt.keep, Scheme: builtinAndWidgetScheme(t)})
			if err != nil {
				t.Fatal(err)
			}
			cms, err := informer.For[*corev1.ConfigMap](c)
			if err != nil {
				t.Fatal(err)
			}
			widgets, err := informer.For[*Widget](c)
			if err != nil {
				t.Fatal(err)
			}
			start(t, c)

			cm, err := cms.Lister().Get("default", "a")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cm.ManagedFields, tt.want) {
				t.Errorf("cached ConfigMap managedFields = %v, want %v", cm.ManagedFields, tt.want)
			}
			got, err := widgets.Lister().Get("default", "w")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.ManagedFields, tt.want) {
				t.Errorf("cached Widget managedFields = %v, want %v", got.ManagedFields, tt.want)
			}
		})
	}
}

// builtinAndWidgetScheme knows client-go's built-in types and Widget.
func builtinAndWidgetScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := widgetScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShareMetadata: with Options.ShareMetadata, cached objects with equal
// labels share one map and keep every field; without it, each has its own.
func TestShareMetadata(t *testing.T) {
	for _, share := range []bool{false, true} {
		t.Run(fmt.Sprintf("ShareMetadata=%v", share), func(t *testing.T) {
			lbls := map[string]string{"app": "web", "tier": "front"}
			a, b := configMap("default", "a", lbls), configMap("default", "b", maps.Clone(lbls))
			a.Data = map[string]string{"k": "va"}
			b.Annotations = map[string]string{"note": "b"}
			c := newCache(t, newCluster(t, a, b), informer.Options{ShareMetadata: share})
			cms, err := informer.For[*corev1.ConfigMap](c)
			if err != nil {
				t.Fatal(err)
			}
			start(t, c)
			gotA, errA := cms.Lister().Get("default", "a")
			gotB, errB := cms.Lister().Get("default", "b")
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			if !maps.Equal(gotA.Labels, lbls) || !maps.Equal(gotB.Labels, lbls) || gotA.Data["k"] != "va" || gotB.Annotations["note"] != "b" {
				t.Fatalf("cached objects lost fields: %+v, %+v", gotA.ObjectMeta, gotB.ObjectMeta)
			}
			same := reflect.ValueOf(gotA.Labels).UnsafePointer() == reflect.ValueOf(gotB.Labels).UnsafePointer()
			if same != share {
				t.Errorf("equal label maps shared: %v, want %v", same, share)
			}
		})
	}
}
