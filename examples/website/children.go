package main

import (
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ctrlkit/ctrlkit/examples/website/api/v1alpha1"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
)

// The mutate functions below set the fields the operator owns, one by one,
// on the object as it is (a copy of the cached one, or a new one): fields
// the API server defaults, or other controllers set, are left alone, so a
// child in shape compares equal and costs no write.

// deploymentFor shapes d as the Deployment that serves site.
func deploymentFor(site *v1alpha1.Website, d *appsv1.Deployment) error {
	if err := objects.SetControllerReference(site, d, websiteGVK); err != nil {
		return err
	}
	d.Labels = withLabels(d.Labels, site)
	d.Spec.Replicas = ptr.To(replicasOf(site))
	if d.Spec.Selector == nil { // immutable once created
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorOf(site)}
	}
	d.Spec.Template.Labels = withLabels(d.Spec.Template.Labels, site)
	c := container(&d.Spec.Template.Spec, "web")
	c.Image = site.Spec.Image
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: site.Spec.Port, Protocol: corev1.ProtocolTCP}}
	return nil
}

// serviceFor shapes s as the Service in front of site's pods.
func serviceFor(site *v1alpha1.Website, s *corev1.Service) error {
	if err := objects.SetControllerReference(site, s, websiteGVK); err != nil {
		return err
	}
	s.Labels = withLabels(s.Labels, site)
	s.Spec.Selector = selectorOf(site)
	s.Spec.Ports = []corev1.ServicePort{{
		Name: "http", Port: site.Spec.Port, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP,
	}}
	return nil
}

// routeFor shapes cm as site's route. It has no owner reference: it lives
// in RoutesNamespace, and owner references do not cross namespaces.
func routeFor(site *v1alpha1.Website, cm *corev1.ConfigMap) error {
	cm.Labels = withLabels(cm.Labels, site)
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[RouteAnnotation] = site.Namespace + "/" + site.Name
	cm.Data = map[string]string{"url": urlOf(site)}
	return nil
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

// withLabels adds the selector labels and managed-by to labels (a map of
// the caller's own copy), keeping the others.
func withLabels(labels map[string]string, site *v1alpha1.Website) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, selectorOf(site))
	labels["app.kubernetes.io/managed-by"] = Name
	return labels
}

// container returns the container called name in spec, adding it if
// missing.
func container(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	spec.Containers = append(spec.Containers, corev1.Container{Name: name})
	return &spec.Containers[len(spec.Containers)-1]
}
