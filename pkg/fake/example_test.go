package fake_test

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// A Reconciler's test: seed the fake, give the Reconciler clients built
// on Config and listers from Lister, then check the state and the writes.
func Example() {
	ctx := context.Background()
	c, err := fake.New(fake.Options{Objects: []runtime.Object{&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"},
		Data:       map[string]string{"mode": "fast"},
	}}})
	if err != nil {
		panic(err)
	}
	cs, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		panic(err)
	}
	lister, err := fake.Lister[*corev1.ConfigMap](c)
	if err != nil {
		panic(err)
	}

	// What a Reconciler does: read from the cache, write a copy.
	cached, err := lister.Get("default", "settings")
	if err != nil {
		panic(err)
	}
	cm := cached.DeepCopy()
	cm.Data["mode"] = "safe"
	if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		panic(err)
	}

	// The lister already has the write; Writes has the request.
	now, err := lister.Get("default", "settings")
	if err != nil {
		panic(err)
	}
	fmt.Println(now.Data["mode"])
	w := c.Writes()[0]
	fmt.Println(w.Verb, w.Resource.Resource, w.Namespace+"/"+w.Name)
	// Output:
	// safe
	// update configmaps default/settings
}

// A Reconciler that reads Secrets' metadata only, through an index of
// their controlling owners, is tested with the lister of that form and
// the same index.
func ExampleMetadataLister() {
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", UID: "uid-1", Controller: ptr.To(true)}
	c, err := fake.New(fake.Options{Objects: []runtime.Object{&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "token", OwnerReferences: []metav1.OwnerReference{owner}},
	}}})
	if err != nil {
		panic(err)
	}
	secrets, err := fake.MetadataLister[*corev1.Secret](c,
		informer.Indexers(informer.ControllerIndex, informer.IndexByControllerOwner[*metav1.PartialObjectMetadata]))
	if err != nil {
		panic(err)
	}
	owned, err := secrets.ByIndex(informer.ControllerIndex, informer.ControllerKey(schema.GroupKind{Kind: "ConfigMap"}, "default", "settings"))
	if err != nil {
		panic(err)
	}
	for _, s := range owned {
		fmt.Println(s.Kind, s.Namespace+"/"+s.Name)
	}
	// Output:
	// Secret default/token
}

// Server-side apply of a custom resource by its CRD's schema: spec.tags
// is a set (+listType=set), so two managers' applies keep both values,
// as on kube-apiserver. Without the converter the list would be atomic
// and the second apply a conflict.
func ExampleCRDTypeConverter() {
	// In a project: os.ReadFile("config/crd/bases/test.ctrlkit.io_widgets.yaml").
	crd := []byte(widgetCRD)
	tc, err := fake.CRDTypeConverter(crd)
	if err != nil {
		panic(err)
	}
	scheme := runtime.NewScheme()
	if err := kubescheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	scheme.AddKnownTypes(testGV, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(scheme, testGV)
	c, err := fake.New(fake.Options{Scheme: scheme, TypeConverter: tc})
	if err != nil {
		panic(err)
	}
	dc, err := dynamic.NewForConfig(c.Config())
	if err != nil {
		panic(err)
	}
	widgets := dc.Resource(testGV.WithResource("widgets")).Namespace("default")
	for manager, tag := range map[string]string{"a": "x", "b": "y"} {
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.ctrlkit.io/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w"},
			"spec":     map[string]any{"tags": []any{tag}},
		}}
		if _, err := widgets.Apply(context.Background(), "w", w, metav1.ApplyOptions{FieldManager: manager}); err != nil {
			panic(err)
		}
	}
	w, err := widgets.Get(context.Background(), "w", metav1.GetOptions{})
	if err != nil {
		panic(err)
	}
	tags, _, _ := unstructured.NestedStringSlice(w.Object, "spec", "tags")
	slices.Sort(tags)
	fmt.Println(tags)
	// Output: [x y]
}
