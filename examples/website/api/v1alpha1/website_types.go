package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The condition types of a Website's status.
const (
	// ConditionReady is True when every replica of the current spec is
	// available and the site is published.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a rollout is under way.
	ConditionProgressing = "Progressing"
)

// WebsiteSpec is the desired state of a Website.
type WebsiteSpec struct {
	// Image is the container image that serves the site, e.g. nginx:1.27.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	// Replicas is the number of pods that serve the site.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Port is the port the container listens on and the Service exposes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=80
	// +optional
	Port int32 `json:"port,omitempty"`
}

// WebsiteStatus is the observed state of a Website, written by the
// operator.
type WebsiteStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// URL is where the site is served inside the cluster.
	// +optional
	URL string `json:"url,omitempty"`

	// AvailableReplicas is the number of available pods, from the
	// Deployment's status.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// Conditions are Ready and Progressing.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Website is a static website: the operator runs it as a Deployment
// behind a Service, and publishes it in the routes namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=site
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Website struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WebsiteSpec   `json:"spec"`
	Status WebsiteStatus `json:"status,omitempty"`
}

// WebsiteList is a list of Websites.
//
// +kubebuilder:object:root=true
type WebsiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Website `json:"items"`
}
