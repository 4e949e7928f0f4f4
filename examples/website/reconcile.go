package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// Reconciler keeps a Website's Deployment, Service, route and status. It
// reads only from listers; it writes built-in types through Kube and
// Websites through the dynamic client.
type Reconciler struct {
	Websites    informer.Lister[*v1alpha1.Website]
	Deployments informer.Lister[*appsv1.Deployment]
	Services    informer.Lister[*corev1.Service]
	ConfigMaps  informer.Lister[*corev1.ConfigMap]

	Kube          kubernetes.Interface
	WebsiteClient dynamic.NamespaceableResourceInterface
	Events        record.EventRecorder
}

// Reconcile implements reconcile.Reconciler. The request names a Website.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	site, err := r.Websites.Get(req.Namespace, req.Name)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil // gone; the garbage collector deletes its children
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	websites := objects.NewDynamicWriter[*v1alpha1.Website](r.WebsiteClient.Namespace(site.Namespace), websiteGVK)
	if site.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, websites, site)
	}
	// The finalizer goes on before the route is created, so that no route
	// can outlive its Website.
	if !objects.HasFinalizer(site, Finalizer) {
		site = site.DeepCopy() // cached objects are shared: never mutate them
		objects.AddFinalizer(site, Finalizer)
		if site, err = websites.Update(ctx, site, metav1.UpdateOptions{}); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	dep, op, err := objects.CreateOrUpdate(ctx, r.Deployments, r.Kube.AppsV1().Deployments(site.Namespace),
		site.Namespace, site.Name, func(d *appsv1.Deployment) error { return deploymentFor(site, d) })
	if err != nil {
		return reconcile.Result{}, r.childFailed(site, "Deployment", err)
	}
	r.recordChange(ctx, site, "Deployment", site.Namespace+"/"+site.Name, op)

	_, op, err = objects.CreateOrUpdate(ctx, r.Services, r.Kube.CoreV1().Services(site.Namespace),
		site.Namespace, site.Name, func(s *corev1.Service) error { return serviceFor(site, s) })
	if err != nil {
		return reconcile.Result{}, r.childFailed(site, "Service", err)
	}
	r.recordChange(ctx, site, "Service", site.Namespace+"/"+site.Name, op)

	_, op, err = objects.CreateOrUpdate(ctx, r.ConfigMaps, r.Kube.CoreV1().ConfigMaps(RoutesNamespace),
		RoutesNamespace, routeName(site), func(cm *corev1.ConfigMap) error { return routeFor(site, cm) })
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("publishing route %s/%s: %w", RoutesNamespace, routeName(site), err)
	}
	r.recordChange(ctx, site, "route ConfigMap", RoutesNamespace+"/"+routeName(site), op)

	return reconcile.Result{}, r.updateStatus(ctx, websites, site, dep)
}

// finalize removes the route of a Website being deleted, then its
// finalizer, which lets the deletion finish. Deleting by name needs no
// read, so a cache that has not seen the route yet cannot leak it.
func (r *Reconciler) finalize(ctx context.Context, websites *objects.DynamicWriter[*v1alpha1.Website], site *v1alpha1.Website) error {
	if !objects.HasFinalizer(site, Finalizer) {
		return nil // done already; other finalizers hold the deletion
	}
	err := r.Kube.CoreV1().ConfigMaps(RoutesNamespace).Delete(ctx, routeName(site), metav1.DeleteOptions{})
	switch {
	case err == nil:
		r.Events.Eventf(site, corev1.EventTypeNormal, "Unpublished", "deleted route ConfigMap %s/%s", RoutesNamespace, routeName(site))
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("deleting route %s/%s: %w", RoutesNamespace, routeName(site), err)
	}
	site = site.DeepCopy()
	objects.RemoveFinalizer(site, Finalizer)
	if _, err := websites.Update(ctx, site, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	logr.FromContextOrDiscard(ctx).Info("Removed route and finalizer")
	return nil
}

// updateStatus writes the Website's status if it changed: the URL, the
// rollout as Ready and Progressing, and the generation they describe.
func (r *Reconciler) updateStatus(ctx context.Context, websites *objects.DynamicWriter[*v1alpha1.Website], site *v1alpha1.Website, dep *appsv1.Deployment) error {
	prevReady := objects.FindCondition(site.Status.Conditions, v1alpha1.ConditionReady)
	status := *site.Status.DeepCopy()
	status.ObservedGeneration = site.Generation
	status.URL = urlOf(site)
	status.AvailableReplicas = dep.Status.AvailableReplicas
	done, msg := rollout(dep, replicasOf(site))
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "RollingOut", Message: msg, ObservedGeneration: site.Generation}
	progressing := metav1.Condition{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "RollingOut", Message: msg, ObservedGeneration: site.Generation}
	if done {
		ready.Status, ready.Reason = metav1.ConditionTrue, "Available"
		progressing.Status, progressing.Reason = metav1.ConditionFalse, "RolloutComplete"
	}
	objects.SetCondition(&status.Conditions, ready)
	objects.SetCondition(&status.Conditions, progressing)
	if equality.Semantic.DeepEqual(status, site.Status) {
		return nil
	}
	site = site.DeepCopy()
	site.Status = status
	if _, err := websites.UpdateStatus(ctx, site, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	if prevReady == nil || prevReady.Status != ready.Status {
		r.Events.Eventf(site, corev1.EventTypeNormal, ready.Reason, "Ready=%s: %s", ready.Status, msg)
	}
	return nil
}

// rollout reports whether dep has rolled out want available replicas of
// its current spec, and says how far it got. It reads only the status the
// Deployment controller writes.
func rollout(dep *appsv1.Deployment, want int32) (bool, string) {
	s := dep.Status
	switch {
	case s.ObservedGeneration < dep.Generation:
		return false, fmt.Sprintf("Deployment %s: waiting for generation %d to be observed", dep.Name, dep.Generation)
	case s.UpdatedReplicas < want:
		return false, fmt.Sprintf("Deployment %s: %d of %d replicas updated", dep.Name, s.UpdatedReplicas, want)
	case s.AvailableReplicas < want:
		return false, fmt.Sprintf("Deployment %s: %d of %d replicas available", dep.Name, s.AvailableReplicas, want)
	}
	return true, fmt.Sprintf("Deployment %s: %d of %d replicas available", dep.Name, s.AvailableReplicas, want)
}

// recordChange logs and records an event for a child that was written.
func (r *Reconciler) recordChange(ctx context.Context, site *v1alpha1.Website, kind, key string, op objects.OperationResult) {
	if op == objects.Unchanged {
		return
	}
	logr.FromContextOrDiscard(ctx).Info("Wrote child", "kind", kind, "child", key, "operation", op)
	reason := "Created"
	if op == objects.Updated {
		reason = "Updated"
	}
	r.Events.Eventf(site, corev1.EventTypeNormal, reason, "%s %s %s", op, kind, key)
}

// childFailed turns a failure to write a child into the error Reconcile
// returns: a child controlled by someone else needs a human, so it is
// reported as an event and not retried until something changes.
func (r *Reconciler) childFailed(site *v1alpha1.Website, kind string, err error) error {
	err = fmt.Errorf("writing %s %s/%s: %w", kind, site.Namespace, site.Name, err)
	if errors.Is(err, objects.ErrAlreadyControlled) {
		r.Events.Event(site, corev1.EventTypeWarning, "NotOwned", err.Error())
		return reconcile.TerminalError(err)
	}
	return err
}
