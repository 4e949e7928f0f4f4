package fake

import (
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
)

// resource is one kind the fake serves, at one version.
type resource struct {
	gvk        schema.GroupVersionKind
	gvr        schema.GroupVersionResource
	singular   string
	goType     reflect.Type // a struct type; objects are pointers to it
	namespaced bool
	hasStatus  bool // the struct has a field Status: served as the status subresource
	builtin    bool // a Kubernetes API type (package under k8s.io/): strategic merge patch allowed
	protobuf   bool // one of client-go's built-in types: served in protobuf too
	// returnsDeleted: a delete that removes the object answers with it,
	// not a Status.
	returnsDeleted bool
}

// new returns a new, empty object of the resource's Go type.
func (r *resource) new() runtime.Object {
	return reflect.New(r.goType).Interface().(runtime.Object)
}

func (r *resource) groupResource() schema.GroupResource { return r.gvr.GroupResource() }

// clusterScoped are the built-in kinds kube-apiserver serves without a
// namespace. The scheme does not say which kinds are cluster-scoped, so
// this list is fixed; Options.ClusterScoped adds custom kinds.
var clusterScoped = map[schema.GroupKind]bool{
	{Group: "", Kind: "Namespace"}:        true,
	{Group: "", Kind: "Node"}:             true,
	{Group: "", Kind: "PersistentVolume"}: true,
	{Group: "", Kind: "ComponentStatus"}:  true,

	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:        true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: true,

	{Group: "storage.k8s.io", Kind: "StorageClass"}:          true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:             true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:      true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}: true,

	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:             true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:               true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                      true,

	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,

	{Group: "networking.k8s.io", Kind: "IngressClass"}: true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:    true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:  true,

	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}: true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:        true,

	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}: true,
	{Group: "internal.apiserver.k8s.io", Kind: "StorageVersion"}:                true,
	{Group: "storagemigration.k8s.io", Kind: "StorageVersionMigration"}:         true,

	{Group: "authentication.k8s.io", Kind: "TokenReview"}:            true,
	{Group: "authentication.k8s.io", Kind: "SelfSubjectReview"}:      true,
	{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}:     true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}: true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectRulesReview"}:  true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                  true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                true,
	{Group: "resource.k8s.io", Kind: "DeviceTaintRule"}:              true,
	{Group: "policy", Kind: "PodSecurityPolicy"}:                     true,
	{Group: "extensions", Kind: "PodSecurityPolicy"}:                 true,
}

// returnsDeleted are the built-in kinds whose kube-apiserver registry
// answers a delete with the deleted object (ReturnDeletedObject in
// k8s.io/kubernetes/pkg/registry); deletes of other kinds answer a
// Status. (DeviceTaintRule does so below v1 only; the fake answers a
// Status at every version.)
var returnsDeleted = map[schema.GroupKind]bool{
	{Group: "", Kind: "Namespace"}:             true,
	{Group: "", Kind: "PersistentVolume"}:      true,
	{Group: "", Kind: "PersistentVolumeClaim"}: true,
	{Group: "", Kind: "Pod"}:                   true,
	{Group: "", Kind: "PodTemplate"}:           true,
	{Group: "", Kind: "ResourceQuota"}:         true,
	{Group: "", Kind: "Service"}:               true,
	{Group: "", Kind: "ServiceAccount"}:        true,

	{Group: "storage.k8s.io", Kind: "CSIDriver"}:             true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:               true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:          true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:      true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}: true,

	{Group: "resource.k8s.io", Kind: "DeviceClass"}:               true,
	{Group: "resource.k8s.io", Kind: "ResourceClaim"}:             true,
	{Group: "resource.k8s.io", Kind: "ResourceClaimTemplate"}:     true,
	{Group: "resource.k8s.io", Kind: "ResourcePoolStatusRequest"}: true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:             true,
}

// resources is what the fake serves, derived once from the scheme.
type resources struct {
	byGVR  map[schema.GroupVersionResource]*resource
	byGVK  map[schema.GroupVersionKind]*resource
	mapper *meta.DefaultRESTMapper
	groups []group // discovery order: the core group first, then by name
}

// group is an API group and its versions, the preferred first.
type group struct {
	name     string
	versions []string
}

// newResources derives the served resources from the scheme: every kind
// whose Go type has ObjectMeta, except List and Options kinds, meta.k8s.io
// types and internal versions.
func newResources(s *runtime.Scheme, extraClusterScoped []schema.GroupVersionKind) *resources {
	extra := make(map[schema.GroupVersionKind]bool, len(extraClusterScoped))
	for _, gvk := range extraClusterScoped {
		extra[gvk] = true
	}
	known := s.AllKnownTypes()
	gvks := make([]schema.GroupVersionKind, 0, len(known))
	for gvk := range known {
		gvks = append(gvks, gvk)
	}
	// Deterministic: should two kinds guess the same resource name, the
	// first in this order wins.
	slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int {
		return strings.Compare(a.String(), b.String())
	})
	rs := &resources{
		byGVR: map[schema.GroupVersionResource]*resource{},
		byGVK: map[schema.GroupVersionKind]*resource{},
	}
	versions := map[string][]string{}
	for _, gvk := range gvks {
		t := known[gvk]
		if !servable(gvk, t) {
			continue
		}
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		if _, taken := rs.byGVR[plural]; taken {
			continue
		}
		status, hasStatus := t.FieldByName("Status")
		r := &resource{
			gvk:        gvk,
			gvr:        plural,
			singular:   singular.Resource,
			goType:     t,
			namespaced: !clusterScoped[gvk.GroupKind()] && !extra[gvk],
			hasStatus:  hasStatus && len(status.Index) == 1,
			builtin:    strings.HasPrefix(t.PkgPath(), "k8s.io/"),
			protobuf:   inKubeScheme(gvk, t),
		}
		r.returnsDeleted = r.protobuf && returnsDeleted[gvk.GroupKind()]
		rs.byGVR[plural] = r
		rs.byGVK[gvk] = r
		if !slices.Contains(versions[gvk.Group], gvk.Version) {
			versions[gvk.Group] = append(versions[gvk.Group], gvk.Version)
		}
	}
	for name, vs := range versions {
		slices.SortFunc(vs, func(a, b string) int { return -version.CompareKubeAwareVersionStrings(a, b) })
		rs.groups = append(rs.groups, group{name: name, versions: vs})
	}
	slices.SortFunc(rs.groups, func(a, b group) int { return strings.Compare(a.name, b.name) })

	var gvs []schema.GroupVersion
	for _, g := range rs.groups {
		for _, v := range g.versions {
			gvs = append(gvs, schema.GroupVersion{Group: g.name, Version: v})
		}
	}
	rs.mapper = meta.NewDefaultRESTMapper(gvs)
	for _, gvk := range gvks {
		if r := rs.byGVK[gvk]; r != nil {
			scope := meta.RESTScopeNamespace
			if !r.namespaced {
				scope = meta.RESTScopeRoot
			}
			rs.mapper.AddSpecific(gvk, r.gvr, r.gvr.GroupVersion().WithResource(r.singular), scope)
		}
	}
	return rs
}

// servable reports whether the kind is an API object kube-apiserver would
// serve as a resource.
func servable(gvk schema.GroupVersionKind, t reflect.Type) bool {
	if gvk.Version == runtime.APIVersionInternal || t.Kind() != reflect.Struct ||
		strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") ||
		strings.HasPrefix(t.PkgPath(), "k8s.io/apimachinery/") {
		return false
	}
	_, isObject := reflect.New(t).Interface().(runtime.Object)
	_, hasMeta := reflect.New(t).Interface().(metav1.Object)
	return isObject && hasMeta
}

// inKubeScheme reports whether client-go's scheme has the kind with the
// Go type t: a built-in type, with a protobuf encoding.
func inKubeScheme(gvk schema.GroupVersionKind, t reflect.Type) bool {
	obj, err := kubescheme.Scheme.New(gvk)
	return err == nil && reflect.TypeOf(obj) == reflect.PointerTo(t)
}

// forObject returns the resource serving obj's Go type, preferring the
// version in obj's TypeMeta when the type is registered more than once.
// Unstructured objects have no resource.
func (rs *resources) forObject(s *runtime.Scheme, obj runtime.Object) (*resource, bool) {
	if _, ok := obj.(runtime.Unstructured); ok {
		return nil, false
	}
	gvks, _, err := s.ObjectKinds(obj)
	if err != nil {
		return nil, false
	}
	if r, ok := rs.byGVK[obj.GetObjectKind().GroupVersionKind()]; ok && slices.Contains(gvks, r.gvk) {
		return r, true
	}
	for _, gvk := range gvks {
		if r, ok := rs.byGVK[gvk]; ok {
			return r, true
		}
	}
	return nil, false
}
