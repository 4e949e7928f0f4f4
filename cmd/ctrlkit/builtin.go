package main

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// builtinType is a kind the API server serves itself, which a generated
// project reconciles without a CRD: the Go package of its type, and the
// import name the templates give that package.
type builtinType struct {
	GVK     schema.GroupVersionKind
	Package string // k8s.io/api/apps/v1
	Alias   string // appsv1
}

// clusterScoped are the built-in kinds that have no namespace, which the
// templates do not scaffold (their reconcile requests, roles and tests are
// namespaced). client-go's scheme does not say which kinds these are.
var clusterScoped = map[schema.GroupKind]bool{
	{Group: "", Kind: "Namespace"}: true, {Group: "", Kind: "Node"}: true,
	{Group: "", Kind: "PersistentVolume"}: true, {Group: "", Kind: "ComponentStatus"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
	{Group: "resource.k8s.io", Kind: "DeviceTaintRule"}:                               true,
	{Group: "storagemigration.k8s.io", Kind: "StorageVersionMigration"}:               true,
	{Group: "internal.apiserver.k8s.io", Kind: "StorageVersion"}:                      true,
}

// builtinGroup reports whether client-go knows types of group: "" (the
// core group, which --group also takes as "core"), apps, batch,
// networking.k8s.io and the others kube-apiserver serves.
func builtinGroup(group string) bool {
	for gvk := range kubescheme.Scheme.AllKnownTypes() {
		if gvk.Group == group && gvk.Version != "__internal" {
			return true
		}
	}
	return false
}

// listable reports whether gvk names an object type the API server lists
// and watches (it has a List type), not an options or review type.
func listable(gvk schema.GroupVersionKind) bool {
	return kubescheme.Scheme.Recognizes(gvk) && kubescheme.Scheme.Recognizes(gvk.GroupVersion().WithKind(gvk.Kind+"List"))
}

// lookupBuiltin finds kind in the built-in group, in version, or when
// version is empty in the group's preferred version that has it. The error
// says what the group offers instead.
func lookupBuiltin(group, version, kind string) (builtinType, error) {
	versions := kubescheme.Scheme.PrioritizedVersionsForGroup(group)
	if version != "" {
		versions = []schema.GroupVersion{{Group: group, Version: version}}
	}
	for _, gv := range versions {
		gvk := gv.WithKind(kind)
		if !listable(gvk) {
			continue
		}
		if clusterScoped[gvk.GroupKind()] {
			return builtinType{}, fmt.Errorf("--kind %s is cluster-scoped: ctrlkit new scaffolds namespaced kinds only; write the controller by hand (pkg/informer, pkg/manager) or choose a namespaced kind", kind)
		}
		pkg := kubescheme.Scheme.AllKnownTypes()[gvk].PkgPath()
		return builtinType{GVK: gvk, Package: pkg, Alias: path.Base(path.Dir(pkg)) + path.Base(pkg)}, nil
	}
	var kinds []string
	for gvk := range kubescheme.Scheme.AllKnownTypes() {
		if gvk.Group == group && (version == "" || gvk.Version == version) && listable(gvk) && !clusterScoped[gvk.GroupKind()] {
			kinds = append(kinds, gvk.Kind)
		}
	}
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	where := "group " + groupName(group)
	if version != "" {
		where += " version " + version
	}
	if len(kinds) == 0 {
		return builtinType{}, fmt.Errorf("--kind %s: the built-in %s has no namespaced kind ctrlkit new can scaffold (check --version)", kind, where)
	}
	return builtinType{}, fmt.Errorf("--kind %s is not a namespaced kind of the built-in %s: use one of %s", kind, where, strings.Join(kinds, ", "))
}

// groupName is how messages and docs name a group: the core group as
// "core".
func groupName(group string) string {
	if group == "" {
		return `"" (core)`
	}
	return group
}

// builtinPlural is the resource name of a built-in kind, which the
// templates use in roles and documentation.
func builtinPlural(kind string) string {
	if kind == "Endpoints" {
		return "endpoints"
	}
	return pluralize(strings.ToLower(kind))
}

// podSpec is a pod spec the API server accepts, for the samples.
const podSpec = `{"containers":[{"name":"main","image":"registry.k8s.io/pause:3.10"}]}`

// samples are the fields besides metadata that the API server requires of
// a kind, for the generated e2e test's sample object. A kind not here gets
// a sample with metadata only, and ctrlkit new says to complete it.
var samples = map[schema.GroupKind]string{
	{Group: "", Kind: "ConfigMap"}:                            `"data":{"key":"value"}`,
	{Group: "", Kind: "Secret"}:                               `"stringData":{"key":"value"}`,
	{Group: "", Kind: "ServiceAccount"}:                       ``,
	{Group: "", Kind: "Pod"}:                                  `"spec":` + podSpec,
	{Group: "", Kind: "Service"}:                              `"spec":{"ports":[{"port":80}]}`,
	{Group: "", Kind: "PersistentVolumeClaim"}:                `"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}`,
	{Group: "apps", Kind: "Deployment"}:                       `"spec":{"selector":{"matchLabels":{"app":"sample"}},"template":{"metadata":{"labels":{"app":"sample"}},"spec":` + podSpec + `}}`,
	{Group: "apps", Kind: "StatefulSet"}:                      `"spec":{"selector":{"matchLabels":{"app":"sample"}},"template":{"metadata":{"labels":{"app":"sample"}},"spec":` + podSpec + `}}`,
	{Group: "apps", Kind: "DaemonSet"}:                        `"spec":{"selector":{"matchLabels":{"app":"sample"}},"template":{"metadata":{"labels":{"app":"sample"}},"spec":` + podSpec + `}}`,
	{Group: "apps", Kind: "ReplicaSet"}:                       `"spec":{"selector":{"matchLabels":{"app":"sample"}},"template":{"metadata":{"labels":{"app":"sample"}},"spec":` + podSpec + `}}`,
	{Group: "batch", Kind: "Job"}:                             `"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"main","image":"registry.k8s.io/pause:3.10"}]}}}`,
	{Group: "batch", Kind: "CronJob"}:                         `"spec":{"schedule":"0 0 * * *","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"main","image":"registry.k8s.io/pause:3.10"}]}}}}}`,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:       `"spec":{"podSelector":{}}`,
	{Group: "networking.k8s.io", Kind: "Ingress"}:             `"spec":{"defaultBackend":{"service":{"name":"sample","port":{"number":80}}}}`,
	{Group: "policy", Kind: "PodDisruptionBudget"}:            `"spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"sample"}}}`,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:        `"rules":[]`,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}: `"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"sample"}`,
	{Group: "coordination.k8s.io", Kind: "Lease"}:             ``,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:   `"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"sample"},"minReplicas":1,"maxReplicas":2}`,
}

// HasSample reports whether the e2e test's sample object is complete:
// whether ctrlkit new knows what the API server requires of the kind.
func (b builtinType) HasSample() bool {
	_, ok := samples[b.GVK.GroupKind()]
	return ok
}

// SampleJSON is a sample object of the kind, without name or namespace,
// as JSON.
func (b builtinType) SampleJSON() string {
	apiVersion := b.GVK.Version
	if b.GVK.Group != "" {
		apiVersion = b.GVK.Group + "/" + apiVersion
	}
	s := `{"apiVersion":"` + apiVersion + `","kind":"` + b.GVK.Kind + `"`
	if fields := samples[b.GVK.GroupKind()]; fields != "" {
		s += "," + fields
	}
	return s + "}"
}

// SampleYAML is SampleJSON named sample and labelled as the operator's
// (managedBy, key=value), as YAML for the README.
func (b builtinType) SampleYAML(managedBy string) (string, error) {
	key, value, _ := strings.Cut(managedBy, "=")
	u := map[string]any{}
	if err := json.Unmarshal([]byte(b.SampleJSON()), &u); err != nil {
		return "", err
	}
	u["metadata"] = map[string]any{"name": "sample", "labels": map[string]string{key: value}}
	data, err := json.Marshal(u)
	if err != nil {
		return "", err
	}
	y, err := yaml.JSONToYAML(data)
	return string(y), err
}
