package informer_test

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// TestNamespaceIndexOnlyForAllNamespaces: an informer of one namespace
// has no namespace index (it would file every object under one value, and
// keep each object's first key string for its life); an informer of all
// namespaces has one. Its Lister lists a namespace either way.
func TestNamespaceIndexOnlyForAllNamespaces(t *testing.T) {
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	for _, tc := range []struct {
		name       string
		namespaces []string
		want       map[string]bool
	}{
		{"all namespaces", nil, map[string]bool{"": true}},
		{"two namespaces", []string{"a", "b"}, map[string]bool{"a": false, "b": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := newFakeCluster(t, nil, cm("a", "one"), cm("a", "two"), cm("b", "one"))
			c, err := informer.New(fakeClients(t, cluster), informer.Options{Namespaces: tc.namespaces})
			if err != nil {
				t.Fatal(err)
			}
			cms, err := informer.For[*corev1.ConfigMap](c)
			if err != nil {
				t.Fatal(err)
			}
			start(t, c)
			if got := informer.NamespaceIndexes(cms); !maps.Equal(got, tc.want) {
				t.Errorf("namespace indexes %v, want %v", got, tc.want)
			}
			for ns, want := range map[string]int{"a": 2, "b": 1, "": 3} {
				got, err := cms.Lister().ListInNamespace(ns, labels.Everything())
				if err != nil || len(got) != want {
					t.Errorf("ListInNamespace(%q) = %d objects, %v; want %d", ns, len(got), err, want)
				}
			}
		})
	}
}

// TestListInNamespaceWithoutIndex: over an indexer without a namespace
// index (NewLister's, say), listing a namespace scans and keeps only its
// objects.
func TestListInNamespaceWithoutIndex(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x", Labels: map[string]string{"app": "web"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "y"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "x", Labels: map[string]string{"app": "web"}}},
	} {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	l := informer.NewLister[*corev1.ConfigMap](idx, corev1.Resource("configmaps"))
	for _, tc := range []struct {
		ns   string
		sel  labels.Selector
		want int
	}{{"a", nil, 2}, {"a", labels.SelectorFromSet(labels.Set{"app": "web"}), 1}, {"b", nil, 1}, {"c", nil, 0}, {"", nil, 3}} {
		got, err := l.ListInNamespace(tc.ns, tc.sel)
		if err != nil || len(got) != tc.want {
			t.Errorf("ListInNamespace(%q, %v) = %d objects, %v; want %d", tc.ns, tc.sel, len(got), err, tc.want)
		}
		for _, o := range got {
			if tc.ns != "" && o.Namespace != tc.ns {
				t.Errorf("ListInNamespace(%q) returned %s/%s", tc.ns, o.Namespace, o.Name)
			}
		}
	}
}
