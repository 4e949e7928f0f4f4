package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1"
)

// The functions below say, by server-side apply, which fields of each
// child the operator owns, and nothing else: fields the API server
// defaults, or other controllers set, are neither sent nor owned, so they
// are left alone; a field the operator stops setting is removed.

// deploymentFor is the Deployment that serves site.
func deploymentFor(site *v1alpha1.Website) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment(site.Name, site.Namespace).
		WithLabels(labelsOf(site)).
		WithOwnerReferences(ownerOf(site)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicasOf(site)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorOf(site))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labelsOf(site)).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("web").
					WithImage(site.Spec.Image).
					WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(site.Spec.Port).WithProtocol(corev1.ProtocolTCP))))))
}

// serviceFor is the Service in front of site's pods.
func serviceFor(site *v1alpha1.Website) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(site.Name, site.Namespace).
		WithLabels(labelsOf(site)).
		WithOwnerReferences(ownerOf(site)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(selectorOf(site)).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(site.Spec.Port).
				WithTargetPort(intstr.FromString("http")).WithProtocol(corev1.ProtocolTCP)))
}

// routeFor is site's route. It has no owner reference: it lives in
// RoutesNamespace, and owner references do not cross namespaces.
func routeFor(site *v1alpha1.Website) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(routeName(site), RoutesNamespace).
		WithLabels(labelsOf(site)).
		WithAnnotations(map[string]string{RouteAnnotation: site.Namespace + "/" + site.Name}).
		WithData(map[string]string{"url": urlOf(site)})
}

// ownerOf is the controller reference of site's children. Its
// blockOwnerDeletion makes the garbage collector's foreground deletion
// wait for them.
func ownerOf(site *v1alpha1.Website) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(websiteGVK.GroupVersion().String()).WithKind(websiteGVK.Kind).
		WithName(site.Name).WithUID(site.UID).
		WithController(true).WithBlockOwnerDeletion(true)
}

// routeName is the name of site's route ConfigMap. Namespaces hold no dots,
// so the name is unique.
func routeName(site *v1alpha1.Website) string { return site.Namespace + "." + site.Name }

// urlOf is where the Service serves site inside the cluster.
func urlOf(site *v1alpha1.Website) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", site.Name, site.Namespace, site.Spec.Port)
}

// replicasOf is site's replica count; the CRD defaults it to 1.
func replicasOf(site *v1alpha1.Website) int32 {
	return ptr.Deref(site.Spec.Replicas, 1)
}

// selectorOf selects site's pods.
func selectorOf(site *v1alpha1.Website) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "website", "app.kubernetes.io/instance": site.Name}
}

// labelsOf are the labels the operator puts on site's children: the
// selector labels and managed-by.
func labelsOf(site *v1alpha1.Website) map[string]string {
	l := selectorOf(site)
	l["app.kubernetes.io/managed-by"] = Name
	return l
}
