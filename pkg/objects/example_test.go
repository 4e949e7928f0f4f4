package objects_test

import (
	"context"
	"fmt"
	"log"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/pkg/fake"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

// A finalizer holds an object's deletion until the operator has cleaned up
// what the garbage collector cannot see. Add it before creating anything
// outside the object; on deletion, clean up, then remove it.
func ExampleAddFinalizer() {
	const finalizer = "example.ctrlkit.io/registry"
	site := &Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}} // a DeepCopy of the cached object

	fmt.Println("added:", objects.AddFinalizer(site, finalizer))
	fmt.Println("added again:", objects.AddFinalizer(site, finalizer)) // false: no Update needed
	fmt.Println("has:", objects.HasFinalizer(site, finalizer))

	// ... the Site is being deleted and the cleanup is done:
	fmt.Println("removed:", objects.RemoveFinalizer(site, finalizer))
	fmt.Println("finalizers:", site.Finalizers)
	// Output:
	// added: true
	// added again: false
	// has: true
	// removed: true
	// finalizers: []
}

func ExampleSetControllerReference() {
	site := &Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "5b0e"}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	if err := objects.SetControllerReference(site, dep, siteGVK); err != nil {
		log.Fatal(err)
	}
	ref := dep.OwnerReferences[0]
	fmt.Println(ref.APIVersion, ref.Kind, ref.Name, ref.UID, *ref.Controller, *ref.BlockOwnerDeletion)

	// Another owner cannot take the Deployment over.
	other := &Site{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "blog", UID: "77c1"}}
	fmt.Println(objects.SetControllerReference(other, dep, siteGVK))
	// Output:
	// test.ctrlkit.io/v1 Site web 5b0e true true
	// objects: team-a/web is controlled by Site "web", so Site "blog" cannot control it: object already has another controller
}

// CreateOrUpdate in a Reconcile: the current Deployment comes from the
// cache (in an operator, informer.For[*appsv1.Deployment](mgr.Cache())),
// writes go through the client (mgr.Client()), and an object already in
// shape costs no request. Here both are served by package fake.
func ExampleCreateOrUpdate() {
	ctx := context.Background()
	e, err := startEnv(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
	})
	if err != nil {
		log.Fatal(err)
	}
	deployments, err := fake.Lister[*appsv1.Deployment](e.cluster)
	if err != nil {
		log.Fatal(err)
	}

	scale := func(d *appsv1.Deployment) error {
		d.Spec.Replicas = ptr.To[int32](3) // set the fields the operator owns, one by one
		return nil
	}
	for _, name := range []string{"web", "api"} {
		dep, op, err := objects.CreateOrUpdate(ctx, e.client, deployments, "team-a", name, scale)
		if err != nil {
			log.Fatal(err) // in Reconcile: return it, and the retry backs off
		}
		fmt.Printf("%s/%s: %s, replicas %d\n", dep.Namespace, dep.Name, op, *dep.Spec.Replicas)
	}
	// Output:
	// team-a/web: unchanged, replicas 3
	// team-a/api: created, replicas 3
}

// A custom type needs no generated clientset: the client writes every
// type in its scheme, and its status through the status subresource
// (Client.Status), the only way to change the status of a type that has
// one.
func Example_customTypeStatus() {
	ctx := context.Background()
	e, err := startEnv() // in an operator: c := mgr.Client()
	if err != nil {
		log.Fatal(err)
	}
	c := e.client

	site := &Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
		Spec:       SiteSpec{Image: "nginx:1.27"},
	}
	if err := c.Create(ctx, site); err != nil { // site is now as stored: uid, resourceVersion
		log.Fatal(err)
	}
	objects.SetCondition(&site.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available"})
	if err := c.Status().Update(ctx, site); err != nil {
		log.Fatal(err)
	}
	fmt.Println(site.Name, site.Spec.Image, objects.IsConditionTrue(site.Status.Conditions, "Ready"))
	// Output:
	// web nginx:1.27 true
}

func ExampleSetCondition() {
	var conds []metav1.Condition // a Website's status.conditions, say
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "RollingOut", Message: "0 of 2 replicas available"}
	fmt.Println("changed:", objects.SetCondition(&conds, ready))
	fmt.Println("changed:", objects.SetCondition(&conds, ready)) // the same again: skip the status write

	ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, "Available", "2 of 2 replicas available"
	fmt.Println("changed:", objects.SetCondition(&conds, ready))
	c := objects.FindCondition(conds, "Ready")
	fmt.Println(c.Type, c.Status, c.Reason, objects.IsConditionTrue(conds, "Ready"))
	// Output:
	// changed: true
	// changed: false
	// changed: true
	// Ready True Available true
}
