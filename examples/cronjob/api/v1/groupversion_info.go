// Package v1 is the API of the cronjob example: the CronJob kind in group
// batch.tutorial.kubebuilder.io, version v1, field for field the kubebuilder
// book's tutorial type.
//
// The deepcopy functions (zz_generated.deepcopy.go) and the CRD manifest
// (../../config/crd) are generated from these types by controller-gen: run
// `make generate` after changing them.
//
// +kubebuilder:object:generate=true
// +groupName=batch.tutorial.kubebuilder.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "batch.tutorial.kubebuilder.io", Version: "v1"}

	// SchemeBuilder registers the types in this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CronJob{}, &CronJobList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
