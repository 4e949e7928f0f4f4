package fake_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

func names(items []corev1.ConfigMap) []string {
	var out []string
	for _, cm := range items {
		out = append(out, cm.Namespace+"/"+cm.Name)
	}
	return out
}

// TestList checks namespaces, label selectors and the two field selectors
// every resource supports.
func TestList(t *testing.T) {
	labeled := func(ns, name, app string) *corev1.ConfigMap {
		cm := configMap(ns, name, nil)
		cm.Labels = map[string]string{"app": app}
		return cm
	}
	c := newCluster(t, labeled("a", "x", "web"), labeled("a", "y", "db"), labeled("b", "x", "web"))
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			cs := clientset(t, c, ct.contentType)
			for _, tc := range []struct {
				ns   string
				opts metav1.ListOptions
				want []string
			}{
				{"", metav1.ListOptions{}, []string{"a/x", "a/y", "b/x"}},
				{"a", metav1.ListOptions{}, []string{"a/x", "a/y"}},
				{"", metav1.ListOptions{LabelSelector: "app=web"}, []string{"a/x", "b/x"}},
				{"", metav1.ListOptions{LabelSelector: "app in (db),app!=web"}, []string{"a/y"}},
				{"", metav1.ListOptions{FieldSelector: "metadata.name=x"}, []string{"a/x", "b/x"}},
				{"", metav1.ListOptions{FieldSelector: "metadata.namespace!=a"}, []string{"b/x"}},
				{"a", metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "metadata.name=y"}, nil},
				{"a", metav1.ListOptions{ResourceVersion: "1"}, []string{"a/x", "a/y"}}, // resourceVersion ignored
			} {
				list, err := cs.CoreV1().ConfigMaps(tc.ns).List(t.Context(), tc.opts)
				if err != nil {
					t.Fatalf("list %q %+v: %v", tc.ns, tc.opts, err)
				}
				if got := names(list.Items); !slices.Equal(got, tc.want) {
					t.Errorf("list %q %+v = %v, want %v", tc.ns, tc.opts, got, tc.want)
				}
				if list.ResourceVersion != "3" {
					t.Errorf("list resourceVersion = %q, want 3", list.ResourceVersion)
				}
				for _, item := range list.Items {
					if item.Kind != "" || item.APIVersion != "" {
						t.Errorf("list item has kind %q apiVersion %q; kube-apiserver sends none in lists of built-in kinds", item.Kind, item.APIVersion)
					}
				}
			}
			_, err := cs.CoreV1().ConfigMaps("").List(t.Context(), metav1.ListOptions{FieldSelector: "data.k=v"})
			if !apierrors.IsBadRequest(err) {
				t.Errorf("list with an unsupported field selector: %v, want BadRequest", err)
			}
		})
	}
}

// TestPaths checks the URL layout: cluster-scoped resources, the
// namespace object and its status, and paths the fake does not serve.
func TestPaths(t *testing.T) {
	c := newCluster(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cr"}},
		&Gadget{ObjectMeta: metav1.ObjectMeta{Name: "g"}},
		configMap("ns", "cm", nil))
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/api/v1/namespaces/ns", 200},
		{"GET", "/api/v1/namespaces/ns/status", 200},
		{"GET", "/api/v1/namespaces", 200},
		{"GET", "/api/v1/nodes/n", 200},
		{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/cr", 200},
		{"GET", "/apis/test.ctrlkit.io/v1/gadgets/g", 200},
		{"GET", "/api/v1/namespaces/ns/configmaps/cm", 200},
		{"GET", "/api/v1/namespaces/ns/configmaps/cm?resourceVersion=999", 200}, // resourceVersion ignored
		{"GET", "/api/v1/configmaps", 200},
		{"GET", "/api/v1/configmaps/cm", 404},                        // namespaced resource without a namespace
		{"GET", "/api/v1/namespaces/ns/nodes/n", 404},                // cluster-scoped resource in a namespace
		{"GET", "/api/v1/namespaces/ns/configmaps/cm/status", 404},   // no status subresource
		{"GET", "/api/v1/namespaces/ns/configmaps/cm/scale", 404},    // unknown subresource
		{"GET", "/api/v1/namespaces/ns/configmapz/cm", 404},          // unknown resource
		{"GET", "/apis/test.ctrlkit.io/v1/gadgets/g/status", 404},    // Gadget has no Status field
		{"GET", "/api/v1/namespaces/ns/configmaps/missing", 404},     // no such object
		{"POST", "/api/v1/namespaces/ns/configmaps/cm", 405},         // create names no object
		{"PUT", "/api/v1/namespaces/ns/configmaps", 405},             // update names one object
		{"DELETE", "/api/v1/configmaps", 405},                        // deletecollection needs a namespace
		{"POST", "/api/v1/configmaps", 405},                          // so does create
		{"DELETE", "/api/v1/namespaces/ns/pods/p/status", 405},       // status cannot be deleted
		{"GET", "/api/v1/namespaces/ns/configmaps/cm/status/x", 404}, // too deep
	} {
		code, body := rawDo(t, c, tc.method, tc.path, "", "")
		if code != tc.want {
			t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, code, body, tc.want)
		}
		if code != 200 {
			var s metav1.Status
			if err := json.Unmarshal(body, &s); err != nil || s.Kind != "Status" || int(s.Code) != code {
				t.Errorf("%s %s answered %s, want a metav1.Status with code %d", tc.method, tc.path, body, code)
			}
		}
	}
	var refused []string
	for _, w := range c.Writes() {
		if w.Err != nil {
			refused = append(refused, w.Verb+" "+w.Resource.Resource+"/"+w.Subresource)
		}
	}
	if want := []string{"create configmaps/", "update configmaps/", "deletecollection configmaps/", "create configmaps/", "delete pods/status"}; !slices.Equal(refused, want) {
		t.Errorf("refused writes recorded %q, want %q", refused, want)
	}
}

// TestUpdateRules checks 404 instead of create-on-update, conflicts on a
// stale resourceVersion, an unconditional update without one, and the
// name and namespace checks.
func TestUpdateRules(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			c := newCluster(t, configMap("ns", "a", map[string]string{"k": "1"}))
			cms := clientset(t, c, ct.contentType).CoreV1().ConfigMaps("ns")
			ctx := t.Context()

			if _, err := cms.Update(ctx, configMap("ns", "missing", nil), metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("update of a missing object: %v, want NotFound", err)
			}
			var stored corev1.ConfigMap
			if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "missing"}, &stored); !apierrors.IsNotFound(err) {
				t.Errorf("after an update of a missing object, Get: %v, want NotFound (no create on update)", err)
			}

			cm, err := cms.Get(ctx, "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			stale := cm.DeepCopy()
			cm.Data["k"] = "2"
			if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			stale.Data["k"] = "lost"
			if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("update with a stale resourceVersion: %v, want Conflict", err)
			}

			unconditional := configMap("ns", "a", map[string]string{"k": "3"})
			got, err := cms.Update(ctx, unconditional, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update without resourceVersion: %v, want it accepted", err)
			}
			if got.Data["k"] != "3" || got.UID != cm.UID || !got.CreationTimestamp.Equal(&cm.CreationTimestamp) {
				t.Errorf("unconditional update = %+v, want data k=3 and the stored uid and creationTimestamp", got)
			}

			otherUID := got.DeepCopy()
			otherUID.UID = "someone-else"
			if _, err := cms.Update(ctx, otherUID, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("update with another uid: %v, want Conflict", err)
			}
			if _, err := clientset(t, c, ct.contentType).CoreV1().ConfigMaps("other").Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsBadRequest(err) {
				t.Errorf("update with another namespace than the URL's: %v, want BadRequest", err)
			}
		})
	}
	c := newCluster(t, configMap("ns", "a", nil))
	code, body := rawDo(t, c, "PUT", "/api/v1/namespaces/ns/configmaps/a", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "does not match the name on the URL") {
		t.Errorf("PUT with another name than the URL's = %d %s, want 400", code, body)
	}
	code, body = rawDo(t, c, "PUT", "/api/v1/namespaces/ns/configmaps/a", "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}`)
	if code != http.StatusBadRequest {
		t.Errorf("PUT of a Secret to configmaps = %d %s, want 400", code, body)
	}
}

// TestDryRun checks that dryRun=All answers as if and stores nothing.
func TestDryRun(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			c := newCluster(t, configMap("ns", "a", map[string]string{"k": "1"}))
			cms := clientset(t, c, ct.contentType).CoreV1().ConfigMaps("ns")
			ctx := t.Context()
			dry := []string{metav1.DryRunAll}

			created, err := cms.Create(ctx, configMap("ns", "b", map[string]string{"k": "1"}), metav1.CreateOptions{DryRun: dry})
			if err != nil || created.Name != "b" || created.UID == "" {
				t.Errorf("dry-run create = %+v, %v; want the object as it would be", created, err)
			}
			updated, err := cms.Update(ctx, configMap("ns", "a", map[string]string{"k": "2"}), metav1.UpdateOptions{DryRun: dry})
			if err != nil || updated.Data["k"] != "2" {
				t.Errorf("dry-run update = %+v, %v; want the object as it would be", updated, err)
			}
			patched, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"k":"3"}}`), metav1.PatchOptions{DryRun: dry})
			if err != nil || patched.Data["k"] != "3" {
				t.Errorf("dry-run patch = %+v, %v; want the object as it would be", patched, err)
			}
			if err := cms.Delete(ctx, "a", metav1.DeleteOptions{DryRun: dry}); err != nil {
				t.Errorf("dry-run delete: %v", err)
			}
			if _, err := cms.Create(ctx, configMap("ns", "c", nil), metav1.CreateOptions{DryRun: []string{"Some"}}); !apierrors.IsBadRequest(err) {
				t.Errorf("dryRun=Some: %v, want BadRequest", err)
			}

			list, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 || list.Items[0].Data["k"] != "1" || list.ResourceVersion != "1" {
				t.Errorf("after dry runs, list = %v at %s, want only a with k=1 at resourceVersion 1", list.Items, list.ResourceVersion)
			}
			for _, w := range c.Writes()[:4] {
				if !w.DryRun || w.Err != nil {
					t.Errorf("write %s recorded DryRun %v, Err %v; want true, nil", w.Verb, w.DryRun, w.Err)
				}
			}
		})
	}
}

// TestWritesRecord checks what Writes records for accepted and refused
// writes, with protobuf bodies re-encoded as JSON.
func TestWritesRecord(t *testing.T) {
	c := newCluster(t, configMap("ns", "a", nil))
	cms := clientset(t, c, "application/vnd.kubernetes.protobuf").CoreV1().ConfigMaps("ns")
	ctx := t.Context()
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, configMap("ns", "b", map[string]string{"k": "v"}), metav1.CreateOptions{FieldManager: "me"}); err != nil {
		t.Fatal(err)
	}
	_, refused := cms.Create(ctx, configMap("ns", "b", nil), metav1.CreateOptions{})
	if _, err := cms.Patch(ctx, "a", types.JSONPatchType, []byte(`[{"op":"add","path":"/data","value":{"x":"y"}}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}

	writes := c.Writes()
	var verbs []string
	for _, w := range writes {
		verbs = append(verbs, w.Verb)
		if w.Resource != corev1.SchemeGroupVersion.WithResource("configmaps") || w.Namespace != "ns" {
			t.Errorf("%s recorded resource %v namespace %q", w.Verb, w.Resource, w.Namespace)
		}
	}
	if want := []string{"create", "create", "patch", "delete", "deletecollection"}; !slices.Equal(verbs, want) {
		t.Fatalf("verbs %v, want %v (reads are not recorded)", verbs, want)
	}
	create := writes[0]
	var body corev1.ConfigMap
	if err := json.Unmarshal(create.Body, &body); err != nil || body.Data["k"] != "v" {
		t.Errorf("create body %q (%v): want the protobuf body as JSON", create.Body, err)
	}
	if create.Name != "b" || create.FieldManager != "me" || create.Err != nil || create.Object.(*corev1.ConfigMap).ResourceVersion == "" {
		t.Errorf("create recorded %+v", create)
	}
	if w := writes[1]; !apierrors.IsAlreadyExists(w.Err) || w.Err.Error() != refused.Error() || w.Object != nil {
		t.Errorf("refused create recorded Err %v, Object %v; want the AlreadyExists the client got and no object", w.Err, w.Object)
	}
	if w := writes[2]; w.PatchType != types.JSONPatchType || w.Name != "a" || string(w.Body) != `[{"op":"add","path":"/data","value":{"x":"y"}}]` {
		t.Errorf("patch recorded %+v", w)
	}
	if w := writes[3]; w.Name != "b" || w.Object != nil || w.Err != nil {
		t.Errorf("delete recorded %+v", w)
	}
	c.ResetWrites()
	if n := len(c.Writes()); n != 0 {
		t.Errorf("after ResetWrites, %d writes", n)
	}
	_ = fake.Host
}

// TestYAMLBody checks that a YAML body is decoded, and recorded as JSON.
func TestYAMLBody(t *testing.T) {
	c := newCluster(t)
	code, body := rawDo(t, c, "POST", "/api/v1/namespaces/ns/configmaps", "application/yaml",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n")
	if code != http.StatusCreated {
		t.Fatalf("POST YAML = %d %s, want 201", code, body)
	}
	var cm corev1.ConfigMap
	if err := c.Get(types.NamespacedName{Namespace: "ns", Name: "from-yaml"}, &cm); err != nil || cm.Data["k"] != "v" {
		t.Errorf("stored %+v, %v; want data k=v", cm, err)
	}
	if w := c.Writes()[0]; !json.Valid(w.Body) {
		t.Errorf("recorded body %q, want JSON", w.Body)
	}
}
