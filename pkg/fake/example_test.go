package fake_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
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
