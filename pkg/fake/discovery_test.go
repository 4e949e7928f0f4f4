package fake_test

import (
	"net/http"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// TestDiscovery checks that client-go's discovery client and a
// discovery-backed RESTMapper work on the fake.
func TestDiscovery(t *testing.T) {
	c := newCluster(t)
	cfg := c.Config()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	preferred := map[string]string{}
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	for group, want := range map[string]string{"": "v1", "apps": "v1", "autoscaling": "v2", testGV.Group: "v1"} {
		if got := preferred[group]; got != want {
			t.Errorf("group %q preferred version %q, want %q", group, got, want)
		}
	}
	resources := map[string]metav1.APIResource{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			resources[l.GroupVersion+" "+r.Name] = r
		}
	}
	for _, tc := range []struct {
		key, kind  string
		namespaced bool
		verbs      []string
	}{
		{"v1 configmaps", "ConfigMap", true, []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
		{"v1 nodes", "Node", false, nil},
		{"v1 nodes/status", "Node", false, []string{"get", "patch", "update"}},
		{"apps/v1 deployments/status", "Deployment", true, nil},
		{"test.ctrlkit.io/v1 widgets", "Widget", true, nil},
		{"test.ctrlkit.io/v1 widgets/status", "Widget", true, nil},
		{"test.ctrlkit.io/v1 gadgets", "Gadget", false, nil},
	} {
		r, ok := resources[tc.key]
		if !ok {
			t.Errorf("discovery lacks %s", tc.key)
			continue
		}
		if r.Kind != tc.kind || r.Namespaced != tc.namespaced || (tc.verbs != nil && !slices.Equal(r.Verbs, tc.verbs)) {
			t.Errorf("%s = kind %s namespaced %v verbs %v; want %s %v %v", tc.key, r.Kind, r.Namespaced, r.Verbs, tc.kind, tc.namespaced, tc.verbs)
		}
	}
	for _, key := range []string{"v1 configmaps/status", "test.ctrlkit.io/v1 gadgets/status", "v1 configmaplists"} {
		if _, ok := resources[key]; ok {
			t.Errorf("discovery lists %s", key)
		}
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for gk, scope := range map[schema.GroupKind]meta.RESTScopeName{
		{Group: testGV.Group, Kind: "Widget"}: meta.RESTScopeNameNamespace,
		{Group: testGV.Group, Kind: "Gadget"}: meta.RESTScopeNameRoot,
		{Group: "apps", Kind: "Deployment"}:   meta.RESTScopeNameNamespace,
	} {
		m, err := mapper.RESTMapping(gk)
		if err != nil {
			t.Errorf("RESTMapping(%v): %v", gk, err)
			continue
		}
		if m.Scope.Name() != scope {
			t.Errorf("RESTMapping(%v) scope %s, want %s", gk, m.Scope.Name(), scope)
		}
	}

	for _, path := range []string{"/apis/nothing.example.com", "/apis/apps/v9", "/api/v9"} {
		if code, body := rawDo(t, c, "GET", path, "", ""); code != http.StatusNotFound {
			t.Errorf("GET %s = %d %s, want 404", path, code, body)
		}
	}
}
