package informer_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

func TestLister(t *testing.T) {
	kube := newCluster(t,
		configMap("team-a", "web", map[string]string{"app": "web"}),
		configMap("team-a", "db", map[string]string{"app": "db"}),
		configMap("team-b", "web", map[string]string{"app": "web"}),
		namespace("team-a"),
	)
	c := newCache(t, kube, informer.Options{})
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	nss, err := informer.For[*corev1.Namespace](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)

	t.Run("Get", func(t *testing.T) {
		tests := []struct {
			name         string
			get          func() (string, error) // returns the key of the object got
			want         string
			wantNotFound bool
		}{
			{name: "namespaced", get: func() (string, error) { return keyOfGet(cms.Lister().Get("team-b", "web")) }, want: "team-b/web"},
			{name: "cluster-scoped with empty namespace", get: func() (string, error) { return keyOfGet(nss.Lister().Get("", "team-a")) }, want: "team-a"},
			{name: "missing name", get: func() (string, error) { return keyOfGet(cms.Lister().Get("team-a", "missing")) }, wantNotFound: true},
			{name: "existing name in another namespace", get: func() (string, error) { return keyOfGet(cms.Lister().Get("team-b", "db")) }, wantNotFound: true},
			{name: "namespaced object without namespace", get: func() (string, error) { return keyOfGet(cms.Lister().Get("", "web")) }, wantNotFound: true},
			{name: "missing cluster-scoped", get: func() (string, error) { return keyOfGet(nss.Lister().Get("", "team-z")) }, wantNotFound: true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := tt.get()
				if tt.wantNotFound {
					if !apierrors.IsNotFound(err) {
						t.Fatalf("Get error = %v, want NotFound", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("Get returned %s, want %s", got, tt.want)
				}
			})
		}
	})

	t.Run("List", func(t *testing.T) {
		tests := []struct {
			name      string
			namespace string
			selector  labels.Selector
			want      []string
		}{
			{name: "nil selector matches all", want: []string{"team-a/db", "team-a/web", "team-b/web"}},
			{name: "label selector", selector: labels.SelectorFromSet(labels.Set{"app": "web"}), want: []string{"team-a/web", "team-b/web"}},
			{name: "selector matching nothing", selector: labels.SelectorFromSet(labels.Set{"app": "cache"}), want: []string{}},
			{name: "in namespace", namespace: "team-a", want: []string{"team-a/db", "team-a/web"}},
			{name: "in namespace with selector", namespace: "team-a", selector: labels.SelectorFromSet(labels.Set{"app": "web"}), want: []string{"team-a/web"}},
			{name: "in an empty namespace", namespace: "team-z", want: []string{}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var got []string
				var err error
				if tt.namespace == "" {
					got, err = keys(cms.Lister().List(tt.selector))
				} else {
					got, err = keys(cms.Lister().ListInNamespace(tt.namespace, tt.selector))
				}
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("listed %q, want %q", got, tt.want)
				}
			})
		}
	})
}

// keyOfGet returns the cache key of the object a Lister's Get returned.
func keyOfGet[T metav1.Object](obj T, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return cache.MetaNamespaceKeyFunc(obj)
}

// TestForCustomType declares a typed informer for a custom Go type: the
// objects are listed and watched as JSON decoded straight into *Widget.
func TestForCustomType(t *testing.T) {
	dyn := newCluster(t, unstructuredWidget("default", "small", 1), unstructuredWidget("default", "large", 42))
	c, err := informer.New(dyn.withMapper(newMapper(widgetGVK)),
		informer.Options{Scheme: widgetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.For[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	if got := widgets.GroupVersionResource(); got != widgetGVR {
		t.Errorf("GroupVersionResource = %v, want %v", got, widgetGVR)
	}
	if got, want := widgets.Name(), "widgets.v1.test.ctrlkit.io (*informer_test.Widget)"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	start(t, c)

	tests := []struct {
		name string
		size int
	}{
		{"small", 1},
		{"large", 42},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := widgets.Lister().Get("default", tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if w.Name != tt.name || w.Namespace != "default" {
				t.Errorf("Get returned %s/%s, want default/%s", w.Namespace, w.Name, tt.name)
			}
			if w.Spec.Size != tt.size {
				t.Errorf("Spec.Size = %d, want %d", w.Spec.Size, tt.size)
			}
		})
	}
	all, err := widgets.Lister().ListInNamespace("default", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Errorf("ListInNamespace returned %d widgets, want 2", len(all))
	}
}

// TestForResourceUnstructured declares the same resource untyped.
func TestForResourceUnstructured(t *testing.T) {
	dyn := newCluster(t, unstructuredWidget("default", "w", 7))
	c, err := informer.New(dyn.withMapper(newMapper(widgetGVK)), informer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.ForResource(c, widgetGVR)
	if err != nil {
		t.Fatal(err)
	}
	again, err := informer.ForResource(c, widgetGVR)
	if err != nil {
		t.Fatal(err)
	}
	if again != widgets {
		t.Error("ForResource twice returned two different informers")
	}
	start(t, c)

	u, err := widgets.Lister().Get("default", "w")
	if err != nil {
		t.Fatal(err)
	}
	size, found, err := unstructured.NestedInt64(u.Object, "spec", "size")
	if err != nil || !found || size != 7 {
		t.Errorf("spec.size = %d (found %v, err %v), want 7", size, found, err)
	}
}
