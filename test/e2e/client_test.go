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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

// The tests of package client against a real API server: every verb on a
// built-in type (ConfigMap, Deployment) and on the custom type Widget,
// server-side apply and its ownership rules, preconditions, dry runs,
// read-your-own-writes through a manager's cache, the leadership fence,
// and CacheLagError.

// newClient returns a client for the admin config. Options left zero get
// the e2e scheme, a discovery-backed mapper and the field manager
// e2e-client.
func newClient(t testing.TB, opts client.Options) *client.Client {
	t.Helper()
	return newClientFor(t, cfg, opts)
}

// newClientFor is newClient for the config c.
func newClientFor(t testing.TB, c *rest.Config, opts client.Options) *client.Client {
	t.Helper()
	if opts.Scheme == nil {
		opts.Scheme = newScheme(t)
	}
	if opts.Mapper == nil {
		opts.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	}
	if opts.FieldManager == "" {
		opts.FieldManager = "e2e-client"
	}
	cl, err := client.New(c, opts)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return cl
}

// kind is what the tests that run on both a built-in and a custom type need
// to know about one: how to make a valid object whose "value" (a string
// field: a ConfigMap's data.v, a Widget's spec.color) is v, and how to read
// and set that value.
type kind[T client.Object] struct {
	make  func(namespace, name, v string) T
	empty func() T
	list  func() runtime.Object
	set   func(T, string)
	get   func(T) string
	path  string // JSON pointer of the value
	// ac is an apply configuration that sets the value, and for Widget
	// the required spec.size at make's 1.
	ac func(namespace, name, v string) client.ApplyConfiguration
}

func configMaps() kind[*corev1.ConfigMap] {
	return kind[*corev1.ConfigMap]{
		make: func(namespace, name, v string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{"v": v}}
		},
		empty: func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		list:  func() runtime.Object { return &corev1.ConfigMapList{} },
		set: func(o *corev1.ConfigMap, v string) {
			if o.Data == nil {
				o.Data = map[string]string{}
			}
			o.Data["v"] = v
		},
		get:  func(o *corev1.ConfigMap) string { return o.Data["v"] },
		path: "/data/v",
		ac: func(namespace, name, v string) client.ApplyConfiguration {
			return corev1ac.ConfigMap(name, namespace).WithData(map[string]string{"v": v})
		},
	}
}

func widgets() kind[*Widget] {
	return kind[*Widget]{
		make: func(namespace, name, v string) *Widget {
			return &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: WidgetSpec{Size: 1, Color: v}}
		},
		empty: func() *Widget { return &Widget{} },
		list:  func() runtime.Object { return &WidgetList{} },
		set:   func(o *Widget, v string) { o.Spec.Color = v },
		get:   func(o *Widget) string { return o.Spec.Color },
		path:  "/spec/color",
		ac: func(namespace, name, v string) client.ApplyConfiguration {
			return widgetAC(namespace, name).WithSize(1).WithColor(v)
		},
	}
}

// onBoth runs test on ConfigMaps and on Widgets, as subtests.
func onBoth(t *testing.T, cm func(*testing.T, kind[*corev1.ConfigMap]), w func(*testing.T, kind[*Widget])) {
	t.Run("ConfigMap", func(t *testing.T) { cm(t, configMaps()) })
	t.Run("Widget", func(t *testing.T) { w(t, widgets()) })
}

func deepCopy[T client.Object](o T) T { return o.DeepCopyObject().(T) }

// mustCreate creates obj through c.
func mustCreate[T client.Object](t testing.TB, c *client.Client, obj T) T {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("Create %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return obj
}

// fromServer reads namespace/name from the API server.
func fromServer[T client.Object](t testing.TB, c *client.Client, k kind[T], namespace, name string) T {
	t.Helper()
	obj := k.empty()
	if err := c.GetFromServer(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatalf("GetFromServer %s/%s: %v", namespace, name, err)
	}
	return obj
}

// absentFromServer fails unless namespace/name is not found on the server.
func absentFromServer[T client.Object](t testing.TB, c *client.Client, k kind[T], namespace, name string) {
	t.Helper()
	err := c.GetFromServer(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, k.empty())
	if !apierrors.IsNotFound(err) {
		t.Fatalf("GetFromServer %s/%s = %v, want NotFound", namespace, name, err)
	}
}

// namesIn returns the names of the items of list, sorted.
func namesIn(t testing.TB, list runtime.Object) []string {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range items {
		m, err := meta.Accessor(it)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.GetName())
	}
	slices.Sort(out)
	return out
}

// serverNames lists the names of k's objects that opts select, from the
// API server.
func serverNames[T client.Object](t testing.TB, c *client.Client, k kind[T], opts client.ListOptions) []string {
	t.Helper()
	list := k.list()
	if err := c.ListFromServer(t.Context(), list, opts); err != nil {
		t.Fatalf("ListFromServer %+v: %v", opts, err)
	}
	return namesIn(t, list)
}

// owns reports whether manager owns field (e.g. "f:color") of obj through
// an operation op on subresource sub ("" for the main resource).
func owns(obj metav1.Object, manager string, op metav1.ManagedFieldsOperationType, sub, field string) bool {
	for _, f := range obj.GetManagedFields() {
		if f.Manager == manager && f.Operation == op && f.Subresource == sub && f.FieldsV1 != nil &&
			strings.Contains(f.FieldsV1.GetRawString(), `"`+field+`"`) {
			return true
		}
	}
	return false
}

// managersOf lists the managedFields entries of obj, for failure messages.
func managersOf(obj metav1.Object) string {
	var out []string
	for _, f := range obj.GetManagedFields() {
		raw := ""
		if f.FieldsV1 != nil {
			raw = f.FieldsV1.GetRawString()
		}
		out = append(out, fmt.Sprintf("%s/%s/%s: %s", f.Manager, f.Operation, f.Subresource, raw))
	}
	return strings.Join(out, "; ")
}

// atOrAfter reports whether resourceVersion rv is want or later.
func atOrAfter(rv, want string) bool {
	c, err := resourceversion.CompareResourceVersion(rv, want)
	return err == nil && c >= 0
}

// deployment returns a valid Deployment with one container, app:1.
func deployment(namespace, name string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
			},
		},
	}
}

func containersOf(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Name+"="+c.Image)
	}
	return out
}

// TestClientCreate: Create stores the object and sets the object passed to
// the server's answer, also for generateName; a second Create of the same
// name is AlreadyExists.
func TestClientCreate(t *testing.T) {
	onBoth(t, testCreate[*corev1.ConfigMap], testCreate[*Widget])
}

func testCreate[T client.Object](t *testing.T, k kind[T]) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})

	obj := k.make(ns, "", "created")
	obj.SetGenerateName("gen-")
	mustCreate(t, c, obj)
	if !strings.HasPrefix(obj.GetName(), "gen-") || len(obj.GetName()) <= len("gen-") {
		t.Errorf("after Create with generateName, name = %q, want the server's gen-xxxxx", obj.GetName())
	}
	if obj.GetUID() == "" || obj.GetResourceVersion() == "" || obj.GetCreationTimestamp().Time.IsZero() {
		t.Errorf("after Create: uid %q, resourceVersion %q, creationTimestamp %v: want the server's", obj.GetUID(), obj.GetResourceVersion(), obj.GetCreationTimestamp())
	}
	if got := k.get(obj); got != "created" {
		t.Errorf("after Create, value = %q, want %q", got, "created")
	}
	got := fromServer(t, c, k, ns, obj.GetName())
	if got.GetUID() != obj.GetUID() || got.GetResourceVersion() != obj.GetResourceVersion() || k.get(got) != "created" {
		t.Errorf("server holds uid %s rv %s value %q; Create returned uid %s rv %s", got.GetUID(), got.GetResourceVersion(), k.get(got), obj.GetUID(), obj.GetResourceVersion())
	}
	if !slices.ContainsFunc(got.GetManagedFields(), func(f metav1.ManagedFieldsEntry) bool { return f.Manager == "e2e-client" }) {
		t.Errorf("Create did not write under the field manager e2e-client: %s", managersOf(got))
	}

	mustCreate(t, c, k.make(ns, "named", "one"))
	err := c.Create(t.Context(), k.make(ns, "named", "two"))
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second Create of %s/named = %v, want AlreadyExists", ns, err)
	}
	if client.IgnoreAlreadyExists(err) != nil {
		t.Errorf("IgnoreAlreadyExists(%v) != nil", err)
	}
	if v := k.get(fromServer(t, c, k, ns, "named")); v != "one" {
		t.Errorf("after the failed second Create, value = %q, want %q", v, "one")
	}
}

// TestClientCreateDeployment: a built-in type with defaults travels as
// protobuf and comes back with the server's defaults.
func TestClientCreateDeployment(t *testing.T) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	d := mustCreate(t, c, deployment(ns, "web"))
	if d.UID == "" || d.Generation != 1 {
		t.Errorf("after Create: uid %q generation %d, want the server's", d.UID, d.Generation)
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.RevisionHistoryLimit == nil {
		t.Errorf("after Create, the server's defaults are missing: strategy %q revisionHistoryLimit %v", d.Spec.Strategy.Type, d.Spec.RevisionHistoryLimit)
	}
	got, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != d.UID || !slices.Equal(containersOf(got), []string{"app=app:1"}) {
		t.Errorf("the clientset reads uid %s containers %v, want %s [app=app:1]", got.UID, containersOf(got), d.UID)
	}
}

// TestClientUpdate: Update replaces the object; an Update carrying a stale
// resourceVersion is a conflict and changes nothing.
func TestClientUpdate(t *testing.T) {
	onBoth(t, testUpdate[*corev1.ConfigMap], testUpdate[*Widget])
}

func testUpdate[T client.Object](t *testing.T, k kind[T]) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	obj := mustCreate(t, c, k.make(ns, "u", "0"))
	stale := deepCopy(obj)

	k.set(obj, "1")
	obj.SetLabels(map[string]string{"updated": "yes"})
	if err := c.Update(t.Context(), obj); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if obj.GetResourceVersion() == stale.GetResourceVersion() || k.get(obj) != "1" || obj.GetLabels()["updated"] != "yes" {
		t.Errorf("after Update: rv %s (was %s), value %q, labels %v", obj.GetResourceVersion(), stale.GetResourceVersion(), k.get(obj), obj.GetLabels())
	}
	if got := fromServer(t, c, k, ns, "u"); k.get(got) != "1" || got.GetResourceVersion() != obj.GetResourceVersion() {
		t.Errorf("server holds value %q rv %s, want 1 at %s", k.get(got), got.GetResourceVersion(), obj.GetResourceVersion())
	}

	k.set(stale, "stale")
	err := c.Update(t.Context(), stale)
	if !apierrors.IsConflict(err) {
		t.Fatalf("Update with the stale resourceVersion %s = %v, want a conflict", stale.GetResourceVersion(), err)
	}
	if got := fromServer(t, c, k, ns, "u"); k.get(got) != "1" {
		t.Errorf("after the conflicting Update, value = %q, want 1", k.get(got))
	}

	if err := c.Update(t.Context(), k.make(ns, "missing", "x")); !apierrors.IsNotFound(err) {
		t.Errorf("Update of a missing object = %v, want NotFound", err)
	}
}

// TestClientMergePatch: MergeFrom(orig, NoLock) changes only what differs
// from orig, so it succeeds over a concurrent change of another field;
// MergeFrom(orig, OptimisticLock) from a stale orig is a conflict.
func TestClientMergePatch(t *testing.T) {
	onBoth(t, testMergePatch[*corev1.ConfigMap], testMergePatch[*Widget])
}

func testMergePatch[T client.Object](t *testing.T, k kind[T]) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	orig := deepCopy(mustCreate(t, c, k.make(ns, "p", "0")))

	// Someone else adds a label after orig was read.
	concurrent := deepCopy(orig)
	concurrent.SetLabels(map[string]string{"other": "yes"})
	if err := c.With(client.WriteOptions{FieldManager: "other"}).Update(t.Context(), concurrent); err != nil {
		t.Fatal(err)
	}

	mod := deepCopy(orig)
	k.set(mod, "nolock")
	if err := c.Patch(t.Context(), mod, client.MergeFrom(orig, client.NoLock)); err != nil {
		t.Fatalf("Patch MergeFrom NoLock over a concurrent change: %v", err)
	}
	if k.get(mod) != "nolock" || mod.GetLabels()["other"] != "yes" {
		t.Errorf("after Patch, value %q labels %v: want nolock and the concurrent label kept", k.get(mod), mod.GetLabels())
	}
	if mod.GetResourceVersion() == concurrent.GetResourceVersion() {
		t.Errorf("Patch did not set the object to the server's answer (rv still %s)", mod.GetResourceVersion())
	}

	locked := deepCopy(orig)
	k.set(locked, "locked")
	err := c.Patch(t.Context(), locked, client.MergeFrom(orig, client.OptimisticLock))
	if !apierrors.IsConflict(err) {
		t.Fatalf("Patch MergeFrom OptimisticLock from a stale original = %v, want a conflict", err)
	}
	if got := fromServer(t, c, k, ns, "p"); k.get(got) != "nolock" {
		t.Errorf("after the conflicting Patch, value = %q, want nolock", k.get(got))
	}

	fresh := deepCopy(mod)
	k.set(mod, "locked")
	if err := c.Patch(t.Context(), mod, client.MergeFrom(fresh, client.OptimisticLock)); err != nil {
		t.Fatalf("Patch MergeFrom OptimisticLock from the latest version: %v", err)
	}
	if got := fromServer(t, c, k, ns, "p"); k.get(got) != "locked" || got.GetLabels()["other"] != "yes" {
		t.Errorf("server holds value %q labels %v, want locked and other=yes", k.get(got), got.GetLabels())
	}

	// Removing a field: a merge patch sends null for it.
	orig = deepCopy(mod)
	mod.SetLabels(nil)
	if err := c.Patch(t.Context(), mod, client.MergeFrom(orig, client.NoLock)); err != nil {
		t.Fatal(err)
	}
	if got := fromServer(t, c, k, ns, "p"); len(got.GetLabels()) != 0 {
		t.Errorf("after a Patch removing the labels, labels = %v", got.GetLabels())
	}
}

// TestClientJSONPatch: a JSON patch applies its operations; a failing
// "test" operation fails the whole patch and changes nothing.
func TestClientJSONPatch(t *testing.T) {
	onBoth(t, testJSONPatch[*corev1.ConfigMap], testJSONPatch[*Widget])
}

func testJSONPatch[T client.Object](t *testing.T, k kind[T]) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	obj := mustCreate(t, c, k.make(ns, "j", "0"))

	err := c.Patch(t.Context(), obj, client.JSONPatch(
		client.JSONPatchOp{Op: "test", Path: k.path, Value: "0"},
		client.JSONPatchOp{Op: "replace", Path: k.path, Value: "1"},
		client.JSONPatchOp{Op: "add", Path: "/metadata/labels", Value: map[string]string{"j": "yes"}},
	))
	if err != nil {
		t.Fatalf("JSON patch: %v", err)
	}
	if k.get(obj) != "1" || obj.GetLabels()["j"] != "yes" {
		t.Errorf("after the JSON patch, value %q labels %v", k.get(obj), obj.GetLabels())
	}
	rv := obj.GetResourceVersion()

	failed := deepCopy(obj)
	err = c.Patch(t.Context(), failed, client.JSONPatch(
		client.JSONPatchOp{Op: "test", Path: k.path, Value: "0"},
		client.JSONPatchOp{Op: "replace", Path: k.path, Value: "2"},
	))
	if err == nil {
		t.Fatalf("a JSON patch whose test fails succeeded")
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code < 400 || status.Status().Code >= 500 {
		t.Errorf("a JSON patch whose test fails: %v (%T), want a 4xx from the API server", err, err)
	}
	t.Logf("failing test op: %v (reason %s)", err, apierrors.ReasonForError(err))
	if got := fromServer(t, c, k, ns, "j"); k.get(got) != "1" || got.GetResourceVersion() != rv {
		t.Errorf("after the failed patch the server holds %q at %s, want 1 at %s", k.get(got), got.GetResourceVersion(), rv)
	}

	if err := c.Patch(t.Context(), obj, client.JSONPatch()); err == nil {
		t.Errorf("an empty JSON patch succeeded, want a client-side error")
	}
}

// TestClientStrategicMergePatch: StrategicMergeFrom merges a Deployment's
// containers by name, so a container added concurrently by someone else
// survives (a JSON merge patch from the same stale original replaces the
// list and loses it); pod template labels merge. On Widget it is a clear
// client-side error and nothing is sent.
func TestClientStrategicMergePatch(t *testing.T) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	ctx := t.Context()

	// sidecar adds a container to ns/name through the clientset, as another
	// writer would.
	sidecar := func(name string) {
		t.Helper()
		live, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		live.Spec.Template.Spec.Containers = append(live.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "sidecar:1"})
		if _, err := kube.AppsV1().Deployments(ns).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	orig := mustCreate(t, c, deployment(ns, "smp")).DeepCopy()
	sidecar("smp")
	mod := orig.DeepCopy()
	mod.Spec.Template.Spec.Containers[0].Image = "app:2"
	mod.Spec.Template.Labels["tier"] = "web"
	if err := c.Patch(ctx, mod, client.StrategicMergeFrom(orig, client.NoLock)); err != nil {
		t.Fatalf("strategic merge patch: %v", err)
	}
	want := []string{"app=app:2", "sidecar=sidecar:1"}
	if got := containersOf(mod); !slices.Equal(got, want) {
		t.Errorf("after the strategic merge patch, containers = %v, want %v (merged by name)", got, want)
	}
	if l := mod.Spec.Template.Labels; l["app"] != "smp" || l["tier"] != "web" {
		t.Errorf("after the strategic merge patch, template labels = %v, want app=smp tier=web", l)
	}

	// The same change as a JSON merge patch replaces the list: this is what
	// makes the check above a test of the strategic merge.
	orig = mustCreate(t, c, deployment(ns, "merge")).DeepCopy()
	sidecar("merge")
	mod = orig.DeepCopy()
	mod.Spec.Template.Spec.Containers[0].Image = "app:2"
	if err := c.Patch(ctx, mod, client.MergeFrom(orig, client.NoLock)); err != nil {
		t.Fatal(err)
	}
	if got := containersOf(mod); !slices.Equal(got, []string{"app=app:2"}) {
		t.Errorf("after a JSON merge patch, containers = %v, want the list replaced: [app=app:2]", got)
	}

	// OptimisticLock from the stale original: conflict.
	orig = mustCreate(t, c, deployment(ns, "locked")).DeepCopy()
	sidecar("locked")
	mod = orig.DeepCopy()
	mod.Spec.Template.Spec.Containers[0].Image = "app:2"
	if err := c.Patch(ctx, mod, client.StrategicMergeFrom(orig, client.OptimisticLock)); !apierrors.IsConflict(err) {
		t.Errorf("strategic merge patch with OptimisticLock from a stale original = %v, want a conflict", err)
	}

	// Widget: no strategic merge for custom types.
	w := mustCreate(t, c, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Spec: WidgetSpec{Size: 1, Color: "red"}})
	wmod := w.DeepCopy()
	wmod.Spec.Color = "blue"
	err := c.Patch(ctx, wmod, client.StrategicMergeFrom(w, client.NoLock))
	if err == nil {
		t.Fatal("strategic merge patch of a Widget succeeded, want a client-side error")
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		t.Errorf("strategic merge patch of a Widget: %v is an API error, want a client-side error before any request", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "strategic merge") || !strings.Contains(msg, "MergeFrom") {
		t.Errorf("strategic merge patch of a Widget: %q, want it to say strategic merge is not supported and what to use", msg)
	}
	t.Logf("strategic merge patch of a Widget: %v", err)
	if got := fromServer(t, c, widgets(), ns, "w"); got.ResourceVersion != w.ResourceVersion || got.Spec.Color != "red" {
		t.Errorf("after the refused strategic merge patch, the Widget is %q at %s, want red at %s", got.Spec.Color, got.ResourceVersion, w.ResourceVersion)
	}
}

// TestClientApply: server-side apply creates, then updates, with
// client-go's apply configurations for built-in types and a hand-written
// one for Widget; the apply configuration is not changed; a field the
// manager applied before and omits now is removed.
func TestClientApply(t *testing.T) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{FieldManager: "applier"})
	ctx := t.Context()
	cms := configMaps()

	ac := corev1ac.ConfigMap("cfg", ns).WithLabels(map[string]string{"app": "x"}).WithData(map[string]string{"k": "1", "gone": "soon"})
	if err := c.Apply(ctx, ac); err != nil {
		t.Fatalf("Apply creating a ConfigMap: %v", err)
	}
	if ac.UID != nil || ac.ResourceVersion != nil || len(ac.Data) != 2 {
		t.Errorf("Apply changed the apply configuration: uid %v rv %v data %v", ac.UID, ac.ResourceVersion, ac.Data)
	}
	cm := fromServer(t, c, cms, ns, "cfg")
	if cm.Data["k"] != "1" || cm.Data["gone"] != "soon" || cm.Labels["app"] != "x" {
		t.Errorf("after Apply: data %v labels %v", cm.Data, cm.Labels)
	}
	if !owns(cm, "applier", metav1.ManagedFieldsOperationApply, "", "f:k") {
		t.Errorf("applier does not own data.k through Apply: %s", managersOf(cm))
	}
	if err := c.Apply(ctx, corev1ac.ConfigMap("cfg", ns).WithLabels(map[string]string{"app": "x"}).WithData(map[string]string{"k": "2"})); err != nil {
		t.Fatalf("Apply updating a ConfigMap: %v", err)
	}
	cm2 := fromServer(t, c, cms, ns, "cfg")
	if cm2.Data["k"] != "2" || cm2.UID != cm.UID {
		t.Errorf("after the second Apply: data %v uid %s (was %s)", cm2.Data, cm2.UID, cm.UID)
	}
	if _, ok := cm2.Data["gone"]; ok {
		t.Errorf("data.gone, applied before and omitted now, is still there: %v", cm2.Data)
	}

	// A Deployment, through client-go's apps/v1 apply configurations.
	dac := func(image string) *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("web", ns).WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(2).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": "web"})).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(map[string]string{"app": "web"}).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("app").WithImage(image)))))
	}
	if err := c.Apply(ctx, dac("app:1")); err != nil {
		t.Fatalf("Apply creating a Deployment: %v", err)
	}
	d := &appsv1.Deployment{}
	if err := c.GetFromServer(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 || !slices.Equal(containersOf(d), []string{"app=app:1"}) {
		t.Errorf("after Apply: replicas %d containers %v", *d.Spec.Replicas, containersOf(d))
	}
	if err := c.Apply(ctx, dac("app:2")); err != nil {
		t.Fatalf("Apply updating a Deployment: %v", err)
	}
	if err := c.GetFromServer(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != 2 || !slices.Equal(containersOf(d), []string{"app=app:2"}) {
		t.Errorf("after the second Apply: generation %d containers %v", d.Generation, containersOf(d))
	}

	// A Widget, through the hand-written apply configuration.
	wac := widgetAC(ns, "w").WithSize(3).WithColor("red").WithLabels(map[string]string{"app": "w"})
	if err := c.Apply(ctx, wac); err != nil {
		t.Fatalf("Apply creating a Widget: %v", err)
	}
	w := fromServer(t, c, widgets(), ns, "w")
	if w.Spec.Size != 3 || w.Spec.Color != "red" || w.Labels["app"] != "w" {
		t.Errorf("after Apply: %+v labels %v", w.Spec, w.Labels)
	}
	if !owns(w, "applier", metav1.ManagedFieldsOperationApply, "", "f:color") {
		t.Errorf("applier does not own spec.color through Apply: %s", managersOf(w))
	}
	if err := c.Apply(ctx, widgetAC(ns, "w").WithSize(4).WithColor("red").WithLabels(map[string]string{"app": "w"})); err != nil {
		t.Fatalf("Apply updating a Widget: %v", err)
	}
	if w := fromServer(t, c, widgets(), ns, "w"); w.Spec.Size != 4 || w.Generation != 2 {
		t.Errorf("after the second Apply: size %d generation %d, want 4 and 2", w.Spec.Size, w.Generation)
	}

	// Client-side checks of the apply configuration.
	if err := c.Apply(ctx, (*WidgetApplyConfiguration)(nil)); err == nil {
		t.Errorf("Apply of a nil apply configuration succeeded")
	}
	noName := widgetAC(ns, "").WithSize(1)
	if err := c.Apply(ctx, noName); err == nil || !strings.Contains(err.Error(), "name") {
		t.Errorf("Apply of an apply configuration without a name = %v, want an error naming it", err)
	}
}

// TestClientApplyOwnership: a field another manager set, by Update or by
// Apply, makes a conflicting Apply fail with a conflict; with Force, Apply
// takes it over.
func TestClientApplyOwnership(t *testing.T) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{FieldManager: "a"})
	other := c.With(client.WriteOptions{FieldManager: "other"})
	force := c.With(client.WriteOptions{Force: true})
	ctx := t.Context()

	t.Run("ConfigMap", func(t *testing.T) {
		cms := configMaps()
		if err := c.Apply(ctx, corev1ac.ConfigMap("cm", ns).WithData(map[string]string{"x": "1"})); err != nil {
			t.Fatal(err)
		}
		// other sets data.y by Update.
		cm := fromServer(t, c, cms, ns, "cm")
		cm.Data["y"] = "1"
		if err := other.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if !owns(cm, "other", metav1.ManagedFieldsOperationUpdate, "", "f:y") {
			t.Fatalf("other does not own data.y after its Update: %s", managersOf(cm))
		}
		err := c.Apply(ctx, corev1ac.ConfigMap("cm", ns).WithData(map[string]string{"x": "1", "y": "2"}))
		if !apierrors.IsConflict(err) {
			t.Fatalf("Apply of data.y, set by other's Update = %v, want a conflict", err)
		}
		if got := fromServer(t, c, cms, ns, "cm"); got.Data["y"] != "1" {
			t.Errorf("after the conflicting Apply, data.y = %q, want 1", got.Data["y"])
		}
		if err := force.Apply(ctx, corev1ac.ConfigMap("cm", ns).WithData(map[string]string{"x": "1", "y": "2"})); err != nil {
			t.Fatalf("Apply with Force: %v", err)
		}
		got := fromServer(t, c, cms, ns, "cm")
		if got.Data["y"] != "2" || !owns(got, "a", metav1.ManagedFieldsOperationApply, "", "f:y") || owns(got, "other", metav1.ManagedFieldsOperationUpdate, "", "f:y") {
			t.Errorf("after Apply with Force: data.y = %q; owners %s: want 2, owned by a alone", got.Data["y"], managersOf(got))
		}

		// other applies a value of data.x, which a applied: conflict, then force.
		otherApply := corev1ac.ConfigMap("cm", ns).WithData(map[string]string{"x": "other"})
		if err := other.Apply(ctx, otherApply); !apierrors.IsConflict(err) {
			t.Fatalf("other's Apply of data.x, applied by a = %v, want a conflict", err)
		}
		if err := c.With(client.WriteOptions{FieldManager: "other", Force: true}).Apply(ctx, otherApply); err != nil {
			t.Fatalf("other's Apply with Force: %v", err)
		}
		if got := fromServer(t, c, cms, ns, "cm"); got.Data["x"] != "other" || !owns(got, "other", metav1.ManagedFieldsOperationApply, "", "f:x") {
			t.Errorf("after other's forced Apply: data.x = %q; owners %s", got.Data["x"], managersOf(got))
		}
	})

	t.Run("Widget", func(t *testing.T) {
		if err := c.Apply(ctx, widgetAC(ns, "w").WithSize(3)); err != nil {
			t.Fatal(err)
		}
		if err := other.Apply(ctx, widgetAC(ns, "w").WithColor("red")); err != nil {
			t.Fatal(err)
		}
		err := c.Apply(ctx, widgetAC(ns, "w").WithSize(3).WithColor("blue"))
		if !apierrors.IsConflict(err) {
			t.Fatalf("Apply of spec.color, applied by other = %v, want a conflict", err)
		}
		t.Logf("conflict: %v", err)
		if got := fromServer(t, c, widgets(), ns, "w"); got.Spec.Color != "red" {
			t.Errorf("after the conflicting Apply, color = %q, want red", got.Spec.Color)
		}
		if err := force.Apply(ctx, widgetAC(ns, "w").WithSize(3).WithColor("blue")); err != nil {
			t.Fatalf("Apply with Force: %v", err)
		}
		got := fromServer(t, c, widgets(), ns, "w")
		if got.Spec.Color != "blue" || !owns(got, "a", metav1.ManagedFieldsOperationApply, "", "f:color") || owns(got, "other", metav1.ManagedFieldsOperationApply, "", "f:color") {
			t.Errorf("after Apply with Force: color = %q; owners %s: want blue, owned by a alone", got.Spec.Color, managersOf(got))
		}
	})
}

// TestClientApplyKeepsOthersFields: an Apply changes only the fields its
// apply configuration sets. Manager A's re-apply that does not mention
// manager B's label or data keeps them; an apply configuration of Widget
// that does not set spec.color (or spec.size) leaves the value another
// manager set: no zero values are sent.
func TestClientApplyKeepsOthersFields(t *testing.T) {
	ns := newNamespace(t)
	base := newClient(t, client.Options{})
	a := base.With(client.WriteOptions{FieldManager: "a"})
	b := base.With(client.WriteOptions{FieldManager: "b"})
	ctx := t.Context()

	t.Run("ConfigMap", func(t *testing.T) {
		if err := a.Apply(ctx, corev1ac.ConfigMap("cm", ns).WithLabels(map[string]string{"a": "1"}).WithData(map[string]string{"x": "1"})); err != nil {
			t.Fatal(err)
		}
		if err := b.Apply(ctx, corev1ac.ConfigMap("cm", ns).WithLabels(map[string]string{"b": "1"}).WithData(map[string]string{"y": "1"})); err != nil {
			t.Fatal(err)
		}
		if err := a.Apply(ctx, corev1ac.ConfigMap("cm", ns).WithLabels(map[string]string{"a": "2"}).WithData(map[string]string{"x": "2"})); err != nil {
			t.Fatal(err)
		}
		got := fromServer(t, base, configMaps(), ns, "cm")
		if !maps(got.Labels, map[string]string{"a": "2", "b": "1"}) || !maps(got.Data, map[string]string{"x": "2", "y": "1"}) {
			t.Errorf("after A's re-apply: labels %v data %v, want a=2 b=1 and x=2 y=1", got.Labels, got.Data)
		}
	})

	t.Run("Widget", func(t *testing.T) {
		if err := a.Apply(ctx, widgetAC(ns, "w").WithSize(3).WithLabels(map[string]string{"a": "1"})); err != nil {
			t.Fatal(err)
		}
		// B sets only the color: spec.size, which B's configuration does
		// not set, must not be sent (as 0) and stays A's.
		if err := b.Apply(ctx, widgetAC(ns, "w").WithColor("red").WithLabels(map[string]string{"b": "1"})); err != nil {
			t.Fatalf("B's Apply of spec.color alone: %v", err)
		}
		got := fromServer(t, base, widgets(), ns, "w")
		if got.Spec.Size != 3 || got.Spec.Color != "red" {
			t.Errorf("after B's Apply of the color alone: %+v, want size 3 color red", got.Spec)
		}
		// A re-applies without the color or B's label.
		if err := a.Apply(ctx, widgetAC(ns, "w").WithSize(4).WithLabels(map[string]string{"a": "2"})); err != nil {
			t.Fatal(err)
		}
		got = fromServer(t, base, widgets(), ns, "w")
		if got.Spec.Size != 4 || got.Spec.Color != "red" || !maps(got.Labels, map[string]string{"a": "2", "b": "1"}) {
			t.Errorf("after A's re-apply: %+v labels %v, want size 4, color red (B's) and labels a=2 b=1", got.Spec, got.Labels)
		}
		if !owns(got, "b", metav1.ManagedFieldsOperationApply, "", "f:color") || owns(got, "b", metav1.ManagedFieldsOperationApply, "", "f:size") {
			t.Errorf("owners %s: want spec.color B's and spec.size not B's", managersOf(got))
		}
	})
}

func maps(got, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

// TestClientStatus: Status().Apply, Update and Patch change the status and
// not the spec; Update and Apply of the main resource ignore the status.
// (Status().Apply comes first: after a Status().Update by the same field
// manager, which is a different manager to server-side apply, a
// Status().Apply of the same field would be a conflict.)
func TestClientStatus(t *testing.T) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	ctx := t.Context()

	t.Run("Widget", func(t *testing.T) {
		wk := widgets()
		mustCreate(t, c, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Spec: WidgetSpec{Size: 3, Color: "red"}})

		// Status().Apply: only the status is written, whatever the
		// configuration says of the spec.
		if err := c.Status().Apply(ctx, widgetAC(ns, "w").WithObservedSize(6).WithSize(100)); err != nil {
			t.Fatalf("Status().Apply: %v", err)
		}
		got := fromServer(t, c, wk, ns, "w")
		if got.Status.ObservedSize != 6 || got.Spec.Size != 3 || got.Spec.Color != "red" {
			t.Errorf("after Status().Apply: status %+v spec %+v, want observedSize 6, size 3, color red", got.Status, got.Spec)
		}
		if !owns(got, "e2e-client", metav1.ManagedFieldsOperationApply, "status", "f:observedSize") {
			t.Errorf("Status().Apply did not own status.observedSize on the status subresource: %s", managersOf(got))
		}

		// Update of the main resource: the spec changes, the status does not.
		w := got
		w.Spec.Size = 4
		w.Status.ObservedSize = 99
		if err := c.Update(ctx, w); err != nil {
			t.Fatal(err)
		}
		if got := fromServer(t, c, wk, ns, "w"); got.Spec.Size != 4 || got.Status.ObservedSize != 6 {
			t.Errorf("after Update with a status: spec.size %d status.observedSize %d, want 4 and 6 (status ignored)", got.Spec.Size, got.Status.ObservedSize)
		}
		if w.Status.ObservedSize != 6 {
			t.Errorf("after Update with a status, the object passed holds status.observedSize %d, want the server's 6", w.Status.ObservedSize)
		}

		// Status().Update: the status changes, the spec does not.
		stale := w.DeepCopy()
		w.Spec.Size = 50
		w.Status.ObservedSize = 4
		if err := c.Status().Update(ctx, w); err != nil {
			t.Fatalf("Status().Update: %v", err)
		}
		if w.Status.ObservedSize != 4 || w.Spec.Size != 4 {
			t.Errorf("after Status().Update: status.observedSize %d spec.size %d, want 4 and 4 (spec ignored)", w.Status.ObservedSize, w.Spec.Size)
		}
		if got := fromServer(t, c, wk, ns, "w"); got.Status.ObservedSize != 4 || got.Spec.Size != 4 {
			t.Errorf("server: status %+v spec %+v", got.Status, got.Spec)
		}
		stale.Status.ObservedSize = 7
		if err := c.Status().Update(ctx, stale); !apierrors.IsConflict(err) {
			t.Errorf("Status().Update with a stale resourceVersion = %v, want a conflict", err)
		}

		// Status().Patch.
		orig := w.DeepCopy()
		w.Status.ObservedSize = 5
		w.Spec.Color = "ignored"
		if err := c.Status().Patch(ctx, w, client.MergeFrom(orig, client.NoLock)); err != nil {
			t.Fatalf("Status().Patch: %v", err)
		}
		if got := fromServer(t, c, wk, ns, "w"); got.Status.ObservedSize != 5 || got.Spec.Color != "red" {
			t.Errorf("after Status().Patch: status %+v spec %+v, want observedSize 5 and color red", got.Status, got.Spec)
		}

		// Apply of the main resource does not touch the status.
		if err := c.Apply(ctx, widgetAC(ns, "w").WithSize(4).WithObservedSize(1)); err != nil {
			t.Fatal(err)
		}
		if got := fromServer(t, c, wk, ns, "w"); got.Status.ObservedSize != 5 {
			t.Errorf("after Apply of the main resource with a status, status.observedSize = %d, want 5", got.Status.ObservedSize)
		}
	})

	t.Run("Deployment", func(t *testing.T) {
		get := func() *appsv1.Deployment {
			t.Helper()
			d := &appsv1.Deployment{}
			if err := c.GetFromServer(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, d); err != nil {
				t.Fatal(err)
			}
			return d
		}
		d := mustCreate(t, c, deployment(ns, "web"))

		if err := c.Status().Apply(ctx, appsv1ac.Deployment("web", ns).WithStatus(appsv1ac.DeploymentStatus().WithReplicas(3).WithObservedGeneration(7))); err != nil {
			t.Fatalf("Status().Apply: %v", err)
		}
		got := get()
		if got.Status.Replicas != 3 || got.Status.ObservedGeneration != 7 {
			t.Errorf("after Status().Apply: status %+v, want replicas 3, observedGeneration 7", got.Status)
		}
		if *got.Spec.Replicas != 1 || !slices.Equal(containersOf(got), []string{"app=app:1"}) || got.Generation != d.Generation {
			t.Errorf("after Status().Apply the spec changed: replicas %d containers %v generation %d (was %d)", *got.Spec.Replicas, containersOf(got), got.Generation, d.Generation)
		}

		d = got
		d.Status.Replicas = 5
		d.Spec.Replicas = ptr.To[int32](2)
		if err := c.Update(ctx, d); err != nil {
			t.Fatal(err)
		}
		if d.Status.Replicas != 3 || *d.Spec.Replicas != 2 {
			t.Errorf("after Update with a status: status.replicas %d spec.replicas %d, want 3 (status ignored) and 2", d.Status.Replicas, *d.Spec.Replicas)
		}

		d.Status.Replicas = 2
		d.Spec.Replicas = ptr.To[int32](9)
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatalf("Status().Update: %v", err)
		}
		if got := get(); got.Status.Replicas != 2 || *got.Spec.Replicas != 2 {
			t.Errorf("after Status().Update: status.replicas %d spec.replicas %d, want 2 and 2", got.Status.Replicas, *got.Spec.Replicas)
		}

		orig := get()
		mod := orig.DeepCopy()
		mod.Status.ReadyReplicas = 1
		if err := c.Status().Patch(ctx, mod, client.StrategicMergeFrom(orig, client.NoLock)); err != nil {
			t.Fatalf("Status().Patch: %v", err)
		}
		if got := get(); got.Status.ReadyReplicas != 1 || got.Status.Replicas != 2 || *got.Spec.Replicas != 2 {
			t.Errorf("after Status().Patch: status %+v spec.replicas %d", got.Status, *got.Spec.Replicas)
		}
	})
}

// TestClientAnswerReplacesObject: "a write sets the object passed to it to
// the server's answer" (package doc) — also where the answer lacks a field
// the object passed has: a label or a value removed by a JSON patch, a
// status the server ignored on Update. GetFromServer likewise.
func TestClientAnswerReplacesObject(t *testing.T) {
	onBoth(t, testAnswerReplacesObject[*corev1.ConfigMap], testAnswerReplacesObject[*Widget])
}

func testAnswerReplacesObject[T client.Object](t *testing.T, k kind[T]) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	ctx := t.Context()
	obj := k.make(ns, "a", "0")
	obj.SetLabels(map[string]string{"keep": "1", "drop": "1"})
	mustCreate(t, c, obj)

	err := c.Patch(ctx, obj, client.JSONPatch(
		client.JSONPatchOp{Op: "remove", Path: "/metadata/labels/drop"},
		client.JSONPatchOp{Op: "remove", Path: k.path},
	))
	if err != nil {
		t.Fatalf("JSON patch: %v", err)
	}
	got := fromServer(t, c, k, ns, "a")
	if !maps(got.GetLabels(), map[string]string{"keep": "1"}) || k.get(got) != "" {
		t.Fatalf("the server holds labels %v value %q after the patch, want keep=1 and no value", got.GetLabels(), k.get(got))
	}
	if !maps(obj.GetLabels(), got.GetLabels()) || k.get(obj) != k.get(got) || obj.GetResourceVersion() != got.GetResourceVersion() {
		t.Errorf("after the patch, the object passed holds labels %v value %q rv %s; the server's answer: labels %v value %q rv %s",
			obj.GetLabels(), k.get(obj), obj.GetResourceVersion(), got.GetLabels(), k.get(got), got.GetResourceVersion())
	}

	// GetFromServer into an object that holds fields the server's does not.
	reused := deepCopy(obj)
	reused.SetLabels(map[string]string{"keep": "1", "local": "1"})
	k.set(reused, "local")
	if err := c.GetFromServer(ctx, types.NamespacedName{Namespace: ns, Name: "a"}, reused); err != nil {
		t.Fatal(err)
	}
	if !maps(reused.GetLabels(), got.GetLabels()) || k.get(reused) != k.get(got) {
		t.Errorf("GetFromServer into a used object left labels %v value %q; the server holds labels %v value %q",
			reused.GetLabels(), k.get(reused), got.GetLabels(), k.get(got))
	}

	if w, ok := any(obj).(*Widget); ok {
		w.Spec.Size = 2
		w.Status.ObservedSize = 99 // the server ignores it on Update
		if err := c.Update(ctx, w); err != nil {
			t.Fatal(err)
		}
		if got := fromServer(t, c, widgets(), ns, "a"); got.Status.ObservedSize != 0 || got.Spec.Size != 2 {
			t.Fatalf("the server holds %+v %+v", got.Spec, got.Status)
		}
		if w.Status.ObservedSize != 0 {
			t.Errorf("after an Update whose status the server ignored, the object passed holds status.observedSize %d, want the server's 0", w.Status.ObservedSize)
		}
	}
}

// TestClientDeletePreconditions: Delete with a UID or resourceVersion
// precondition that does not hold is a conflict and deletes nothing; with
// the right ones it deletes.
func TestClientDeletePreconditions(t *testing.T) {
	onBoth(t, testDeletePreconditions[*corev1.ConfigMap], testDeletePreconditions[*Widget])
}

func testDeletePreconditions[T client.Object](t *testing.T, k kind[T]) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	ctx := t.Context()
	obj := mustCreate(t, c, k.make(ns, "d", "0"))
	staleRV := obj.GetResourceVersion()
	k.set(obj, "1")
	if err := c.Update(ctx, obj); err != nil {
		t.Fatal(err)
	}

	if err := c.Delete(ctx, obj, client.DeleteOptions{UID: "6b0c3a8e-0000-4000-8000-000000000000"}); !apierrors.IsConflict(err) {
		t.Errorf("Delete with a wrong UID = %v, want a conflict", err)
	}
	if err := c.Delete(ctx, obj, client.DeleteOptions{ResourceVersion: staleRV}); !apierrors.IsConflict(err) {
		t.Errorf("Delete with the stale resourceVersion %s = %v, want a conflict", staleRV, err)
	}
	fromServer(t, c, k, ns, "d") // still there

	if err := c.Delete(ctx, obj, client.DeleteOptions{UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()}); err != nil {
		t.Fatalf("Delete with the right UID and resourceVersion: %v", err)
	}
	absentFromServer(t, c, k, ns, "d")

	err := c.Delete(ctx, obj, client.DeleteOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("second Delete = %v, want NotFound", err)
	}
	if client.IgnoreNotFound(err) != nil {
		t.Errorf("IgnoreNotFound(%v) != nil", err)
	}

	// Recreated under the same name: the old UID no longer matches.
	recreated := mustCreate(t, c, k.make(ns, "d", "2"))
	if err := c.Delete(ctx, obj, client.DeleteOptions{UID: obj.GetUID()}); !apierrors.IsConflict(err) {
		t.Errorf("Delete with the UID of the deleted object = %v, want a conflict", err)
	}
	if err := c.Delete(ctx, recreated, client.DeleteOptions{UID: recreated.GetUID(), GracePeriodSeconds: ptr.To[int64](0), PropagationPolicy: metav1.DeletePropagationBackground}); err != nil {
		t.Fatalf("Delete of the recreated object: %v", err)
	}
	absentFromServer(t, c, k, ns, "d")
}

// TestClientDeleteFinalizers: Delete with PropagationPolicy Foreground or
// Orphan is accepted; an object that finalizers keep is left marked for
// deletion, and removing its finalizers (by Patch, or by Update) deletes it.
func TestClientDeleteFinalizers(t *testing.T) {
	onBoth(t, testDeleteFinalizers[*corev1.ConfigMap], testDeleteFinalizers[*Widget])
}

const holdFinalizer = "e2e.ctrlkit.io/hold"

func testDeleteFinalizers[T client.Object](t *testing.T, k kind[T]) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	ctx := t.Context()

	for _, tc := range []struct {
		policy    metav1.DeletionPropagation
		finalizer string // the one the API server adds for the policy
		byPatch   bool
	}{
		{metav1.DeletePropagationForeground, metav1.FinalizerDeleteDependents, true},
		{metav1.DeletePropagationOrphan, metav1.FinalizerOrphanDependents, false},
	} {
		name := strings.ToLower(string(tc.policy))
		obj := k.make(ns, name, "0")
		obj.SetFinalizers([]string{holdFinalizer})
		mustCreate(t, c, obj)
		if err := c.Delete(ctx, obj, client.DeleteOptions{PropagationPolicy: tc.policy}); err != nil {
			t.Fatalf("Delete with %s: %v", tc.policy, err)
		}
		got := fromServer(t, c, k, ns, name)
		if got.GetDeletionTimestamp() == nil || !slices.Contains(got.GetFinalizers(), holdFinalizer) || !slices.Contains(got.GetFinalizers(), tc.finalizer) {
			t.Fatalf("after Delete with %s: deletionTimestamp %v finalizers %v, want marked with %s and %s", tc.policy, got.GetDeletionTimestamp(), got.GetFinalizers(), holdFinalizer, tc.finalizer)
		}
		// Deleting again is accepted.
		if err := c.Delete(ctx, got, client.DeleteOptions{}); err != nil {
			t.Errorf("second Delete of an object marked for deletion: %v", err)
		}
		got = fromServer(t, c, k, ns, name)

		if tc.byPatch {
			mod := deepCopy(got)
			mod.SetFinalizers(nil)
			if err := c.Patch(ctx, mod, client.MergeFrom(got, client.OptimisticLock)); err != nil {
				t.Fatalf("Patch removing the finalizers: %v", err)
			}
		} else {
			got.SetFinalizers(nil)
			if err := c.Update(ctx, got); err != nil {
				t.Fatalf("Update removing the finalizers: %v", err)
			}
		}
		absentFromServer(t, c, k, ns, name)
	}
}

// TestClientDeleteAllOf: DeleteAllOf with a label selector in a namespace
// deletes the objects that match there, and no others.
func TestClientDeleteAllOf(t *testing.T) {
	onBoth(t, testDeleteAllOf[*corev1.ConfigMap], testDeleteAllOf[*Widget])
}

func testDeleteAllOf[T client.Object](t *testing.T, k kind[T]) {
	ns, otherNS := newNamespace(t), newNamespace(t)
	c := newClient(t, client.Options{})
	mk := func(namespace, name, sel string) {
		obj := k.make(namespace, name, "0")
		obj.SetLabels(map[string]string{"sel": sel})
		mustCreate(t, c, obj)
	}
	for _, n := range []string{"yes-1", "yes-2", "yes-3"} {
		mk(ns, n, "yes")
	}
	mk(ns, "no-1", "no")
	mk(ns, "no-2", "no")
	mk(otherNS, "yes-elsewhere", "yes")

	err := c.DeleteAllOf(t.Context(), k.empty(), client.ListOptions{Namespace: ns, LabelSelector: labels.SelectorFromSet(labels.Set{"sel": "yes"})}, client.DeleteOptions{})
	if err != nil {
		t.Fatalf("DeleteAllOf: %v", err)
	}
	if got := serverNames(t, c, k, client.ListOptions{Namespace: ns}); !slices.Equal(got, []string{"no-1", "no-2"}) {
		t.Errorf("after DeleteAllOf sel=yes in %s, it holds %v, want [no-1 no-2]", ns, got)
	}
	if got := serverNames(t, c, k, client.ListOptions{Namespace: otherNS}); !slices.Equal(got, []string{"yes-elsewhere"}) {
		t.Errorf("DeleteAllOf in %s deleted in %s: it holds %v", ns, otherNS, got)
	}
}

// TestClientDryRun: with DryRun, every write returns the server's answer
// and changes nothing on the server.
func TestClientDryRun(t *testing.T) {
	onBoth(t, testDryRun[*corev1.ConfigMap], testDryRun[*Widget])
}

func testDryRun[T client.Object](t *testing.T, k kind[T]) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	dry := c.With(client.WriteOptions{DryRun: true})
	ctx := t.Context()

	created := k.make(ns, "dry-created", "x")
	if err := dry.Create(ctx, created); err != nil {
		t.Fatalf("dry-run Create: %v", err)
	}
	if created.GetUID() == "" || created.GetCreationTimestamp().Time.IsZero() || k.get(created) != "x" {
		t.Errorf("dry-run Create did not return the server's answer: uid %q creationTimestamp %v value %q", created.GetUID(), created.GetCreationTimestamp(), k.get(created))
	}
	absentFromServer(t, c, k, ns, "dry-created")

	obj := mustCreate(t, c, k.make(ns, "o", "0"))
	rv := obj.GetResourceVersion()
	unchanged := func(what string) {
		t.Helper()
		got := fromServer(t, c, k, ns, "o")
		if k.get(got) != "0" || got.GetResourceVersion() != rv {
			t.Errorf("after a dry-run %s the server holds %q at %s, want 0 at %s", what, k.get(got), got.GetResourceVersion(), rv)
		}
	}

	upd := deepCopy(obj)
	k.set(upd, "dry-update")
	if err := dry.Update(ctx, upd); err != nil {
		t.Fatalf("dry-run Update: %v", err)
	}
	if k.get(upd) != "dry-update" || upd.GetUID() != obj.GetUID() {
		t.Errorf("dry-run Update answered value %q uid %s", k.get(upd), upd.GetUID())
	}
	unchanged("Update")

	stale := deepCopy(obj)
	stale.SetResourceVersion("1")
	if err := dry.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("dry-run Update with a stale resourceVersion = %v, want the conflict a real one would get", err)
	}

	pat := deepCopy(obj)
	k.set(pat, "dry-merge")
	if err := dry.Patch(ctx, pat, client.MergeFrom(obj, client.NoLock)); err != nil {
		t.Fatalf("dry-run Patch: %v", err)
	}
	if k.get(pat) != "dry-merge" {
		t.Errorf("dry-run Patch answered value %q", k.get(pat))
	}
	unchanged("merge Patch")

	jp := deepCopy(obj)
	if err := dry.Patch(ctx, jp, client.JSONPatch(client.JSONPatchOp{Op: "replace", Path: k.path, Value: "dry-json"})); err != nil {
		t.Fatalf("dry-run JSON Patch: %v", err)
	}
	if k.get(jp) != "dry-json" {
		t.Errorf("dry-run JSON Patch answered value %q", k.get(jp))
	}
	unchanged("JSON Patch")

	// The value was set by Create (an Update to server-side apply): a dry
	// run gets the conflict a real Apply would; with Force it passes.
	if err := dry.Apply(ctx, k.ac(ns, "o", "dry-apply")); !apierrors.IsConflict(err) {
		t.Fatalf("dry-run Apply of a field another manager owns = %v, want a conflict", err)
	}
	if err := dry.With(client.WriteOptions{DryRun: true, Force: true}).Apply(ctx, k.ac(ns, "o", "dry-apply")); err != nil {
		t.Fatalf("dry-run forced Apply: %v", err)
	}
	unchanged("forced Apply")
	if err := dry.Apply(ctx, k.ac(ns, "o", "0")); err != nil {
		t.Fatalf("dry-run Apply of the current value: %v", err)
	}
	unchanged("Apply")

	if err := dry.Delete(ctx, obj, client.DeleteOptions{}); err != nil {
		t.Fatalf("dry-run Delete: %v", err)
	}
	unchanged("Delete")
	if err := dry.DeleteAllOf(ctx, k.empty(), client.ListOptions{Namespace: ns}, client.DeleteOptions{}); err != nil {
		t.Fatalf("dry-run DeleteAllOf: %v", err)
	}
	unchanged("DeleteAllOf")

	if w, ok := any(obj).(*Widget); ok {
		ws := w.DeepCopy()
		ws.Status.ObservedSize = 9
		if err := dry.Status().Update(ctx, ws); err != nil {
			t.Fatalf("dry-run Status().Update: %v", err)
		}
		if ws.Status.ObservedSize != 9 {
			t.Errorf("dry-run Status().Update answered status %+v", ws.Status)
		}
		if err := dry.Status().Apply(ctx, widgetAC(ns, "o").WithObservedSize(8)); err != nil {
			t.Fatalf("dry-run Status().Apply: %v", err)
		}
		if got := fromServer(t, c, widgets(), ns, "o"); got.Status.ObservedSize != 0 || got.ResourceVersion != rv {
			t.Errorf("after dry-run status writes the server holds status %+v at %s", got.Status, got.ResourceVersion)
		}
	}

	// A dry-run Apply of an object that does not exist creates nothing.
	if err := dry.Apply(ctx, k.ac(ns, "dry-applied", "x")); err != nil {
		t.Fatalf("dry-run Apply of a new object: %v", err)
	}
	absentFromServer(t, c, k, ns, "dry-applied")
}

// TestClientReads: GetFromServer and ListFromServer, with a label
// selector, a field selector, and Limit/Continue paging.
func TestClientReads(t *testing.T) {
	onBoth(t, testReads[*corev1.ConfigMap], testReads[*Widget])
}

func testReads[T client.Object](t *testing.T, k kind[T]) {
	ns := newNamespace(t)
	c := newClient(t, client.Options{})
	ctx := t.Context()
	var want []string
	for i := range 5 {
		obj := k.make(ns, fmt.Sprintf("page-%d", i), fmt.Sprint(i))
		obj.SetLabels(map[string]string{"page": "yes"})
		mustCreate(t, c, obj)
		want = append(want, obj.GetName())
	}
	for i := range 2 {
		obj := k.make(ns, fmt.Sprintf("other-%d", i), "x")
		obj.SetLabels(map[string]string{"page": "no"})
		mustCreate(t, c, obj)
	}

	got := fromServer(t, c, k, ns, "page-3")
	if k.get(got) != "3" || got.GetName() != "page-3" || got.GetUID() == "" {
		t.Errorf("GetFromServer page-3: value %q name %q uid %q", k.get(got), got.GetName(), got.GetUID())
	}
	err := c.GetFromServer(ctx, types.NamespacedName{Namespace: ns, Name: "missing"}, k.empty())
	if !apierrors.IsNotFound(err) || client.IgnoreNotFound(err) != nil {
		t.Errorf("GetFromServer of a missing object = %v, want NotFound", err)
	}

	sel := labels.SelectorFromSet(labels.Set{"page": "yes"})
	if got := serverNames(t, c, k, client.ListOptions{Namespace: ns, LabelSelector: sel}); !slices.Equal(got, want) {
		t.Errorf("ListFromServer page=yes = %v, want %v", got, want)
	}
	if got := serverNames(t, c, k, client.ListOptions{Namespace: ns}); len(got) != 7 {
		t.Errorf("ListFromServer of the namespace = %v, want 7 objects", got)
	}
	if got := serverNames(t, c, k, client.ListOptions{Namespace: ns, FieldSelector: fields.OneTermEqualSelector("metadata.name", "page-1")}); !slices.Equal(got, []string{"page-1"}) {
		t.Errorf("ListFromServer metadata.name=page-1 = %v", got)
	}
	// All namespaces: this namespace's objects are among them.
	if got := serverNames(t, c, k, client.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"page": "no"})}); len(got) < 2 {
		t.Errorf("ListFromServer in all namespaces of page=no = %v, want at least this namespace's 2", got)
	}

	var paged []string
	cont := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatalf("paging did not end after 5 pages: %v", paged)
		}
		list := k.list()
		if err := c.ListFromServer(ctx, list, client.ListOptions{Namespace: ns, LabelSelector: sel, Limit: 2, Continue: cont}); err != nil {
			t.Fatalf("ListFromServer page %d: %v", pages, err)
		}
		names := namesIn(t, list)
		if len(names) > 2 {
			t.Fatalf("page %d has %d objects, want at most 2 (Limit)", pages, len(names))
		}
		paged = append(paged, names...)
		lm, err := meta.ListAccessor(list)
		if err != nil {
			t.Fatal(err)
		}
		if cont = lm.GetContinue(); cont == "" {
			if pages != 2 {
				t.Errorf("5 objects in pages of 2 took %d pages, want 3", pages+1)
			}
			break
		}
	}
	slices.Sort(paged)
	if !slices.Equal(paged, want) {
		t.Errorf("pages hold %v, want %v", paged, want)
	}

	if err := c.ListFromServer(ctx, k.empty(), client.ListOptions{}); err == nil {
		t.Errorf("ListFromServer into a non-list type succeeded")
	}
}

// TestClientReadYourWrites: through a running manager's client, a lister
// read made immediately after any write returns (no polling) reflects it:
// the object at the returned resourceVersion or later, or gone after a
// delete. In a loop, so that a write that did not wait would be caught.
func TestClientReadYourWrites(t *testing.T) {
	ns := newNamespace(t)
	const fieldManager = "ryow-e2e"
	mgr := newManager(t, cfg, ns, manager.Options{Name: fieldManager, Scheme: newScheme(t)})
	cmInf, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	wInf, err := informer.For[*Widget](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	eventually(t, waitTimeout, mgr.Ready, "the manager to be ready")
	c := mgr.Client()
	force := c.With(client.WriteOptions{Force: true})
	cms, ws := cmInf.Lister(), wInf.Lister()
	ctx := t.Context()

	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// seeCM and seeW fail unless the lister holds the object at rv or
	// later and ok accepts it.
	seeCM := func(i int, what, name, rv string, ok func(*corev1.ConfigMap) bool) {
		t.Helper()
		got, err := cms.Get(ns, name)
		if err != nil {
			t.Fatalf("iteration %d: right after %s, the lister: %v", i, what, err)
		}
		if (rv != "" && !atOrAfter(got.ResourceVersion, rv)) || !ok(got) {
			t.Fatalf("iteration %d: right after %s (rv %s), the lister holds rv %s data %v labels %v", i, what, rv, got.ResourceVersion, got.Data, got.Labels)
		}
	}
	seeW := func(i int, what, name, rv string, ok func(*Widget) bool) {
		t.Helper()
		got, err := ws.Get(ns, name)
		if err != nil {
			t.Fatalf("iteration %d: right after %s, the lister: %v", i, what, err)
		}
		if (rv != "" && !atOrAfter(got.ResourceVersion, rv)) || !ok(got) {
			t.Fatalf("iteration %d: right after %s (rv %s), the lister holds rv %s spec %+v status %+v finalizers %v deletionTimestamp %v",
				i, what, rv, got.ResourceVersion, got.Spec, got.Status, got.Finalizers, got.DeletionTimestamp)
		}
	}
	gone := func(i int, what string, err error) {
		t.Helper()
		if !apierrors.IsNotFound(err) {
			t.Fatalf("iteration %d: right after %s, the lister = %v, want NotFound", i, what, err)
		}
	}
	cmValue := func(v string) func(*corev1.ConfigMap) bool {
		return func(cm *corev1.ConfigMap) bool { return cm.Data["v"] == v }
	}

	const iterations = 50
	for i := range iterations {
		// ConfigMap: every verb.
		name := fmt.Sprintf("cm-%d", i)
		iter := labels.Set{"iter": fmt.Sprint(i)}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: iter}, Data: map[string]string{"v": "create"}}
		must("Create", c.Create(ctx, cm))
		seeCM(i, "Create", name, cm.ResourceVersion, cmValue("create"))
		if list, err := cms.ListInNamespace(ns, labels.SelectorFromSet(iter)); err != nil || len(list) != 1 {
			t.Fatalf("iteration %d: right after Create, the lister lists %d objects (%v), want 1", i, len(list), err)
		}
		cm.Data["v"] = "update"
		must("Update", c.Update(ctx, cm))
		seeCM(i, "Update", name, cm.ResourceVersion, cmValue("update"))
		orig := cm.DeepCopy()
		cm.Data["v"] = "merge"
		must("merge Patch", c.Patch(ctx, cm, client.MergeFrom(orig, client.NoLock)))
		seeCM(i, "merge Patch", name, cm.ResourceVersion, cmValue("merge"))
		must("JSON Patch", c.Patch(ctx, cm, client.JSONPatch(client.JSONPatchOp{Op: "replace", Path: "/data/v", Value: "json"})))
		seeCM(i, "JSON Patch", name, cm.ResourceVersion, cmValue("json"))
		must("Apply", force.Apply(ctx, corev1ac.ConfigMap(name, ns).WithData(map[string]string{"v": "apply"})))
		seeCM(i, "Apply", name, cm.ResourceVersion, cmValue("apply"))
		must("Delete", c.Delete(ctx, cm, client.DeleteOptions{}))
		_, err := cms.Get(ns, name)
		gone(i, "Delete", err)

		batch := labels.Set{"batch": fmt.Sprint(i)}
		for j := range 3 {
			must("Create", c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("batch-%d-%d", i, j), Labels: batch}}))
		}
		must("DeleteAllOf", c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.ListOptions{Namespace: ns, LabelSelector: labels.SelectorFromSet(batch)}, client.DeleteOptions{}))
		if list, err := cms.ListInNamespace(ns, labels.SelectorFromSet(batch)); err != nil || len(list) != 0 {
			t.Fatalf("iteration %d: right after DeleteAllOf, the lister lists %d objects (%v), want 0", i, len(list), err)
		}

		// Widget: every verb, the status subresource, and a deletion that
		// a finalizer holds.
		name = fmt.Sprintf("w-%d", i)
		w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{holdFinalizer}}, Spec: WidgetSpec{Size: 1, Color: "create"}}
		must("Create", c.Create(ctx, w))
		seeW(i, "Create", name, w.ResourceVersion, func(g *Widget) bool { return g.Spec.Color == "create" })
		w.Spec.Color = "update"
		must("Update", c.Update(ctx, w))
		seeW(i, "Update", name, w.ResourceVersion, func(g *Widget) bool { return g.Spec.Color == "update" })
		worig := w.DeepCopy()
		w.Spec.Size = 2
		must("merge Patch", c.Patch(ctx, w, client.MergeFrom(worig, client.OptimisticLock)))
		seeW(i, "merge Patch", name, w.ResourceVersion, func(g *Widget) bool { return g.Spec.Size == 2 })
		w.Status.ObservedSize = 1
		must("Status().Update", c.Status().Update(ctx, w))
		seeW(i, "Status().Update", name, w.ResourceVersion, func(g *Widget) bool { return g.Status.ObservedSize == 1 })
		worig = w.DeepCopy()
		w.Status.ObservedSize = 2
		must("Status().Patch", c.Status().Patch(ctx, w, client.MergeFrom(worig, client.NoLock)))
		seeW(i, "Status().Patch", name, w.ResourceVersion, func(g *Widget) bool { return g.Status.ObservedSize == 2 })
		must("Status().Apply", force.Status().Apply(ctx, widgetAC(ns, name).WithObservedSize(3)))
		seeW(i, "Status().Apply", name, w.ResourceVersion, func(g *Widget) bool { return g.Status.ObservedSize == 3 })
		must("Apply", force.Apply(ctx, widgetAC(ns, name).WithSize(3).WithColor("apply")))
		seeW(i, "Apply", name, w.ResourceVersion, func(g *Widget) bool { return g.Spec.Color == "apply" && g.Spec.Size == 3 })
		must("Delete", c.Delete(ctx, w, client.DeleteOptions{}))
		seeW(i, "Delete (held by a finalizer)", name, w.ResourceVersion, func(g *Widget) bool { return g.DeletionTimestamp != nil })
		held, err := ws.Get(ns, name)
		must("lister Get", err)
		release := held.DeepCopy()
		release.Finalizers = nil
		must("Patch removing the finalizer", c.Patch(ctx, release, client.MergeFrom(held, client.NoLock)))
		// When the last finalizer goes, the server deletes the object in
		// the same request and answers with its last stored version. The
		// lister holds that version or a later one, or none.
		if got, err := ws.Get(ns, name); err == nil {
			if !atOrAfter(got.ResourceVersion, release.ResourceVersion) {
				t.Fatalf("iteration %d: right after the Patch removing the finalizer (rv %s), the lister holds rv %s",
					i, release.ResourceVersion, got.ResourceVersion)
			}
			if i == 0 {
				t.Logf("right after the Patch removing the last finalizer, answered at rv %s with finalizers %v, the lister holds rv %s finalizers %v",
					release.ResourceVersion, release.Finalizers, got.ResourceVersion, got.Finalizers)
			}
		} else {
			gone(i, "the Patch removing the finalizer", err)
		}
	}

	// The manager's client writes under the manager's name.
	last := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "last"}, Data: map[string]string{"v": "last"}}
	must("Create", c.Create(ctx, last))
	if !slices.ContainsFunc(last.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == fieldManager }) {
		t.Errorf("the manager's client wrote under %s, want %s (Options.Name)", managersOf(last), fieldManager)
	}
}

// TestClientReadYourWritesFinalizerRemoval: the write that removes an
// object's last finalizer, once it is marked for deletion, deletes it. A
// lister read right after that write returns must not show the object
// still holding the finalizer: that is the state before the write.
//
// The API server answers such a write with the object as written (no
// finalizers) but at the resourceVersion it had before (the update is not
// stored; the object is deleted instead), which the cache already holds,
// with the finalizer.
func TestClientReadYourWritesFinalizerRemoval(t *testing.T) {
	ns := newNamespace(t)
	mgr := newManager(t, cfg, ns, manager.Options{Name: "finalizer-e2e", Scheme: newScheme(t)})
	cmInf, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	wInf, err := informer.For[*Widget](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	eventually(t, waitTimeout, mgr.Ready, "the manager to be ready")
	c := mgr.Client()
	ctx := t.Context()

	const iterations = 20
	stale, staleCMs := 0, 0
	for i := range iterations {
		// A ConfigMap, its finalizer removed by Patch.
		name := fmt.Sprintf("cm-%d", i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{holdFinalizer}}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, cm, client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		held, err := cmInf.Lister().Get(ns, name)
		if err != nil || held.DeletionTimestamp == nil {
			t.Fatalf("right after Delete, the lister: %v (deletionTimestamp %v)", err, held.DeletionTimestamp)
		}
		mod := held.DeepCopy()
		mod.Finalizers = nil
		if err := c.Patch(ctx, mod, client.MergeFrom(held, client.NoLock)); err != nil {
			t.Fatal(err)
		}
		if got, err := cmInf.Lister().Get(ns, name); err == nil && slices.Contains(got.Finalizers, holdFinalizer) {
			stale++
			staleCMs++
			if staleCMs == 1 {
				t.Errorf("iteration %d: right after the Patch removing the last finalizer of ConfigMap %s (answered at rv %s, finalizers %v), the lister holds it at rv %s with finalizers %v",
					i, name, mod.ResourceVersion, mod.Finalizers, got.ResourceVersion, got.Finalizers)
			}
		} else if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}

		// A Widget, its finalizer removed by Update.
		name = fmt.Sprintf("w-%d", i)
		w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{holdFinalizer}}, Spec: WidgetSpec{Size: 1}}
		if err := c.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, w, client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		wheld, err := wInf.Lister().Get(ns, name)
		if err != nil || wheld.DeletionTimestamp == nil {
			t.Fatalf("right after Delete, the lister: %v", err)
		}
		wmod := wheld.DeepCopy()
		wmod.Finalizers = nil
		if err := c.Update(ctx, wmod); err != nil {
			t.Fatal(err)
		}
		if got, err := wInf.Lister().Get(ns, name); err == nil && slices.Contains(got.Finalizers, holdFinalizer) {
			stale++
			if stale-staleCMs == 1 {
				t.Errorf("iteration %d: right after the Update removing the last finalizer of Widget %s (answered at rv %s), the lister holds it at rv %s with finalizers %v",
					i, name, wmod.ResourceVersion, got.ResourceVersion, got.Finalizers)
			}
		} else if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	if stale > 0 {
		t.Errorf("in %d of %d writes removing the last finalizer (%d of %d ConfigMaps, %d of %d Widgets), the lister read right after still held the finalizer",
			stale, 2*iterations, staleCMs, iterations, stale-staleCMs, iterations)
	}
}

// gateLimiter is a client-side rate limiter that passes every request
// until held, and then blocks each one until released.
type gateLimiter struct {
	mu      sync.Mutex
	held    chan struct{} // non-nil while held; closed by release
	calls   int
	waiting chan struct{} // receives when a request blocks
}

func newGateLimiter() *gateLimiter { return &gateLimiter{waiting: make(chan struct{}, 1)} }

func (g *gateLimiter) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = make(chan struct{})
}

func (g *gateLimiter) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.held)
	g.held = nil
}

func (g *gateLimiter) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

func (g *gateLimiter) Wait(ctx context.Context) error {
	g.mu.Lock()
	g.calls++
	held := g.held
	g.mu.Unlock()
	if held == nil {
		return nil
	}
	select {
	case g.waiting <- struct{}{}:
	default:
	}
	select {
	case <-held:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gateLimiter) Accept()         { _ = g.Wait(context.Background()) }
func (g *gateLimiter) TryAccept() bool { return true }
func (g *gateLimiter) Stop()           {}
func (g *gateLimiter) QPS() float32    { return 0 }

// TestClientLeadershipFence: under a leading context whose term of
// leadership is over, no write is sent and each fails with an error
// wrapping leader.ErrNotLeader. The check is at the transport, after the
// client-side rate limiter, so it also refuses a write that waited there
// while the term ended. Reads still work.
func TestClientLeadershipFence(t *testing.T) {
	ns := newNamespace(t)
	lim := newGateLimiter()
	limited := rest.CopyConfig(cfg)
	limited.RateLimiter = lim
	c := newClientFor(t, limited, client.Options{})
	cms := configMaps()

	el, err := leader.NewForConfig(cfg, leader.Options{
		Name: "client-fence", Namespace: ns, Identity: "e2e-client",
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	leading := make(chan context.Context, 1)
	runDone := make(chan error, 1)
	go func() {
		runDone <- el.Run(runCtx, func(lctx context.Context) error {
			leading <- lctx
			<-lctx.Done()
			return nil
		})
	}()
	var lctx context.Context
	select {
	case lctx = <-leading:
	case <-time.After(waitTimeout):
		t.Fatal("the elector did not lead")
	}
	// The term's identity without its cancellation: what a Reconcile that
	// ignores ctx.Done, or a goroutine it started with
	// context.WithoutCancel, would write with. Only the fence stops it.
	termCtx := context.WithoutCancel(lctx)

	// While the term lasts, writes go through.
	mustCreate(t, c, cms.make(ns, "while-leading", "0"))

	// A write that waits in the rate limiter while the term ends is
	// refused at the transport.
	lim.hold()
	throttled := make(chan error, 1)
	go func() { throttled <- c.Create(termCtx, cms.make(ns, "ended-while-throttled", "0")) }()
	select {
	case <-lim.waiting:
	case <-time.After(waitTimeout):
		t.Fatalf("the write did not reach the rate limiter (%d requests did)", lim.count())
	}
	cancelRun()
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(stopTimeout):
		t.Fatal("Run did not return")
	}
	if err := leader.CheckLeading(termCtx); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("CheckLeading after Run returned = %v, want ErrNotLeader", err)
	}
	lim.release()
	select {
	case err := <-throttled:
		if !errors.Is(err, leader.ErrNotLeader) {
			t.Errorf("the write held in the rate limiter while the term ended = %v, want an error wrapping ErrNotLeader", err)
		}
		t.Logf("refused at the transport: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("the write held in the rate limiter did not return")
	}
	absentFromServer(t, c, cms, ns, "ended-while-throttled")

	// After the term, every write is refused before it is sent.
	existing := fromServer(t, c, cms, ns, "while-leading")
	writes := []struct {
		name string
		do   func() error
	}{
		{"Create", func() error { return c.Create(termCtx, cms.make(ns, "after-term", "0")) }},
		{"Update", func() error { o := existing.DeepCopy(); o.Data["v"] = "1"; return c.Update(termCtx, o) }},
		{"Patch", func() error {
			o := existing.DeepCopy()
			o.Data["v"] = "1"
			return c.Patch(termCtx, o, client.MergeFrom(existing, client.NoLock))
		}},
		{"Apply", func() error { return c.Apply(termCtx, cms.ac(ns, "while-leading", "1")) }},
		{"Delete", func() error { return c.Delete(termCtx, existing, client.DeleteOptions{}) }},
		{"DeleteAllOf", func() error {
			return c.DeleteAllOf(termCtx, &corev1.ConfigMap{}, client.ListOptions{Namespace: ns}, client.DeleteOptions{})
		}},
		{"Status().Update", func() error {
			return c.Status().Update(termCtx, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}})
		}},
		{"Status().Apply", func() error { return c.Status().Apply(termCtx, widgetAC(ns, "w").WithObservedSize(1)) }},
	}
	for _, w := range writes {
		if err := w.do(); !errors.Is(err, leader.ErrNotLeader) {
			t.Errorf("%s under a term that is over = %v, want an error wrapping ErrNotLeader", w.name, err)
		}
	}
	absentFromServer(t, c, cms, ns, "after-term")
	if got := fromServer(t, c, cms, ns, "while-leading"); got.ResourceVersion != existing.ResourceVersion || got.DeletionTimestamp != nil {
		t.Errorf("a fenced write changed while-leading: rv %s (was %s) deletionTimestamp %v", got.ResourceVersion, existing.ResourceVersion, got.DeletionTimestamp)
	}

	// Reads are not fenced.
	if err := c.GetFromServer(termCtx, types.NamespacedName{Namespace: ns, Name: "while-leading"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("GetFromServer under a term that is over: %v, want it to work", err)
	}
	if err := c.ListFromServer(termCtx, &corev1.ConfigMapList{}, client.ListOptions{Namespace: ns}); err != nil {
		t.Errorf("ListFromServer under a term that is over: %v, want it to work", err)
	}
}

// TestClientCacheLag: a manager's Secret informer narrowed by a field
// selector on type, which a Write cannot tell: a write of a Secret outside
// it waits for the informer's next event, and with no such event returns a
// *CacheLagError after ReadYourWrites.Timeout (wrapping
// context.DeadlineExceeded), the write itself done. A later event in scope
// ends such a wait; a dry run does not wait.
func TestClientCacheLag(t *testing.T) {
	ns := newNamespace(t)
	const timeout = 300 * time.Millisecond
	mgr := newManager(t, cfg, ns, manager.Options{
		Name:           "lag-e2e",
		ReadYourWrites: client.ReadYourWrites{Timeout: timeout},
		Scheme:         newScheme(t),
		Informers: informer.Options{
			ByType: map[runtime.Object]informer.TypeOptions{
				&corev1.Secret{}: {FieldSelector: "type=" + string(corev1.SecretTypeTLS)},
			},
		},
	})
	secrets, err := informer.For[*corev1.Secret](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)
	eventually(t, waitTimeout, mgr.Ready, "the manager to be ready")
	c := mgr.Client()
	ctx := t.Context()
	tlsSecret := func(name string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")},
		}
	}
	opaque := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}}
	}

	// patient is a client on the same cache that waits long enough for
	// any event to arrive.
	patient := newClient(t, client.Options{Mapper: mgr.RESTMapper(), Cache: mgr.Cache(), ReadYourWrites: client.ReadYourWrites{Timeout: waitTimeout}})

	// In scope: no wait beyond the informer's event.
	in := tlsSecret("in-scope")
	if err := patient.Create(ctx, in); err != nil {
		t.Fatalf("Create of a Secret in the informer's scope: %v", err)
	}
	if got, err := secrets.Lister().Get(ns, "in-scope"); err != nil || !atOrAfter(got.ResourceVersion, in.ResourceVersion) {
		t.Fatalf("right after Create, the lister: %v", err)
	}

	// Out of scope: nothing in scope changes, so the write waits the
	// timeout out.
	out := opaque("out-of-scope")
	began := time.Now()
	err = c.Create(ctx, out)
	took := time.Since(began)
	var lag *client.CacheLagError
	if !errors.As(err, &lag) {
		t.Fatalf("Create of a Secret outside the informer's field selector = %v (after %v), want a *CacheLagError", err, took)
	}
	t.Logf("CacheLagError: %v", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the CacheLagError does not wrap context.DeadlineExceeded: %v", err)
	}
	if took < timeout || lag.Waited < timeout {
		t.Errorf("the write returned after %v (Waited %v), before the timeout %v", took, lag.Waited, timeout)
	}
	if lag.Namespace != ns || lag.Name != "out-of-scope" || lag.ResourceVersion != out.ResourceVersion || lag.Resource.Resource != "secrets" {
		t.Errorf("CacheLagError names %v %s/%s at %s, want secrets %s/out-of-scope at %s", lag.Resource, lag.Namespace, lag.Name, lag.ResourceVersion, ns, out.ResourceVersion)
	}
	if out.UID == "" || out.ResourceVersion == "" {
		t.Errorf("after a CacheLagError the object passed does not hold the server's answer: uid %q rv %q", out.UID, out.ResourceVersion)
	}
	got := &corev1.Secret{}
	if err := c.GetFromServer(ctx, types.NamespacedName{Namespace: ns, Name: "out-of-scope"}, got); err != nil || got.UID != out.UID {
		t.Errorf("the write that returned a CacheLagError is not on the server: %v", err)
	}

	// A dry run waits for nothing: the same out-of-scope object, which
	// would wait the timeout out, returns at once and without error.
	dry := out.DeepCopy()
	dry.Data["k"] = []byte("dry")
	if err := c.With(client.WriteOptions{DryRun: true}).Update(ctx, dry); err != nil {
		t.Errorf("dry-run Update of an out-of-scope Secret = %v, want nil: a dry run does not wait", err)
	}

	// A wait ends at the informer's next event: a slower client on the same
	// cache writes out of scope while in-scope Secrets keep coming.
	done := make(chan error, 1)
	go func() { done <- patient.Create(ctx, opaque("waits-for-an-event")) }()
	ticks := 0
	eventually(t, waitTimeout, func() bool {
		select {
		case err = <-done:
			return true
		default:
		}
		ticks++
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, tlsSecret(fmt.Sprintf("tick-%d", ticks)), metav1.CreateOptions{}); err != nil {
			t.Errorf("creating an in-scope Secret: %v", err)
		}
		return false
	}, "the out-of-scope write to return once in-scope events follow it")
	if err != nil {
		t.Errorf("the out-of-scope write, followed by in-scope events = %v, want nil", err)
	}
}
