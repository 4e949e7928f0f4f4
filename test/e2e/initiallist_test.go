package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// TestInitialListIsConsistent: every kind of informer (a built-in type, a
// custom Go type, metadata-only, unstructured) fills its cache with one
// list at resourceVersion "", a consistent read, rather than client-go's
// default of streaming the state as watch events or listing at
// resourceVersion "0" (which the API server may answer from a watch cache
// older than what the client saw before). Built-in types ask for pages of
// 10,000 (TestInitialListInPages), the others for no page size. Then
// each watches from the list's resourceVersion.
func TestInitialListIsConsistent(t *testing.T) {
	ns := newNamespace(t)
	for i := range 3 {
		createConfigMap(t, ns, fmt.Sprintf("cm-%d", i), nil, nil)
	}
	rc := &requestCounter{}
	mgr := newManager(t, rc.config(cfg), ns, manager.Options{Scheme: newScheme(t)})
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
	limits := map[string]string{"ConfigMaps": "10000"}
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
			if !l.list || l.initial || l.rv != "" || l.limit != limits[what] || l.cont != "" {
				t.Errorf("%s: the informer sent %s before its watch, want only plain lists (not a WatchList) at resourceVersion \"\" with limit %q and no continue token: %s",
					what, l, limits[what], describe(first))
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
	return fmt.Sprintf("%s %s rv=%q limit=%q continue=%q", kind, r.path, r.rv, r.limit, r.cont)
}

func describe(reqs []request) string {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString("\n\t" + r.String())
	}
	return b.String()
}

// TestInitialListInPages: a built-in type's informer over more objects
// than one page (10,000) asks for the first page at resourceVersion "",
// then for each next page with the continue token the page before gave,
// before its watch; its cache holds every object once, and it watches
// from the list's resourceVersion.
func TestInitialListInPages(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 10,050 ConfigMaps")
	}
	ns := newNamespace(t)
	const n = 10050
	// envtest runs no namespace controller: without this the ConfigMaps
	// would stay for the rest of the suite.
	t.Cleanup(func() {
		if err := kube.CoreV1().ConfigMaps(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting the ConfigMaps: %v", err)
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for w := range errs {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += len(errs) {
				_, errs[w] = kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i)}}, metav1.CreateOptions{})
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	rc := &requestCounter{}
	mgr := newManager(t, rc.config(cfg), ns, manager.Options{})
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := informer.WaitForSources(ctx, testLogger(t), time.Second, cms); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool, len(got))
	for _, cm := range got {
		if seen[cm.Name] {
			t.Fatalf("%s is cached twice", cm.Name)
		}
		seen[cm.Name] = true
	}
	// The namespace's kube-root-ca.crt ConfigMap is cached too.
	for i := range n {
		if name := fmt.Sprintf("cm-%05d", i); !seen[name] {
			t.Fatalf("%s is not cached (%d objects cached)", name, len(got))
		}
	}
	path := "/api/v1/namespaces/" + ns + "/configmaps"
	var reqs []request
	for _, r := range rc.requests() {
		if r.path == path {
			reqs = append(reqs, r)
		}
	}
	w := slices.IndexFunc(reqs, func(r request) bool { return r.watch })
	if w != 2 {
		t.Fatalf("want two pages then a watch: %s", describe(reqs))
	}
	if p := reqs[0]; p.rv != "" || p.limit != "10000" || p.cont != "" {
		t.Errorf("first page: %s, want resourceVersion \"\", limit 10000, no continue token", p)
	}
	if p := reqs[1]; p.rv != "" || p.limit != "10000" || p.cont == "" {
		t.Errorf("second page: %s, want limit 10000 and the first page's continue token", p)
	}
	if rv := reqs[w].rv; rv == "" || rv == "0" {
		t.Errorf("the informer watches from resourceVersion %q, want the list's: %s", rv, describe(reqs))
	}
}
