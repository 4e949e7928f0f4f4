package main

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlkit/ctrlkit/examples/sample-controller/pkg/apis/samplecontroller/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

const controllerAgentName = "sample-controller"

const (
	// SuccessSynced is the reason of the Event recorded when a Foo is synced.
	SuccessSynced = "Synced"
	// ErrResourceExists is the reason of the Warning Event recorded when a
	// Foo fails to sync because a Deployment of the same name exists that
	// the Foo does not control.
	ErrResourceExists = "ErrResourceExists"
	// MessageResourceExists is the message of the ErrResourceExists Event.
	MessageResourceExists = "Resource %q already exists and is not managed by Foo"
	// MessageResourceSynced is the message of the Synced Event.
	MessageResourceSynced = "Foo synced successfully"
	// FieldManager distinguishes this controller from other writers.
	FieldManager = controllerAgentName
)

// fooKind is the kind that owner references to a Foo name.
var fooKind = v1alpha1.SchemeGroupVersion.WithKind("Foo")

// Controller reconciles Foos: each gets a Deployment named by its
// spec.deploymentName, which it controls, with its spec.replicas, and its
// status reports the Deployment's available replicas.
type Controller struct {
	kubeclientset     kubernetes.Interface                   // writes Deployments
	foosClient        dynamic.NamespaceableResourceInterface // writes Foo status; no generated clientset
	deploymentsLister informer.Lister[*appsv1.Deployment]
	foosLister        informer.Lister[*v1alpha1.Foo]
	recorder          record.EventRecorder
}

// NewScheme returns client-go's scheme plus Foo, for manager.Options
// Scheme: informer.For and the event recorder find Foo's kind in it.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := kubescheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, v1alpha1.AddToScheme(s)
}

// Setup declares the informers the controller reads and adds the controller
// to mgr, whose scheme must come from NewScheme. The CRD must be installed:
// declaring the Foo informer asks the API server's discovery.
func Setup(mgr *manager.Manager) error {
	foos, err := informer.For[*v1alpha1.Foo](mgr.Cache())
	if err != nil {
		return err
	}
	deployments, err := informer.For[*appsv1.Deployment](mgr.Cache())
	if err != nil {
		return err
	}
	c := &Controller{
		kubeclientset:     mgr.Kubernetes(),
		foosClient:        mgr.Dynamic().Resource(foos.GroupVersionResource()),
		deploymentsLister: deployments.Lister(),
		foosLister:        foos.Lister(),
		recorder:          mgr.EventRecorder(controllerAgentName),
	}
	// A Foo's own events enqueue it. A Deployment's events enqueue the Foo
	// that controls it, if any (the classic's handleObject, tombstones
	// included); resyncs, which change no resourceVersion, are dropped.
	_, err = mgr.AddController(controllerAgentName, c, manager.ControllerOptions{Workers: 2},
		manager.Watch{Source: foos},
		manager.Watch{
			Source:     deployments,
			Map:        informer.OwnerKey(fooKind.GroupKind()),
			Predicates: []informer.Predicate{informer.ResourceVersionChanged()},
		},
	)
	return err
}

// Reconcile is the classic's syncHandler: it compares the actual state with
// the desired, converges the two, and updates the Foo's status. The worker
// loop around it (queue, Done/Forget, backoff, panics) is ctrlkit's.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := logr.FromContextOrDiscard(ctx)

	foo, err := c.foosLister.Get(req.Namespace, req.Name)
	if errors.IsNotFound(err) {
		return reconcile.Result{}, nil // deleted; the garbage collector removes its Deployment
	}
	if err != nil {
		return reconcile.Result{}, err
	}

	deploymentName := foo.Spec.DeploymentName
	if deploymentName == "" {
		// Retrying cannot help; the Foo is reconciled again when it changes.
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("foo %s/%s: spec.deploymentName must be specified", foo.Namespace, foo.Name))
	}

	deployment, err := c.deploymentsLister.Get(foo.Namespace, deploymentName)
	if errors.IsNotFound(err) {
		deployment, err = c.kubeclientset.AppsV1().Deployments(foo.Namespace).Create(ctx, newDeployment(foo), metav1.CreateOptions{FieldManager: FieldManager})
	}
	if err != nil { // transient: retried with backoff
		return reconcile.Result{}, fmt.Errorf("getting or creating Deployment %s/%s: %w", foo.Namespace, deploymentName, err)
	}

	// A Deployment of that name that this Foo does not control is left alone.
	if !metav1.IsControlledBy(deployment, foo) {
		c.recorder.Event(foo, corev1.EventTypeWarning, ErrResourceExists, fmt.Sprintf(MessageResourceExists, deployment.Name))
		return reconcile.Result{}, fmt.Errorf("deployment %s/%s exists and is not controlled by Foo %s", foo.Namespace, deployment.Name, foo.Name)
	}

	if foo.Spec.Replicas != nil && *foo.Spec.Replicas != *deployment.Spec.Replicas {
		logger.V(4).Info("Update deployment resource", "currentReplicas", *deployment.Spec.Replicas, "desiredReplicas", *foo.Spec.Replicas)
		deployment, err = c.kubeclientset.AppsV1().Deployments(foo.Namespace).Update(ctx, newDeployment(foo), metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("updating Deployment %s/%s: %w", foo.Namespace, deploymentName, err)
		}
	}

	if err := c.updateFooStatus(ctx, foo, deployment); err != nil {
		return reconcile.Result{}, fmt.Errorf("updating status of Foo %s/%s: %w", foo.Namespace, foo.Name, err)
	}
	c.recorder.Event(foo, corev1.EventTypeNormal, SuccessSynced, MessageResourceSynced)
	return reconcile.Result{}, nil
}

// updateFooStatus writes the Deployment's available replicas to the Foo's
// status subresource through the dynamic client. Unlike the classic it
// skips the write when nothing would change.
func (c *Controller) updateFooStatus(ctx context.Context, foo *v1alpha1.Foo, deployment *appsv1.Deployment) error {
	if foo.Status.AvailableReplicas == deployment.Status.AvailableReplicas {
		return nil
	}
	fooCopy := foo.DeepCopy() // cached objects are shared: never mutate them
	fooCopy.Status.AvailableReplicas = deployment.Status.AvailableReplicas
	fooCopy.SetGroupVersionKind(fooKind)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fooCopy)
	if err != nil {
		return err
	}
	_, err = c.foosClient.Namespace(foo.Namespace).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: FieldManager})
	return err
}

// newDeployment returns the Deployment a Foo wants, with a controller
// reference to the Foo so that its events map back to it.
func newDeployment(foo *v1alpha1.Foo) *appsv1.Deployment {
	labels := map[string]string{
		"app":        "nginx",
		"controller": foo.Name,
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:            foo.Spec.DeploymentName,
			Namespace:       foo.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(foo, fooKind)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: foo.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}},
				},
			},
		},
	}
}
