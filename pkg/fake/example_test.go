package fake_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
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
