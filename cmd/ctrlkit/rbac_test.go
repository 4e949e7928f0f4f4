package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestMarkersMatchTemplates keeps markers, from which ctrlkit new writes
// config/rbac/role.yaml, in step with the +kubebuilder:rbac markers the
// generated code carries, from which `make manifests` rewrites it, for
// every template with and without the webhooks.
func TestMarkersMatchTemplates(t *testing.T) {
	for _, template := range templateNames {
		for _, webhook := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/webhook=%v", template, webhook), func(t *testing.T) {
				p, err := newProject(NewOptions{Module: "example.com/x-operator", Group: "x.example.com", Version: "v1", Kind: "X",
					Template: template, Webhook: webhook, Dir: filepath.Join(t.TempDir(), "x")})
				if err != nil {
					t.Fatal(err)
				}
				files, err := render(p)
				if err != nil {
					t.Fatal(err)
				}
				var inCode []string
				for _, f := range files {
					if !strings.HasSuffix(f.Path, ".go") {
						continue
					}
					for _, l := range strings.Split(string(f.Data), "\n") {
						if m, ok := strings.CutPrefix(strings.TrimSpace(l), "// +kubebuilder:rbac:"); ok {
							inCode = append(inCode, canonicalMarker(t, m))
						}
					}
				}
				var want []string
				for _, m := range markers(p) {
					want = append(want, fmt.Sprintf("groups=%s,namespace=%s,resourceNames=%s,resources=%s,roleName=%s,verbs=%s",
						strings.Join(m.Groups, ";"), m.Namespace, strings.Join(m.ResourceNames, ";"), strings.Join(m.Resources, ";"), m.RoleName, strings.Join(m.Verbs, ";")))
				}
				slices.Sort(inCode)
				slices.Sort(want)
				if !slices.Equal(inCode, want) {
					t.Errorf("markers in the code:\n  %s\nmarkers(p):\n  %s", strings.Join(inCode, "\n  "), strings.Join(want, "\n  "))
				}
			})
		}
	}
}

// canonicalMarker spells the arguments of an rbac marker as markers(p)
// are spelled in TestMarkersMatchTemplates: every key, sorted, values
// unquoted.
func canonicalMarker(t *testing.T, args string) string {
	t.Helper()
	kv := map[string]string{"groups": "", "namespace": "", "resourceNames": "", "resources": "", "roleName": "", "verbs": ""}
	for _, a := range strings.Split(args, ",") {
		k, v, ok := strings.Cut(a, "=")
		if _, known := kv[k]; !ok || !known {
			t.Fatalf("marker argument %q of %q is not understood by this test", a, args)
		}
		kv[k] = strings.Trim(v, `"`)
	}
	return fmt.Sprintf("groups=%s,namespace=%s,resourceNames=%s,resources=%s,roleName=%s,verbs=%s", kv["groups"], kv["namespace"], kv["resourceNames"], kv["resources"], kv["roleName"], kv["verbs"])
}

func TestMergeRules(t *testing.T) {
	r := func(groups, resources, verbs string) rule {
		return rule{Groups: strings.Split(groups, ";"), Resources: strings.Split(resources, ";"), Verbs: strings.Split(verbs, ";")}
	}
	for _, tc := range []struct {
		name     string
		in, want []rule
	}{
		{"verbs of one resource merge",
			[]rule{r("g", "x", "list;watch"), r("g", "x", "create;list")},
			[]rule{r("g", "x", "create;list;watch")}},
		{"resources with the same verbs merge",
			[]rule{r("g", "x/status", "update"), r("g", "x/finalizers", "update")},
			[]rule{r("g", "x/finalizers;x/status", "update")}},
		{"groups with the same resources and verbs merge",
			[]rule{r("b", "x", "get"), r("a", "x", "get")},
			[]rule{r("a;b", "x", "get")}},
		{"sorted by groups, then resources; core first",
			[]rule{r("apps.example.com", "y", "get"), r("apps", "x", "list"), r("", "events", "create"), r("apps.example.com", "y/status", "update")},
			[]rule{r("", "events", "create"), r("apps", "x", "list"), r("apps.example.com", "y", "get"), r("apps.example.com", "y/status", "update")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := make([]rule, len(tc.in))
			for i, x := range tc.in {
				in[i] = normalized(x)
			}
			if got := mergeRules(in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("mergeRules = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWebhookRulesNameTheirObjects: with --webhook, the role may get and
// patch only the operator's own webhook configurations, and read and
// update only its own certificate Secret; a create, which RBAC cannot
// limit to a name, is the one rule without names. Before, the role could
// patch every admission webhook configuration in the cluster (point
// another's at itself) and read every Secret of its namespace.
func TestWebhookRulesNameTheirObjects(t *testing.T) {
	p, err := newProject(NewOptions{Module: "example.com/x-operator", Group: "x.example.com", Version: "v1", Kind: "X",
		Template: "deployment", Webhook: true, Dir: filepath.Join(t.TempDir(), "x")})
	if err != nil {
		t.Fatal(err)
	}
	own := map[string][]string{
		"validatingwebhookconfigurations": {p.Name + "-validating"},
		"mutatingwebhookconfigurations":   {p.Name + "-mutating"},
		"secrets":                         {p.Name + "-webhook-certs"},
	}
	for _, r := range roles(p) {
		for _, rule := range r.Rules {
			for _, res := range rule.Resources {
				want, ok := own[res]
				switch {
				case !ok:
				case slices.Equal(rule.Verbs, []string{"create"}):
					if len(rule.ResourceNames) != 0 {
						t.Errorf("%s: the create rule of %s names %q: a create cannot be limited to a name", r.Name, res, rule.ResourceNames)
					}
				case !slices.Equal(rule.ResourceNames, want):
					t.Errorf("%s: %v on %s for names %q, want only %q", r.Name, rule.Verbs, res, rule.ResourceNames, want)
				}
			}
		}
	}
}
