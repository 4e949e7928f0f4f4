// Package v1alpha1 is the API of the website example operator: the
// Website kind in group example.ctrlkit.io, version v1alpha1.
//
// The deepcopy functions (zz_generated.deepcopy.go), the apply
// configurations for server-side apply (applyconfiguration/) and the CRD
// manifest (../../config/crd) are generated from these types by
// controller-gen: run `make generate` after changing them.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=example.ctrlkit.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "example.ctrlkit.io", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name the generated
	// apply configurations (applyconfiguration/) use.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the types in this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Website{}, &WebsiteList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
