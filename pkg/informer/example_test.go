package informer_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/go-logr/logr"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// exampleClients stands in for the clients a Manager builds from a rest
// config: a fake API server (pkg/fake) holding objs.
func exampleClients(objs ...runtime.Object) informer.Clients {
	cluster, err := fake.New(fake.Options{Objects: objs})
	if err != nil {
		panic(err)
	}
	return informer.Clients{Config: cluster.Config(), Mapper: cluster.RESTMapper()}
}

func exampleConfigMap(ns, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// Declare a typed informer before the cache starts, wait for it to sync,
// and read through its Lister. A Manager does the starting and waiting.
func ExampleFor() {
	c, err := informer.New(exampleClients(exampleConfigMap("default", "settings", nil)), informer.Options{})
	if err != nil {
		panic(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.Wait() }()
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	syncCtx, done := context.WithTimeout(ctx, 10*time.Second)
	defer done()
	if err := c.WaitForSync(syncCtx, logr.Discard(), 0); err != nil {
		panic(err)
	}
	cm, err := cms.Lister().Get("default", "settings")
	fmt.Println(cm.Name, err)
	// Output: settings <nil>
}

// Narrow one type's informer: only the ConfigMaps labelled app=web in
// namespace web are cached; other types keep the cache-wide options.
func ExampleOptions_byType() {
	clients := exampleClients(
		exampleConfigMap("web", "routes", map[string]string{"app": "web"}),
		exampleConfigMap("web", "unrelated", nil),
		exampleConfigMap("other", "routes", map[string]string{"app": "web"}),
	)
	c, err := informer.New(clients, informer.Options{
		ByType: map[runtime.Object]informer.TypeOptions{
			&corev1.ConfigMap{}: {Namespaces: []string{"web"}, LabelSelector: "app=web"},
		},
	})
	if err != nil {
		panic(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](c)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.Wait() }()
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	syncCtx, done := context.WithTimeout(ctx, 10*time.Second)
	defer done()
	if err := c.WaitForSync(syncCtx, logr.Discard(), 0); err != nil {
		panic(err)
	}
	all, _ := cms.Lister().List(nil)
	for _, cm := range all {
		fmt.Println(cm.Namespace + "/" + cm.Name)
	}
	// Output: web/routes
}
