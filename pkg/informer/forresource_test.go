package informer_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// TestForResourceByType checks that Options.ByType narrows an unstructured
// informer when the scheme maps the entry's Go type to the informer's
// resource, and that entries of other types do not touch it.
func TestForResourceByType(t *testing.T) {
	big := func(ns, name string) *unstructured.Unstructured {
		w := unstructuredWidget(ns, name, 10)
		w.SetLabels(map[string]string{"size": "big"})
		return w
	}
	dyn := newCluster(t, big("team-a", "big"), unstructuredWidget("team-a", "small", 1), big("team-b", "big"))
	c, err := informer.New(dyn.withMapper(newMapper(widgetGVK)), informer.Options{
		Scheme: builtinAndWidgetScheme(t),
		ByType: map[runtime.Object]informer.TypeOptions{
			&Widget{}:           {Namespaces: []string{"team-a"}, LabelSelector: "size=big"},
			&corev1.ConfigMap{}: {Namespaces: []string{"team-b"}}, // another resource: no effect on widgets
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.ForResource(c, widgetGVR)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)

	got, err := keys(widgets.Lister().List(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"team-a/big"}; !slices.Equal(got, want) {
		t.Errorf("cached %q, want %q", got, want)
	}
}

// TestForResourceResyncByType checks that Options.ResyncByType sets the
// resync of an unstructured informer when the scheme maps the entry's Go
// type to the informer's resource. client-go resyncs handlers at most once
// a second, so this test takes about that long.
func TestForResourceResyncByType(t *testing.T) {
	dyn := newCluster(t, unstructuredWidget("default", "w", 1))
	c, err := informer.New(dyn.withMapper(newMapper(widgetGVK)), informer.Options{
		Scheme:       builtinAndWidgetScheme(t),
		ResyncByType: map[runtime.Object]time.Duration{&Widget{}: time.Second}, // Resync stays 0: none by default
	})
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.ForResource(c, widgetGVR)
	if err != nil {
		t.Fatal(err)
	}
	resynced := make(chan struct{}, 1)
	isResync := func(ev informer.Event) bool {
		return ev.Type == informer.Updated && !informer.ResourceVersionChanged()(ev)
	}
	h := informer.Handler{Predicates: []informer.Predicate{isResync}}
	if _, err := widgets.AddEventHandler(h.ResourceEventHandler(func(types.NamespacedName, informer.Event) {
		select {
		case resynced <- struct{}{}:
		default:
		}
	})); err != nil {
		t.Fatal(err)
	}
	start(t, c)

	select {
	case <-resynced:
	case <-time.After(10 * time.Second):
		t.Fatal("no resync within 10s")
	}
}
