package manager_test

import (
	"context"
	"fmt"
	"log"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// A whole manager runs on the in-memory API server of package fake: its
// informers list and watch it, its client writes to it. This is how to
// test the wiring of an operator (its watches, mappings and predicates)
// without a cluster; to test one Reconcile, call it directly with listers
// from fake.Lister (see package fake).
func Example_fake() {
	cluster, err := fake.New(fake.Options{Objects: []runtime.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := manager.New(cluster.Config(), manager.Options{Name: "stamper"})
	if err != nil {
		log.Fatal(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		log.Fatal(err)
	}
	stamp := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		cached, err := cms.Lister().Get(req.Namespace, req.Name)
		if err != nil || cached.Annotations["stamped"] == "true" {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		cm := cached.DeepCopy()
		cm.Annotations = map[string]string{"stamped": "true"}
		return reconcile.Result{}, mgr.Client().Patch(ctx, cm, client.MergeFrom(cached, client.OptimisticLock))
	})
	if _, err := mgr.AddController("stamper", stamp, manager.ControllerOptions{}, manager.Watch{Source: cms}); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()

	var got corev1.ConfigMap
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := cluster.Get(types.NamespacedName{Namespace: "default", Name: "settings"}, &got); err == nil && got.Annotations["stamped"] == "true" {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("stamped:", got.Annotations["stamped"])
	// Output:
	// stamped: true
}
