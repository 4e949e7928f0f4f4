package main

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1"
	websiteac "github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// Reconciler keeps a Website's Deployment, Service, route and status. It
// reads only from listers and writes through the client: the children and
// the status by server-side apply, the finalizer by a merge patch.
type Reconciler struct {
	Websites    informer.Lister[*v1alpha1.Website]
	Deployments informer.Lister[*appsv1.Deployment]
	Services    informer.Lister[*corev1.Service]
	ConfigMaps  informer.Lister[*corev1.ConfigMap]

	Client *client.Client
	Events record.EventRecorder
	// ShardLabels go on the Deployment and Service when the operator runs
	// sharded (manager.Manager.ShardLabels), so that they land in this
	// replica's caches at once rather than once the sharder has labelled
	// them; nil otherwise.
	ShardLabels map[string]string
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
	if site.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, site)
	}
	// The finalizer goes on before the route is created, so that no route
	// can outlive its Website. The patch carries the resourceVersion read:
	// the client's writes are in the cache when they return, so a
	// conflict means someone else changed the Website meanwhile.
	if !objects.HasFinalizer(site, Finalizer) {
		orig := site
		site = site.DeepCopy() // cached objects are shared: never mutate them
		objects.AddFinalizer(site, Finalizer)
		if err := r.Client.Patch(ctx, site, client.MergeFrom(orig, client.OptimisticLock)); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	dep, err := applyChild(ctx, r, site, "Deployment", r.Deployments, site.Namespace, site.Name, deploymentFor(site).WithLabels(r.ShardLabels))
	if err != nil {
		return reconcile.Result{}, err
	}
	if _, err := applyChild(ctx, r, site, "Service", r.Services, site.Namespace, site.Name, serviceFor(site).WithLabels(r.ShardLabels)); err != nil {
		return reconcile.Result{}, err
	}
	if _, err := applyChild(ctx, r, site, "route ConfigMap", r.ConfigMaps, RoutesNamespace, routeName(site), routeFor(site)); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.updateStatus(ctx, site, dep)
}

// applyChild applies ac, a child of site, unless another controller owns
// it, and returns it as the cache holds it after the write, which the
// client's read-your-own-writes makes at least as new as the apply. It
// logs and records an event when the apply changed the child.
func applyChild[T objects.Object](ctx context.Context, r *Reconciler, site *v1alpha1.Website, kind string, lister informer.Lister[T], ns, name string, ac client.ApplyConfiguration) (T, error) {
	var zero T
	key := ns + "/" + name
	before, err := lister.Get(ns, name)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return zero, err
	}
	if exists {
		if ref := metav1.GetControllerOf(before); ref != nil && ref.UID != site.UID {
			// A child controlled by someone else needs a human: report
			// it, and do not retry until something changes.
			err := fmt.Errorf("writing %s %s: controlled by %s %q: %w", kind, key, ref.Kind, ref.Name, objects.ErrAlreadyControlled)
			r.Events.Event(site, corev1.EventTypeWarning, "NotOwned", err.Error())
			return zero, reconcile.TerminalError(err)
		}
	}
	// With force: the operator is the authority on these fields, so a
	// field someone else changed (an edit by hand) is taken back rather
	// than reported as a conflict, as the API docs advise controllers.
	if err := r.Client.With(client.WriteOptions{Force: true}).Apply(ctx, ac); err != nil {
		return zero, fmt.Errorf("applying %s %s: %w", kind, key, err)
	}
	after, err := lister.Get(ns, name)
	if err != nil {
		return zero, fmt.Errorf("reading %s %s after applying it: %w", kind, key, err)
	}
	reason := ""
	switch {
	case !exists:
		reason = "Created"
	case after.GetResourceVersion() != before.GetResourceVersion():
		reason = "Updated"
	default:
		return after, nil
	}
	logr.FromContextOrDiscard(ctx).Info("Wrote child", "kind", kind, "child", key, "operation", reason)
	r.Events.Eventf(site, corev1.EventTypeNormal, reason, "%s %s %s", reason, kind, key)
	return after, nil
}

// finalize removes the route of a Website being deleted, then its
// finalizer, which lets the deletion finish. Deleting by name needs no
// read, so a cache that has not seen the route yet cannot leak it.
func (r *Reconciler) finalize(ctx context.Context, site *v1alpha1.Website) error {
	if !objects.HasFinalizer(site, Finalizer) {
		return nil // done already; other finalizers hold the deletion
	}
	route := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: RoutesNamespace, Name: routeName(site)}}
	err := r.Client.Delete(ctx, route, client.DeleteOptions{})
	switch {
	case err == nil:
		r.Events.Eventf(site, corev1.EventTypeNormal, "Unpublished", "deleted route ConfigMap %s/%s", RoutesNamespace, routeName(site))
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("deleting route %s/%s: %w", RoutesNamespace, routeName(site), err)
	}
	orig := site
	site = site.DeepCopy()
	objects.RemoveFinalizer(site, Finalizer)
	if err := r.Client.Patch(ctx, site, client.MergeFrom(orig, client.OptimisticLock)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	logr.FromContextOrDiscard(ctx).Info("Removed route and finalizer")
	return nil
}

// updateStatus applies the Website's status if it changed: the URL, the
// rollout as Ready and Progressing, and the generation they describe.
func (r *Reconciler) updateStatus(ctx context.Context, site *v1alpha1.Website, dep *appsv1.Deployment) error {
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
	ac := websiteac.WebsiteStatus().
		WithObservedGeneration(status.ObservedGeneration).
		WithURL(status.URL).
		WithAvailableReplicas(status.AvailableReplicas)
	for _, c := range status.Conditions {
		ac.WithConditions(metav1ac.Condition().WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).
			WithMessage(c.Message).WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
	}
	if err := r.Client.With(client.WriteOptions{Force: true}).Status().Apply(ctx, websiteac.Website(site.Name, site.Namespace).WithStatus(ac)); err != nil {
		return fmt.Errorf("applying status: %w", err)
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
