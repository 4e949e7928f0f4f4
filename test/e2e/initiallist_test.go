package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// TestInitialListIsConsistent: every kind of informer (a built-in type, a
// custom Go type, metadata-only, unstructured) fills its cache with one
// list at resourceVersion "" and no page size, a consistent read, rather
// than client-go's default of streaming the state as watch events or
// listing at resourceVersion "0" (which the API server may answer from a
// watch cache older than what the client saw before). Then it watches
// from the list's resourceVersion.
func TestInitialListIsConsistent(t *testing.T) {
	ns := newNamespace(t)
	for i := range 3 {
		createConfigMap(t, ns, fmt.Sprintf("cm-%d", i), nil, nil)
	}
	rc := &requestCounter{}
	mgr := newManager(t, rc.config(cfg), ns, manager.Options{Informers: informer.Options{Scheme: newScheme(t)}})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := informer.For[*Widget](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informer.ForMetadata[*corev1.Secret](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	pods, err := informer.ForResource(mgr.Cache(), schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := informer.WaitForSources(ctx, testLogger(t), time.Second, cms, widgets, secrets, pods); err != nil {
		t.Fatal(err)
	}
	if got, err := cms.Lister().List(labels.Everything()); err != nil || len(got) != 3 {
		t.Errorf("ConfigMap cache holds %d objects (%v), want 3", len(got), err)
	}
	resources := map[string]string{
		"ConfigMaps":          "/api/v1/namespaces/" + ns + "/configmaps",
		"Widgets":             "/apis/" + e2eGV.String() + "/namespaces/" + ns + "/widgets",
		"Secrets (metadata)":  "/api/v1/namespaces/" + ns + "/secrets",
		"Pods (unstructured)": "/api/v1/namespaces/" + ns + "/pods",
	}
	reqs := rc.requests()
	for what, path := range resources {
		var first []request
		for _, r := range reqs {
			if r.path == path {
				first = append(first, r)
			}
		}
		if len(first) < 2 {
			t.Errorf("%s: %d requests to %s, want a list then a watch: %v", what, len(first), path, describe(reqs))
			continue
		}
		// The API server may answer the first request for a custom
		// resource with 429 and Retry-After, which client-go's REST client
		// retries: every request before the watch must be the same list.
		w := slices.IndexFunc(first, func(r request) bool { return r.watch })
		if w < 1 {
			t.Errorf("%s: no list then watch of %s: %s", what, path, describe(first))
			continue
		}
		for _, l := range first[:w] {
			if !l.list || l.initial || l.rv != "" || l.limit != "" {
				t.Errorf("%s: the informer sent %s before its watch, want only plain lists (not a WatchList) at resourceVersion \"\" with no limit: %s", what, l, describe(first))
			}
		}
		if rv := first[w].rv; rv == "" || rv == "0" {
			t.Errorf("%s: the informer watches from resourceVersion %q, want the list's: %s", what, rv, describe(first))
		}
	}
}

func (r request) String() string {
	kind := "list"
	switch {
	case r.watch:
		kind = "watch"
	case r.initial:
		kind = "WatchList"
	}
	return fmt.Sprintf("%s %s rv=%q limit=%q", kind, r.path, r.rv, r.limit)
}

func describe(reqs []request) string {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString("\n\t" + r.String())
	}
	return b.String()
}
