package bench

import (
	"bytes"
	"compress/gzip"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
)

// The CBOR benchmarks (issue 14) put application/cbor beside the paths of
// decode_bench_test.go, on the same objects, each through the decoder a
// client with client-go's ClientsAllowCBOR gate on would use:
//
//   - Website/unstructured-cbor: the dynamic client's CBOR serializer
//     (client-go dynamic/scheme.go: cbor.NewSerializer with the basic
//     scheme; decoding into an Unstructured uses neither creater nor typer),
//     then FromUnstructured into the Go type, as the informer's transform.
//   - Website/typed-cbor: a codec factory of the program's scheme with
//     serializer.WithSerializer(cbor.NewSerializerInfo), straight into the
//     Go type, as a REST client built like internal/kube.RESTClient would.
//   - Deployment/cbor: kubescheme's codec factory with CBOR added, what
//     rest.CodecFactoryForGeneratedClient returns with the gate on.
//
// The bytes are what cbor's serializer writes (deterministic encoding; the
// server uses the nondeterministic one, which orders map keys differently
// but is no longer). Each benchmark also reports wire-B/obj: the encoded
// size of one object, or of the list divided by listSize.

func cborPaths() []path {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypes(websiteGV, &Website{}, &WebsiteList{})
	metav1.AddToGroupVersion(scheme, websiteGV)
	typed := serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme, serializer.WithSerializer(cbor.NewSerializerInfo))}

	dynScheme := runtime.NewScheme()
	metav1.AddToGroupVersion(dynScheme, schema.GroupVersion{Version: "v1"})
	dynamic := cbor.NewSerializer(dynScheme, dynScheme)

	websites := &WebsiteList{TypeMeta: metav1.TypeMeta{APIVersion: websiteGV.String(), Kind: "WebsiteList"}, ListMeta: metav1.ListMeta{ResourceVersion: "200000"}}
	deployments := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeploymentList"}, ListMeta: metav1.ListMeta{ResourceVersion: "200000"}}
	for i := range listSize {
		websites.Items = append(websites.Items, *website(i))
		deployments.Items = append(deployments.Items, *deployment(i))
	}
	websiteCBOR, websiteListCBOR := encode(typed, runtime.ContentTypeCBOR, website(1)), encode(typed, runtime.ContentTypeCBOR, websites)

	typedDecoder := decoderFor(typed, websiteGV, runtime.ContentTypeCBOR)
	kube := serializer.NewCodecFactory(kubescheme.Scheme, serializer.WithSerializer(cbor.NewSerializerInfo)).WithoutConversion()
	kubeDecoder := decoderFor(kube, appsv1.SchemeGroupVersion, runtime.ContentTypeCBOR)
	return append(websitePaths("-cbor", dynamic, typedDecoder, websiteCBOR, websiteListCBOR), []path{
		{
			name: "Deployment/cbor", single: encode(kube, runtime.ContentTypeCBOR, deployment(1)), list: encode(kube, runtime.ContentTypeCBOR, deployments),
			decode: func(data []byte) (runtime.Object, error) {
				obj, _, err := kubeDecoder.Decode(data, nil, &appsv1.Deployment{})
				return obj, err
			},
			items: func(data []byte) int {
				l := &appsv1.DeploymentList{}
				if _, _, err := kubeDecoder.Decode(data, nil, l); err != nil {
					panic(err)
				}
				return len(l.Items)
			},
		},
	}...)
}

// BenchmarkDecodeCBOR decodes one CBOR object per op:
// BenchmarkDecodeCBOR/<kind>/<path>, to set beside BenchmarkDecode.
func BenchmarkDecodeCBOR(b *testing.B) { benchDecode(b, cborPaths()) }

// BenchmarkDecodeListCBOR decodes a CBOR list of listSize objects per op:
// BenchmarkDecodeListCBOR/<kind>/<path>, to set beside BenchmarkDecodeList.
func BenchmarkDecodeListCBOR(b *testing.B) { benchDecodeList(b, cborPaths()) }

// TestCBORPathsAgree: every CBOR path decodes the object its JSON path
// does, so the benchmarks compare the same work.
func TestCBORPathsAgree(t *testing.T) {
	decoded := make(map[string]runtime.Object)
	for _, p := range append(paths(), cborPaths()...) {
		obj, err := p.decode(p.single)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		decoded[p.name] = obj
		if n := p.items(p.list); n != listSize {
			t.Fatalf("%s: decoded %d items, want %d", p.name, n, listSize)
		}
	}
	for _, pair := range [][2]string{
		{"Website/typed", "Website/typed-cbor"},
		{"Website/typed", "Website/unstructured-cbor"},
		{"Deployment/json", "Deployment/cbor"},
	} {
		if a, b := decoded[pair[0]], decoded[pair[1]]; !equality.Semantic.DeepEqual(a, b) {
			t.Errorf("%s and %s decode differently:\n%#v\n%#v", pair[0], pair[1], a, b)
		}
	}
}

// TestWireSizes logs the bytes on the wire of every path, one object and
// per object of a list, and the list gzipped (the API server gzips a
// response of 128 KiB or more when the client accepts it, as client-go
// does unless DisableCompression): go test -run WireSizes -v.
func TestWireSizes(t *testing.T) {
	ps := append(paths(), cborPaths()...)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	for _, p := range ps {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		if _, err := w.Write(p.list); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%-26s one: %5d B  list of %d: %6d B (%d B/obj), gzipped %5d B (%d B/obj)",
			p.name, len(p.single), listSize, len(p.list), len(p.list)/listSize, z.Len(), z.Len()/listSize)
	}
}
