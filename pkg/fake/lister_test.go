package fake_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// TestListerIsNeverBehind checks that a lister holds the seeded objects
// and every accepted write by the time the client has its answer, with no
// waiting, and ignores dry runs.
func TestListerIsNeverBehind(t *testing.T) {
	c := newCluster(t, configMap("ns", "seed", nil), &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}})
	cms := clientset(t, c, "application/vnd.kubernetes.protobuf").CoreV1().ConfigMaps("ns")
	ctx := t.Context()
	l, err := fake.Lister[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get("ns", "seed"); err != nil {
		t.Errorf("seeded object: %v", err)
	}

	created, err := cms.Create(ctx, configMap("ns", "a", map[string]string{"k": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Get("ns", "a")
	if err != nil || got.ResourceVersion != created.ResourceVersion {
		t.Errorf("right after create, lister has %v, %v; want resourceVersion %s", got, err, created.ResourceVersion)
	}
	created.Data["k"] = "2"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Get("ns", "a"); got.Data["k"] != "2" || got.ResourceVersion != updated.ResourceVersion {
		t.Errorf("right after update, lister has %+v; want k=2 at %s", got, updated.ResourceVersion)
	}
	if _, err := cms.Create(ctx, configMap("ns", "dry", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get("ns", "dry"); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run create reached the lister: %v", err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get("ns", "a"); !apierrors.IsNotFound(err) {
		t.Errorf("right after delete, lister Get: %v, want NotFound", err)
	}

	again, err := fake.Lister[*corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	if all, err := again.ListInNamespace("ns", labels.Everything()); err != nil || len(all) != 1 || all[0].Name != "seed" {
		t.Errorf("a second lister lists %v, %v; want only seed", all, err)
	}
	widgets, err := fake.Lister[*Widget](c)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := widgets.Get("ns", "w"); err != nil || w.Name != "w" {
		t.Errorf("custom kind lister Get = %v, %v", w, err)
	}
}

// TestListerRefusesUnknownTypes checks the error for a type not served.
func TestListerRefusesUnknownTypes(t *testing.T) {
	c := newCluster(t)
	if _, err := fake.Lister[*unregistered](c); err == nil {
		t.Error("Lister of a type not in the scheme succeeded")
	}
	if _, err := fake.Lister[*corev1.ConfigMapList](c); err == nil {
		t.Error("Lister of a List type succeeded")
	}
}

// byApp files an object under its app label.
func byApp[T metav1.Object](obj T) []string {
	if app, ok := obj.GetLabels()["app"]; ok {
		return []string{app}
	}
	return nil
}

// TestListersOfEveryFormTakeIndexes checks the typed, metadata-only and
// unstructured listers, each with indexes: seeded objects and every
// accepted write are in each index by the time the client has its
// answer, and the metadata-only lister holds what informer.ForMetadata
// holds (the kind in TypeMeta, no data).
func TestListersOfEveryFormTakeIndexes(t *testing.T) {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner", UID: "owner-uid"}}
	seed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "seed", Labels: map[string]string{"app": "web"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "owner-uid", Controller: ptr.To(true)}}},
		Data: map[string][]byte{"k": []byte("secret")}}
	c := newCluster(t, owner, seed)
	secrets := clientset(t, c, "application/vnd.kubernetes.protobuf").CoreV1().Secrets("ns")
	ctx := t.Context()

	typed, err := fake.Lister[*corev1.Secret](c, informer.Indexers("app", byApp[*corev1.Secret]))
	if err != nil {
		t.Fatal(err)
	}
	md, err := fake.MetadataLister[*corev1.Secret](c,
		informer.Indexers(informer.ControllerIndex, informer.IndexByControllerOwner[*metav1.PartialObjectMetadata]),
		informer.Indexers("app", byApp[*metav1.PartialObjectMetadata]))
	if err != nil {
		t.Fatal(err)
	}
	un, err := fake.ResourceLister(c, corev1.SchemeGroupVersion.WithResource("secrets"), informer.Indexers("app", byApp[*unstructured.Unstructured]))
	if err != nil {
		t.Fatal(err)
	}
	ownerKey := informer.ControllerKey(schema.GroupKind{Kind: "ConfigMap"}, "ns", "owner")
	// names lists what each lister's "app" index holds under app, and the
	// metadata lister's controller index under the owner.
	check := func(when, app string, want ...string) {
		t.Helper()
		names := func(objs []metav1.Object, err error) []string {
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			var out []string
			for _, o := range objs {
				out = append(out, o.GetName())
			}
			slices.Sort(out)
			return out
		}
		got := map[string][]string{
			"typed":        names(asMeta(typed.ByIndex("app", app))),
			"metadata":     names(asMeta(md.ByIndexInNamespace("ns", "app", app))),
			"unstructured": names(asMeta(un.ByIndex("app", app))),
		}
		for form, names := range got {
			if !slices.Equal(names, want) {
				t.Errorf("%s: %s lister's app=%s index holds %v, want %v", when, form, app, names, want)
			}
		}
	}
	check("seeded", "web", "seed")
	if owned, err := md.ByIndex(informer.ControllerIndex, ownerKey); err != nil || len(owned) != 1 || owned[0].Name != "seed" {
		t.Errorf("seeded: controller index holds %v, %v; want seed", owned, err)
	}
	got, err := md.Get("ns", "seed")
	if err != nil {
		t.Fatal(err)
	}
	if got.APIVersion != "v1" || got.Kind != "Secret" {
		t.Errorf("metadata lister's TypeMeta = %+v, want v1 Secret, as informer.ForMetadata holds", got.TypeMeta)
	}
	if u, err := un.Get("ns", "seed"); err != nil || u.GetKind() != "Secret" || u.Object["data"] == nil {
		t.Errorf("unstructured lister's seed = %v, %v; want a whole Secret with its kind", u, err)
	}

	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"app": "web"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after create", "web", "b", "seed")
	moved, err := secrets.Get(ctx, "seed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved.Labels["app"] = "db"
	moved.OwnerReferences = nil
	if _, err := secrets.Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after relabel", "web", "b")
	check("after relabel", "db", "seed")
	if owned, err := md.ByIndex(informer.ControllerIndex, ownerKey); err != nil || len(owned) != 0 {
		t.Errorf("after the owner reference was dropped, the controller index holds %v, %v; want none", owned, err)
	}
	if err := secrets.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after delete", "web")
}

// asMeta turns a lister's typed answer into metadata, for comparing
// listers of different forms.
func asMeta[T metav1.Object](objs []T, err error) ([]metav1.Object, error) {
	out := make([]metav1.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out, err
}

// TestListerErrorsNameTheFix checks the errors for a lister asked for in
// the wrong form, for an unknown resource, and for an index declared
// twice on one kind and form.
func TestListerErrorsNameTheFix(t *testing.T) {
	c := newCluster(t)
	if _, err := fake.Lister[*metav1.PartialObjectMetadata](c); err == nil || !strings.Contains(err.Error(), "fake.MetadataLister") {
		t.Errorf("Lister[*PartialObjectMetadata]: %v, want a pointer to fake.MetadataLister", err)
	}
	if _, err := fake.Lister[*unstructured.Unstructured](c); err == nil || !strings.Contains(err.Error(), "fake.ResourceLister") {
		t.Errorf("Lister[*Unstructured]: %v, want a pointer to fake.ResourceLister", err)
	}
	if _, err := fake.MetadataLister[*unregistered](c); err == nil || !strings.Contains(err.Error(), "fake.Options.Scheme") {
		t.Errorf("MetadataLister of a type not in the scheme: %v, want the fix", err)
	}
	if _, err := fake.ResourceLister(c, corev1.SchemeGroupVersion.WithResource("configmap")); err == nil || !strings.Contains(err.Error(), "plural") {
		t.Errorf("ResourceLister of a singular resource: %v, want the fix", err)
	}
	idx := informer.Indexers("app", byApp[*corev1.ConfigMap])
	if _, err := fake.Lister[*corev1.ConfigMap](c, idx); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.Lister[*corev1.ConfigMap](c, idx); !errors.Is(err, informer.ErrIndexExists) {
		t.Errorf("the same index declared twice: %v, want ErrIndexExists", err)
	}
	// Another form has a cache, and indexes, of its own.
	if _, err := fake.MetadataLister[*corev1.ConfigMap](c, informer.Indexers("app", byApp[*metav1.PartialObjectMetadata])); err != nil {
		t.Errorf("the same index name on the metadata form: %v", err)
	}
}
