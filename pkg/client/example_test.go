package client_test

import (
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/fake"
)

// The writes of a Reconcile. In an operator the client is the manager's
// (mgr.Client()); here it talks to an in-memory API server (package fake).
func Example() {
	ctx := context.Background()
	cluster, err := fake.New(fake.Options{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(cluster.Config(), client.Options{Mapper: cluster.RESTMapper(), FieldManager: "example-operator"})
	if err != nil {
		log.Fatal(err)
	}

	// Server-side apply: only the fields set here are sent, and owned.
	route := corev1ac.ConfigMap("routes", "default").WithData(map[string]string{"shop": "http://shop:80"})
	if err := c.With(client.WriteOptions{Force: true}).Apply(ctx, route); err != nil {
		log.Fatal(err)
	}

	// Create, then a merge patch computed from a copy.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}, Data: map[string]string{"mode": "fast"}}
	if err := c.Create(ctx, cm); err != nil {
		log.Fatal(err)
	}
	orig := cm.DeepCopy()
	cm.Data["mode"] = "safe"
	if err := c.Patch(ctx, cm, client.MergeFrom(orig, client.OptimisticLock)); err != nil {
		log.Fatal(err) // a conflict: someone changed it since orig; return it from Reconcile
	}
	fmt.Println("mode:", cm.Data["mode"])

	// Delete only the object that was read: not one recreated since.
	err = c.Delete(ctx, cm, client.DeleteOptions{UID: "not-its-uid"})
	fmt.Println("conflict:", apierrors.IsConflict(err))
	fmt.Println("deleted:", c.Delete(ctx, cm, client.DeleteOptions{UID: cm.UID}) == nil)

	for _, w := range cluster.Writes() {
		fmt.Println(w.Verb, w.Resource.Resource, w.Name, w.Err == nil)
	}
	// Output:
	// mode: safe
	// conflict: true
	// deleted: true
	// apply configmaps routes true
	// create configmaps settings true
	// patch configmaps settings true
	// delete configmaps settings false
	// delete configmaps settings true
}

// A dry run: the API server validates and answers, and keeps nothing.
func ExampleClient_With() {
	ctx := context.Background()
	cluster, err := fake.New(fake.Options{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(cluster.Config(), client.Options{Mapper: cluster.RESTMapper()})
	if err != nil {
		log.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "try"}}
	if err := c.With(client.WriteOptions{DryRun: true}).Create(ctx, cm); err != nil {
		log.Fatal(err)
	}
	err = c.GetFromServer(ctx, types.NamespacedName{Namespace: "default", Name: "try"}, &corev1.ConfigMap{})
	fmt.Println("stored:", !apierrors.IsNotFound(err))
	// Output:
	// stored: false
}
