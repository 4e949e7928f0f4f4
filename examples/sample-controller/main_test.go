package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ctrlkit/ctrlkit/examples/internal/rbactest"
	"github.com/ctrlkit/ctrlkit/examples/sample-controller/pkg/apis/samplecontroller/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
)

var (
	env *envtest.Environment
	cfg *rest.Config // admin
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "sample-controller: KUBEBUILDER_ASSETS is not set: run `make test`")
		os.Exit(1)
	}
	env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("artifacts", "examples")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "sample-controller: starting envtest:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a stand-in for a condition
	}
}

// TestController runs the controller against envtest, as a user that has
// only the permissions of rbac.yaml. envtest has no Deployment controller
// and no garbage collector: no pods ever start, so the test writes
// Deployment status itself, and a deleted Foo leaves its Deployment behind.
func TestController(t *testing.T) {
	const timeout = 20 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	kube := kubernetes.NewForConfigOrDie(cfg)
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	log := funcr.New(func(p, a string) { t.Log(p, a) }, funcr.Options{})
	mgr, err := manager.New(rbactest.User(t, env, kube, "rbac.yaml"), manager.Options{Logger: log, Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr); err != nil {
		t.Fatal(err)
	}
	// Setup declared these; declaring again returns the same informers, so
	// the test can wait for the controller's own cache.
	fooCache, err := informer.For[*v1alpha1.Foo](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	deployCache, err := informer.For[*appsv1.Deployment](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	// A generated namespace name lets the test run again (-count) on the
	// same control plane.
	nsObj, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sample-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	foos := dynamic.NewForConfigOrDie(cfg).Resource(v1alpha1.SchemeGroupVersion.WithResource("foos")).Namespace(ns)
	deployments := kube.AppsV1().Deployments(ns)

	createFoo := func(name, deploymentName string, replicas int32) *v1alpha1.Foo {
		t.Helper()
		foo := &v1alpha1.Foo{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       v1alpha1.FooSpec{DeploymentName: deploymentName, Replicas: ptr.To(replicas)},
		}
		foo.SetGroupVersionKind(fooKind)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(foo)
		if err != nil {
			t.Fatal(err)
		}
		u, err := foos.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return fromUnstructured(t, u)
	}
	getFoo := func(name string) *v1alpha1.Foo {
		t.Helper()
		u, err := foos.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return fromUnstructured(t, u)
	}
	patch := func(name, body string, subresource ...string) {
		t.Helper()
		if _, err := deployments.Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, subresource...); err != nil {
			t.Fatal(err)
		}
	}
	// owned reports whether the Deployment name exists, is controlled by
	// foo and asks for replicas.
	owned := func(name string, foo *v1alpha1.Foo, replicas int32) func() bool {
		return func() bool {
			d, err := deployments.Get(ctx, name, metav1.GetOptions{})
			return err == nil && metav1.IsControlledBy(d, foo) && d.Spec.Replicas != nil && *d.Spec.Replicas == replicas
		}
	}
	hasEvent := func(object, eventType, reason string) func() bool {
		return func() bool {
			evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object + ",reason=" + reason})
			if err != nil {
				return false
			}
			for _, ev := range evs.Items {
				if ev.Type == eventType && ev.InvolvedObject.Kind == "Foo" {
					return true
				}
			}
			return false
		}
	}

	// Create: a Foo gets a Deployment it controls, with its replicas, and a
	// Synced event.
	foo := createFoo("example-foo", "example-foo", 1)
	eventually(t, timeout, "Deployment created for example-foo", owned("example-foo", foo, 1))
	eventually(t, timeout, "a Synced event for example-foo", hasEvent("example-foo", corev1.EventTypeNormal, SuccessSynced))

	// Scale: a new spec.replicas reaches the Deployment.
	if _, err := foos.Patch(ctx, foo.Name, types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, "Deployment scaled to 3", owned("example-foo", foo, 3))

	// Drift: an edited Deployment is restored.
	patch("example-foo", `{"spec":{"replicas":5}}`)
	eventually(t, timeout, "edited Deployment restored to 3", owned("example-foo", foo, 3))

	// Drift: a deleted Deployment is recreated.
	old, err := deployments.Get(ctx, "example-foo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := deployments.Delete(ctx, "example-foo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, "deleted Deployment recreated", func() bool {
		d, err := deployments.Get(ctx, "example-foo", metav1.GetOptions{})
		return err == nil && d.UID != old.UID && owned("example-foo", foo, 3)()
	})

	// Status: the Foo's availableReplicas follows the Deployment's status,
	// which the test writes as a Deployment controller would.
	for _, available := range []int32{2, 3} {
		patch("example-foo", fmt.Sprintf(`{"status":{"replicas":3,"updatedReplicas":3,"readyReplicas":%d,"availableReplicas":%d}}`, available, available), "status")
		eventually(t, timeout, fmt.Sprintf("Foo status.availableReplicas = %d", available), func() bool {
			return getFoo("example-foo").Status.AvailableReplicas == available
		})
	}

	// A Deployment of the wanted name that the Foo does not control is left
	// alone, with a Warning event on the Foo.
	squatter := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "squatter", Namespace: ns},
		Spec:       newDeployment(&v1alpha1.Foo{Spec: v1alpha1.FooSpec{Replicas: ptr.To[int32](1)}}).Spec,
	}
	if _, err := deployments.Create(ctx, squatter, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createFoo("squatted", "squatter", 2)
	eventually(t, timeout, "an ErrResourceExists event for squatted", hasEvent("squatted", corev1.EventTypeWarning, ErrResourceExists))
	if d, err := deployments.Get(ctx, "squatter", metav1.GetOptions{}); err != nil || len(d.OwnerReferences) != 0 || *d.Spec.Replicas != 1 {
		t.Fatalf("unowned Deployment was changed: %+v (err=%v)", d, err)
	}

	// Delete a Foo: without a garbage collector its Deployment stays, now
	// orphaned. The controller leaves it alone and keeps serving others.
	if err := foos.Delete(ctx, "example-foo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, "the controller's cache to drop example-foo", func() bool {
		_, err := fooCache.Lister().Get(ns, "example-foo")
		return apierrors.IsNotFound(err)
	})
	patch("example-foo", `{"spec":{"replicas":7}}`) // reaches the controller as a key of the deleted Foo
	eventually(t, timeout, "the controller's cache to see the orphan edited", func() bool {
		d, err := deployCache.Lister().Get(ns, "example-foo")
		return err == nil && *d.Spec.Replicas == 7
	})
	later := createFoo("later-foo", "later-foo", 2)
	eventually(t, timeout, "Deployment created for later-foo", owned("later-foo", later, 2))
	if d, err := deployments.Get(ctx, "example-foo", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 7 {
		t.Fatalf("orphaned Deployment of a deleted Foo was changed: %+v (err=%v)", d, err)
	}
	assertNoPanics(t, mgr)
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured) *v1alpha1.Foo {
	t.Helper()
	foo := &v1alpha1.Foo{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, foo); err != nil {
		t.Fatal(err)
	}
	return foo
}

// assertNoPanics fails the test if any Reconcile panicked.
func assertNoPanics(t *testing.T, mgr *manager.Manager) {
	t.Helper()
	mfs, err := mgr.Registry().(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Fatalf("%v reconcile panics", v)
			}
		}
		return
	}
	t.Fatal("no controller_runtime_reconcile_panics_total metric")
}
