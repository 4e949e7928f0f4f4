package bench

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
)

// The decode benchmarks measure what an informer pays per object it lists
// or watches, before the object enters the cache:
//
//   - Website/unstructured: a custom object through the dynamic client, as
//     ctrlkit's informers did: JSON decoded into an Unstructured (the
//     dynamic client's serializer), then runtime.DefaultUnstructuredConverter
//     .FromUnstructured into the Go type (the informer's transform).
//   - Website/typed: the same JSON decoded straight into the Go type by the
//     decoder a REST client with serializer.WithoutConversionCodecFactory
//     uses, as ctrlkit's informers do when informer.Clients.Config is set.
//   - Deployment/json and Deployment/protobuf: a built-in object in the two
//     encodings the clientset can ask for, through the decoder its REST
//     clients use.
//
// BenchmarkDecode decodes one object per op (a watch event's object);
// BenchmarkDecodeList a list of listSize objects per op (an initial list),
// items of the unstructured path each converted as the transform does.

const listSize = 100

var websiteGV = schema.GroupVersion{Group: "bench.ctrlkit.io", Version: "v1alpha1"}

// Website has the shape of examples/website's v1alpha1.Website.
type Website struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WebsiteSpec   `json:"spec"`
	Status            WebsiteStatus `json:"status,omitempty"`
}

// WebsiteSpec is the desired state of a Website.
type WebsiteSpec struct {
	Image    string `json:"image"`
	Replicas *int32 `json:"replicas,omitempty"`
	Port     int32  `json:"port,omitempty"`
}

// WebsiteStatus is the observed state of a Website.
type WebsiteStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	URL                string             `json:"url,omitempty"`
	AvailableReplicas  int32              `json:"availableReplicas,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (w *Website) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if w.Spec.Replicas != nil {
		r := *w.Spec.Replicas
		out.Spec.Replicas = &r
	}
	out.Status.Conditions = make([]metav1.Condition, len(w.Status.Conditions))
	for i := range w.Status.Conditions {
		w.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
	}
	return &out
}

// WebsiteList is a list of Websites.
type WebsiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Website `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *WebsiteList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Website, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Website)
	}
	return &out
}

// objectMeta is the metadata of an object as the API server returns it:
// labels, an annotation, a finalizer, an owner and two managedFields
// entries (the applier's and the status writer's).
func objectMeta(i int, fields string) metav1.ObjectMeta {
	created := metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	return metav1.ObjectMeta{
		Name:              fmt.Sprintf("site-%d", i),
		Namespace:         fmt.Sprintf("team-%d", i%10),
		UID:               "4c1f8e2a-8b6e-4f39-9d0c-2b7d3c1e5a90",
		ResourceVersion:   fmt.Sprint(100000 + i),
		Generation:        3,
		CreationTimestamp: created,
		Labels:            map[string]string{"app.kubernetes.io/name": "website", "app.kubernetes.io/instance": fmt.Sprintf("site-%d", i), "team": fmt.Sprintf("team-%d", i%10)},
		Annotations:       map[string]string{"example.com/owner": "web-platform@example.com"},
		Finalizers:        []string{"bench.ctrlkit.io/cleanup"},
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: fmt.Sprintf("team-%d", i%10), UID: "9a0e2c4d-1b3f-4e5a-8c7d-6f5e4d3c2b1a"}},
		ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(fields)},
			{Manager: "website-operator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:availableReplicas":{},"f:conditions":{},"f:observedGeneration":{}}}`), Subresource: "status"},
		},
	}
}

func website(i int) *Website {
	replicas := int32(3)
	when := metav1.NewTime(time.Date(2026, 11, 2, 8, 30, 0, 0, time.UTC))
	return &Website{
		TypeMeta:   metav1.TypeMeta{APIVersion: websiteGV.String(), Kind: "Website"},
		ObjectMeta: objectMeta(i, `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/name":{},"f:team":{}}},"f:spec":{"f:image":{},"f:port":{},"f:replicas":{}}}`),
		Spec:       WebsiteSpec{Image: "registry.example.com/web/nginx:1.27.3", Replicas: &replicas, Port: 8080},
		Status: WebsiteStatus{ObservedGeneration: 3, URL: fmt.Sprintf("http://site-%d.team-%d.svc:8080", i, i%10), AvailableReplicas: 3,
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: when, Reason: "Available", Message: "3 of 3 replicas available"},
				{Type: "Progressing", Status: metav1.ConditionFalse, ObservedGeneration: 3, LastTransitionTime: when, Reason: "Complete", Message: "the rollout is complete"},
			}},
	}
}

func deployment(i int) *appsv1.Deployment {
	replicas := int32(3)
	labels := map[string]string{"app.kubernetes.io/name": "website", "app.kubernetes.io/instance": fmt.Sprintf("site-%d", i)}
	when := metav1.NewTime(time.Date(2026, 11, 2, 8, 30, 0, 0, time.UTC))
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: objectMeta(i, `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/name":{}}},"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{"f:metadata":{"f:labels":{}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{}}}}}}}`),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "web",
					Image: "registry.example.com/web/nginx:1.27.3",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
					Env:   []corev1.EnvVar{{Name: "SITE", Value: fmt.Sprintf("site-%d", i)}, {Name: "LOG_LEVEL", Value: "info"}},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
					},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
						PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
					TerminationMessagePath:   "/dev/termination-log",
					TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy:          corev1.PullIfNotPresent,
				}}, RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler"},
			},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: when, LastTransitionTime: when, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: when, LastTransitionTime: when, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "web-5d4f8b7c9" has successfully progressed.`},
			}},
	}
}

// decoderFor is the decoder a REST client picks for a response: the one
// of its negotiated serializer for the media type.
func decoderFor(ns runtime.NegotiatedSerializer, gv schema.GroupVersion, mediaType string) runtime.Decoder {
	d, err := runtime.NewClientNegotiator(ns, gv).Decoder(mediaType, nil)
	if err != nil {
		panic(err)
	}
	return d
}

func encode(ns runtime.NegotiatedSerializer, mediaType string, obj runtime.Object) []byte {
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), mediaType)
	if !ok {
		panic("no serializer for " + mediaType)
	}
	data, err := runtime.Encode(info.Serializer, obj)
	if err != nil {
		panic(err)
	}
	return data
}

// paths are the four ways an object can reach an informer's cache.
type path struct {
	name   string
	single []byte                               // one object
	list   []byte                               // a list of listSize objects
	decode func([]byte) (runtime.Object, error) // one object
	items  func([]byte) int                     // a list; returns the number of objects
}

// websitePaths are the Website/unstructured and Website/typed paths (their
// names followed by suffix) over one encoding: dynamic decodes it into
// Unstructured, typedDecoder straight into the Go type.
func websitePaths(suffix string, dynamic, typedDecoder runtime.Decoder, single, list []byte) []path {
	return []path{
		{
			name: "Website/unstructured" + suffix, single: single, list: list,
			decode: func(data []byte) (runtime.Object, error) {
				u := &unstructured.Unstructured{}
				if _, _, err := dynamic.Decode(data, nil, u); err != nil {
					return nil, err
				}
				w := &Website{}
				return w, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, w)
			},
			items: func(data []byte) int {
				ul := &unstructured.UnstructuredList{}
				if _, _, err := dynamic.Decode(data, nil, ul); err != nil {
					panic(err)
				}
				for i := range ul.Items {
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ul.Items[i].Object, &Website{}); err != nil {
						panic(err)
					}
				}
				return len(ul.Items)
			},
		},
		{
			name: "Website/typed" + suffix, single: single, list: list,
			decode: func(data []byte) (runtime.Object, error) {
				obj, _, err := typedDecoder.Decode(data, nil, &Website{})
				return obj, err
			},
			items: func(data []byte) int {
				l := &WebsiteList{}
				if _, _, err := typedDecoder.Decode(data, nil, l); err != nil {
					panic(err)
				}
				return len(l.Items)
			},
		},
	}
}

func paths() []path {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypes(websiteGV, &Website{}, &WebsiteList{})
	metav1.AddToGroupVersion(scheme, websiteGV)
	typed := serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}

	// The dynamic client's serializer: JSON into Unstructured.
	dynScheme := runtime.NewScheme()
	metav1.AddToGroupVersion(dynScheme, schema.GroupVersion{Version: "v1"})
	dynamic := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, dynScheme, dynScheme, kjson.SerializerOptions{})

	websites := &WebsiteList{TypeMeta: metav1.TypeMeta{APIVersion: websiteGV.String(), Kind: "WebsiteList"}, ListMeta: metav1.ListMeta{ResourceVersion: "200000"}}
	deployments := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeploymentList"}, ListMeta: metav1.ListMeta{ResourceVersion: "200000"}}
	for i := range listSize {
		websites.Items = append(websites.Items, *website(i))
		deployments.Items = append(deployments.Items, *deployment(i))
	}
	websiteJSON, websiteListJSON := encode(typed, runtime.ContentTypeJSON, website(1)), encode(typed, runtime.ContentTypeJSON, websites)

	kube := kubescheme.Codecs.WithoutConversion()
	typedDecoder := decoderFor(typed, websiteGV, runtime.ContentTypeJSON)
	out := websitePaths("", dynamic, typedDecoder, websiteJSON, websiteListJSON)
	for _, mt := range []struct{ name, mediaType string }{{"json", runtime.ContentTypeJSON}, {"protobuf", runtime.ContentTypeProtobuf}} {
		d := decoderFor(kube, appsv1.SchemeGroupVersion, mt.mediaType)
		out = append(out, path{
			name: "Deployment/" + mt.name, single: encode(kube, mt.mediaType, deployment(1)), list: encode(kube, mt.mediaType, deployments),
			decode: func(data []byte) (runtime.Object, error) {
				obj, _, err := d.Decode(data, nil, &appsv1.Deployment{})
				return obj, err
			},
			items: func(data []byte) int {
				l := &appsv1.DeploymentList{}
				if _, _, err := d.Decode(data, nil, l); err != nil {
					panic(err)
				}
				return len(l.Items)
			},
		})
	}
	return out
}

// BenchmarkDecode decodes one object per op: BenchmarkDecode/<kind>/<path>.
func BenchmarkDecode(b *testing.B) { benchDecode(b, paths()) }

// BenchmarkDecodeList decodes a list of listSize objects per op:
// BenchmarkDecodeList/<kind>/<path>. Divide by listSize for one object.
func BenchmarkDecodeList(b *testing.B) { benchDecodeList(b, paths()) }

// benchDecode runs one sub-benchmark per path, decoding one object per op,
// and reports the bytes on the wire per object.
func benchDecode(b *testing.B, ps []path) {
	for _, p := range ps {
		b.Run(p.name, func(b *testing.B) {
			if _, err := p.decode(p.single); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(p.single)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.decode(p.single); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(p.single)), "wire-B/obj")
		})
	}
}

// benchDecodeList runs one sub-benchmark per path, decoding a list of
// listSize objects per op, and reports the bytes on the wire per object.
func benchDecodeList(b *testing.B, ps []path) {
	for _, p := range ps {
		b.Run(p.name, func(b *testing.B) {
			if n := p.items(p.list); n != listSize {
				b.Fatalf("decoded %d items, want %d", n, listSize)
			}
			b.SetBytes(int64(len(p.list)))
			b.ReportAllocs()
			for b.Loop() {
				p.items(p.list)
			}
			b.ReportMetric(float64(len(p.list))/listSize, "wire-B/obj")
		})
	}
}

// TestDecodePathsAgree: the paths the benchmarks compare decode the same
// object (apart from apiVersion and kind, which only some keep).
func TestDecodePathsAgree(t *testing.T) {
	decoded := make(map[string]runtime.Object)
	for _, p := range paths() {
		obj, err := p.decode(p.single)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		decoded[p.name] = obj
	}
	for _, pair := range [][2]string{{"Website/unstructured", "Website/typed"}, {"Deployment/json", "Deployment/protobuf"}} {
		if a, b := decoded[pair[0]], decoded[pair[1]]; !equality.Semantic.DeepEqual(a, b) {
			t.Errorf("%s and %s decode differently:\n%#v\n%#v", pair[0], pair[1], a, b)
		}
	}
	want := website(1)
	want.TypeMeta = metav1.TypeMeta{}
	if got := decoded["Website/typed"]; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("Website/typed decoded %#v, want %#v", got, want)
	}
}
