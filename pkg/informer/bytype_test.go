package informer_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// TestByType narrows the ConfigMap and Widget informers and leaves Secrets
// to the cache-wide options: each caches exactly what its scope selects.
func TestByType(t *testing.T) {
	app := map[string]string{"app": "web"}
	secret := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	kube := newCluster(t,
		configMap("team-a", "a1", app), configMap("team-b", "b1", app), configMap("team-b", "b2", nil),
		secret("team-a", "sa"), secret("team-b", "sb"),
	)
	big := unstructuredWidget("team-a", "big", 10)
	big.SetLabels(map[string]string{"size": "big"})
	kube.add(t, big, unstructuredWidget("team-a", "small", 1))
	c, err := informer.New(kube.withMapper(newMapper(widgetGVK)), informer.Options{
		Scheme: builtinAndWidgetScheme(t),
		ByType: map[runtime.Object]informer.TypeOptions{
			&corev1.ConfigMap{}: {Namespaces: []string{"team-b"}, LabelSelector: "app=web"},
			&Widget{}:           {LabelSelector: "size=big"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informer.For[*corev1.Secret](c)
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.For[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)

	for _, tt := range []struct {
		name string
		list func() ([]string, error)
		want []string
	}{
		{"narrowed built-in", func() ([]string, error) { return keys(cms.Lister().List(nil)) }, []string{"team-b/b1"}},
		{"not narrowed", func() ([]string, error) { return keys(secrets.Lister().List(nil)) }, []string{"team-a/sa", "team-b/sb"}},
		{"narrowed custom", func() ([]string, error) { return keys(widgets.Lister().List(nil)) }, []string{"team-a/big"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.list()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("cached %q, want %q", got, tt.want)
			}
		})
	}
}

func TestByTypeErrors(t *testing.T) {
	clients := func() informer.Clients {
		return clientsWith(t, newMapper())
	}
	for _, tt := range []struct {
		name    string
		byType  map[runtime.Object]informer.TypeOptions
		wantErr []string
	}{
		{"bad label selector", map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {LabelSelector: "app in (web"}},
			[]string{"ByType[*v1.ConfigMap].LabelSelector", "app in (web"}},
		{"bad field selector", map[runtime.Object]informer.TypeOptions{&corev1.ConfigMap{}: {FieldSelector: "metadata.name"}},
			[]string{"ByType[*v1.ConfigMap].FieldSelector", "metadata.name"}},
		{"not an object", map[runtime.Object]informer.TypeOptions{&metav1.Status{}: {}},
			[]string{"ByType[*v1.Status]", "API objects"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := informer.New(clients(), informer.Options{ByType: tt.byType})
			if err == nil {
				t.Fatal("New succeeded, want an error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	t.Run("namespace on a cluster-scoped type", func(t *testing.T) {
		c, err := informer.New(clients(), informer.Options{ByType: map[runtime.Object]informer.TypeOptions{
			&corev1.Namespace{}: {Namespaces: []string{"team-a"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = informer.For[*corev1.Namespace](c)
		if err == nil || !strings.Contains(err.Error(), "cluster-scoped") {
			t.Fatalf("For[*corev1.Namespace] = %v, want an error saying the type is cluster-scoped", err)
		}
	})
}
