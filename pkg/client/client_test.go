package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: data}
}

func TestNewRefusesBadOptions(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, tc := range []struct {
		name string
		cfg  *rest.Config
		opts client.Options
		want string
	}{
		{"nil config", nil, client.Options{Mapper: mapper}, "rest config is nil"},
		{"no mapper", &rest.Config{Host: "http://x"}, client.Options{}, "Options.Mapper is nil"},
		{"negative timeout", &rest.Config{Host: "http://x"}, client.Options{Mapper: mapper, ReadYourWrites: client.ReadYourWrites{Timeout: -time.Second}}, "ReadYourWrites.Timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(tc.cfg, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestWritesRecordTheirManager checks the query every write carries: the
// field manager, dryRun for a dry run, and force for applies only.
func TestWritesRecordTheirManager(t *testing.T) {
	ctx := context.Background()
	cluster, c := newFake(t)
	cm := configMap("a", map[string]string{"k": "v"})
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["k"] = "w"
	if err := c.With(client.WriteOptions{DryRun: true, FieldManager: "other"}).Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.With(client.WriteOptions{Force: true}).Apply(ctx, newGizmoAC("ns", "g").withSize(2)); err != nil {
		t.Fatal(err)
	}
	if err := c.With(client.WriteOptions{Force: true}).Patch(ctx, cm, client.JSONPatch(client.JSONPatchOp{Op: "replace", Path: "/data/k", Value: "x"})); err != nil {
		t.Fatal(err)
	}
	w := cluster.Writes()
	if len(w) != 4 {
		t.Fatalf("%d writes, want 4: %+v", len(w), w)
	}
	for i, want := range []struct {
		verb, manager string
		dry, force    bool
	}{
		{"create", "tester", false, false},
		{"update", "other", true, false},
		{"apply", "tester", false, true},
		{"patch", "tester", false, false}, // force is for applies only
	} {
		got := w[i]
		if got.Verb != want.verb || got.FieldManager != want.manager || got.DryRun != want.dry || got.Force != want.force {
			t.Errorf("write %d: %s manager %q dryRun %v force %v, want %s %q %v %v", i, got.Verb, got.FieldManager, got.DryRun, got.Force, want.verb, want.manager, want.dry, want.force)
		}
	}
	var stored corev1.ConfigMap
	if err := cluster.Get(types.NamespacedName{Namespace: "ns", Name: "a"}, &stored); err != nil || stored.Data["k"] != "x" {
		t.Errorf("stored %v (%v), want k=x: the dry run must not have changed it", stored.Data, err)
	}
}

// TestAnswerReplacesObject checks that a write sets the object to the
// server's answer, every field of it, and leaves it alone on failure.
func TestAnswerReplacesObject(t *testing.T) {
	ctx := context.Background()
	_, c := newFake(t)
	g := &Gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Labels: map[string]string{"drop": "1", "keep": "1"}},
		Spec: GizmoSpec{Size: 1, Color: "red", Tags: map[string]string{"a": "1"}}}
	if err := c.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	err := c.Patch(ctx, g, client.JSONPatch(
		client.JSONPatchOp{Op: "remove", Path: "/metadata/labels/drop"},
		client.JSONPatchOp{Op: "remove", Path: "/spec/color"},
		client.JSONPatchOp{Op: "remove", Path: "/spec/tags"},
	))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Labels["drop"]; ok || g.Spec.Color != "" || g.Spec.Tags != nil {
		t.Errorf("after the patch the object holds labels %v color %q tags %v: fields the answer lacks must be gone", g.Labels, g.Spec.Color, g.Spec.Tags)
	}
	// A status sent with an Update is ignored by the server; the answer
	// says so.
	g.Status.Seen = 99
	if err := c.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	if g.Status.Seen != 0 {
		t.Errorf("status.seen %d after Update, want the server's 0", g.Status.Seen)
	}
	// A failed write leaves the object as it was.
	stale := g.DeepCopyObject().(*Gizmo)
	stale.ResourceVersion = "1"
	stale.Spec.Size = 7
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("Update with a stale resourceVersion = %v, want a conflict", err)
	}
	if stale.Spec.Size != 7 || stale.ResourceVersion != "1" {
		t.Errorf("a failed Update changed the object: size %d resourceVersion %s", stale.Spec.Size, stale.ResourceVersion)
	}
	// A read into a used object replaces it too.
	used := &Gizmo{Spec: GizmoSpec{Color: "blue"}}
	if err := c.GetFromServer(ctx, types.NamespacedName{Namespace: "ns", Name: "g"}, used); err != nil {
		t.Fatal(err)
	}
	if used.Spec.Color != "" || used.Name != "g" {
		t.Errorf("GetFromServer into a used object: %+v, want the server's object only", used)
	}
}

// TestRefusedBeforeSending checks the errors the client finds itself: no
// request is sent for them.
func TestRefusedBeforeSending(t *testing.T) {
	ctx := context.Background()
	cluster, c := newFake(t, &Gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}})
	g := &Gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	type unknown struct{ corev1.ConfigMap }
	for _, tc := range []struct {
		name  string
		write func() error
		want  string
	}{
		{"strategic merge on a custom type", func() error { return c.Patch(ctx, g, client.StrategicMergeFrom(g, client.NoLock)) }, "only client-go's built-in types"},
		{"empty JSON patch", func() error { return c.Patch(ctx, g, client.JSONPatch()) }, "at least one operation"},
		{"apply as a raw patch", func() error { return c.Patch(ctx, g, client.RawPatch(types.ApplyPatchType, []byte("{}"))) }, "use Client.Apply"},
		{"nil patch", func() error { return c.Patch(ctx, g, nil) }, "patch is nil"},
		{"update without a name", func() error { return c.Update(ctx, &Gizmo{}) }, "has no name"},
		{"delete without a name", func() error { return c.Delete(ctx, &Gizmo{}, client.DeleteOptions{}) }, "has no name"},
		{"apply without a name", func() error { return c.Apply(ctx, newGizmoAC("ns", "")) }, "apiVersion, kind and name are required"},
		{"nil apply configuration", func() error { return c.Apply(ctx, (*gizmoAC)(nil)) }, "is nil"},
		{"type not in the scheme", func() error { return c.Create(ctx, &unknown{}) }, "not in the client's scheme"},
		{"all namespaces", func() error { return c.DeleteAllOf(ctx, &Gizmo{}, client.ListOptions{}, client.DeleteOptions{}) }, "ListOptions.Namespace is empty"},
		{"list of a non-list", func() error { return c.ListFromServer(ctx, &Gizmo{}, client.ListOptions{}) }, "not a list type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
	if w := cluster.Writes(); len(w) != 0 {
		t.Errorf("%d requests sent, want none: %+v", len(w), w)
	}
}

// TestPatches checks each kind of patch against the fake: merge with and
// without the optimistic lock, strategic merge, JSON patch with a test.
func TestPatches(t *testing.T) {
	ctx := context.Background()
	cluster, c := newFake(t, configMap("a", map[string]string{"k": "v"}))
	var cached corev1.ConfigMap
	if err := c.GetFromServer(ctx, types.NamespacedName{Namespace: "ns", Name: "a"}, &cached); err != nil {
		t.Fatal(err)
	}
	// Someone else changes another key meanwhile.
	other := cached.DeepCopy()
	other.Data["theirs"] = "x"
	if err := c.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	mine := cached.DeepCopy()
	mine.Data["mine"] = "y"
	if err := c.Patch(ctx, mine.DeepCopy(), client.MergeFrom(&cached, client.OptimisticLock)); !apierrors.IsConflict(err) {
		t.Errorf("locked merge patch from a stale original = %v, want a conflict", err)
	}
	if err := c.Patch(ctx, mine, client.MergeFrom(&cached, client.NoLock)); err != nil {
		t.Fatal(err)
	}
	if mine.Data["theirs"] != "x" || mine.Data["mine"] != "y" {
		t.Errorf("after the merge patch data is %v, want both keys", mine.Data)
	}
	before := mine.DeepCopy()
	mine.Labels = map[string]string{"l": "1"}
	if err := c.Patch(ctx, mine, client.StrategicMergeFrom(before, client.OptimisticLock)); err != nil {
		t.Fatal(err)
	}
	err := c.Patch(ctx, mine, client.JSONPatch(client.JSONPatchOp{Op: "test", Path: "/data/k", Value: "not-v"}, client.JSONPatchOp{Op: "remove", Path: "/data/k"}))
	if err == nil {
		t.Error("a JSON patch whose test fails succeeded")
	}
	var sent []string
	for _, w := range cluster.Writes() {
		sent = append(sent, string(w.PatchType))
	}
	// The update, the refused locked patch, then one of each kind.
	want := "|application/merge-patch+json|application/merge-patch+json|application/strategic-merge-patch+json|application/json-patch+json"
	if got := strings.Join(sent, "|"); got != want {
		t.Errorf("patch types %s, want %s", got, want)
	}
}

// TestStatusAndDelete checks the status subresource and deletion with
// preconditions and finalizers.
func TestStatusAndDelete(t *testing.T) {
	ctx := context.Background()
	cluster, c := newFake(t)
	g := &Gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Finalizers: []string{"test.ctrlkit.io/hold"}}, Spec: GizmoSpec{Size: 1}}
	if err := c.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.Status.Seen, g.Spec.Size = 5, 9
	if err := c.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	if g.Status.Seen != 5 || g.Spec.Size != 1 {
		t.Errorf("after Status().Update: seen %d size %d, want 5 and the spec unchanged (1)", g.Status.Seen, g.Spec.Size)
	}
	// The apply takes status.seen over from the update before it, which
	// kube-apiserver counts as another manager's: without force, a 409.
	if err := c.Status().Apply(ctx, newGizmoAC("ns", "g").withStatus(6)); !apierrors.IsConflict(err) {
		t.Fatalf("Status().Apply of a field the update owns = %v, want a conflict", err)
	}
	if err := c.With(client.WriteOptions{Force: true}).Status().Apply(ctx, newGizmoAC("ns", "g").withStatus(6)); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, g, client.DeleteOptions{UID: "someone-else"}); !apierrors.IsConflict(err) {
		t.Errorf("Delete with another UID = %v, want a conflict", err)
	}
	if err := c.Delete(ctx, g, client.DeleteOptions{UID: g.UID, PropagationPolicy: metav1.DeletePropagationForeground}); err != nil {
		t.Fatal(err)
	}
	var marked Gizmo
	key := types.NamespacedName{Namespace: "ns", Name: "g"}
	if err := cluster.Get(key, &marked); err != nil || marked.DeletionTimestamp == nil || marked.Status.Seen != 6 {
		t.Fatalf("after Delete the finalizer must hold it marked, with the applied status 6: %+v (%v)", marked, err)
	}
	orig := marked.DeepCopyObject().(*Gizmo)
	marked.Finalizers = nil
	if err := c.Patch(ctx, &marked, client.MergeFrom(orig, client.OptimisticLock)); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Get(key, &Gizmo{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the last finalizer went: %v, want not found", err)
	}
	if err := client.IgnoreNotFound(c.Delete(ctx, g, client.DeleteOptions{})); err != nil {
		t.Errorf("IgnoreNotFound(Delete of a gone object) = %v", err)
	}
}

// TestListAndDeleteAllOf checks ListFromServer and DeleteAllOf with a
// label selector.
func TestListAndDeleteAllOf(t *testing.T) {
	ctx := context.Background()
	a, b := configMap("a", nil), configMap("b", nil)
	a.Labels, b.Labels = map[string]string{"app": "x"}, map[string]string{"app": "y"}
	_, c := newFake(t, a, b)
	sel := labels.SelectorFromSet(labels.Set{"app": "x"})
	var list corev1.ConfigMapList
	if err := c.ListFromServer(ctx, &list, client.ListOptions{Namespace: "ns", LabelSelector: sel}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Errorf("listed %d, want a only", len(list.Items))
	}
	if err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.ListOptions{Namespace: "ns", LabelSelector: sel}, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.ListFromServer(ctx, &list, client.ListOptions{Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "b" {
		t.Errorf("after DeleteAllOf app=x: %d left, want b only", len(list.Items))
	}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, configMap("b", nil))); err != nil {
		t.Errorf("IgnoreAlreadyExists(Create of an existing name) = %v", err)
	}
}

func TestCacheLagError(t *testing.T) {
	cause := context.DeadlineExceeded
	err := error(&client.CacheLagError{Namespace: "ns", Name: "a", ResourceVersion: "7", Waited: time.Second, Err: cause})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("CacheLagError does not unwrap to its cause")
	}
	for _, part := range []string{"ns/a", "succeeded", "resourceVersion 7", "ReadYourWrites.Timeout"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("%q does not say %q", err, part)
		}
	}
}

// TestContentTypes checks what travels on the wire: protobuf for
// client-go's built-in types, JSON for custom types, JSON for patches.
func TestContentTypes(t *testing.T) {
	ctx := context.Background()
	s := newScheme(t)
	cluster, err := fake.New(fake.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	record := roundTripper(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		seen = append(seen, req.Method+" "+req.Header.Get("Content-Type")+" accept "+req.Header.Get("Accept"))
		mu.Unlock()
		return cluster.RoundTrip(req)
	})
	c, err := client.New(cluster.Config(), client.Options{Scheme: s, Mapper: cluster.RESTMapper(), HTTPClient: &http.Client{Transport: record}})
	if err != nil {
		t.Fatal(err)
	}
	cm := configMap("a", nil)
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &Gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, cm, client.JSONPatch(client.JSONPatchOp{Op: "add", Path: "/data", Value: map[string]string{"k": "v"}})); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POST application/vnd.kubernetes.protobuf accept application/vnd.kubernetes.protobuf,application/json",
		"POST application/json accept application/json",
		"PATCH application/json-patch+json accept application/vnd.kubernetes.protobuf,application/json",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
