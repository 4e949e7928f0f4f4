package fake_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// metadataAccept is the Accept header of client-go's metadata client for
// one object (as=PartialObjectMetadata) or a list (...List).
func metadataAccept(as string) string {
	return "application/vnd.kubernetes.protobuf;as=" + as + ";g=meta.k8s.io;v=v1,application/json;as=" + as + ";g=meta.k8s.io;v=v1,application/json"
}

// TestMetadataInformer checks that an informer of client-go's metadata
// client (PartialObjectMetadata objects, lists and watch events, which
// kube-apiserver sends for Accept: ...;as=PartialObjectMetadata) syncs
// from the fake and sees adds, updates and deletes with no error on its
// lists and watches, for a built-in kind and a custom one.
func TestMetadataInformer(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed runtime.Object
		gvr  schema.GroupVersionResource
		obj  *unstructured.Unstructured // created through the dynamic client
	}{
		{"builtin", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "seed"}, Data: map[string][]byte{"k": []byte("v")}},
			corev1.SchemeGroupVersion.WithResource("secrets"),
			&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "a"}}}},
		{"custom", &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "seed"}}, widgetGVR, widget("ns", "a", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.seed)
			cfg := c.Config()
			hc, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			mc, err := metadata.NewForConfigAndClient(cfg, hc)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			factory := metadatainformer.NewSharedInformerFactory(mc, 0)
			defer factory.Shutdown()
			defer cancel()
			inf := factory.ForResource(tc.gvr).Informer()
			var mu sync.Mutex
			var errs []error
			if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
			}); err != nil {
				t.Fatal(err)
			}
			events := make(chan string, 10)
			if _, err := inf.AddEventHandler(recorder(events)); err != nil {
				t.Fatal(err)
			}
			factory.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("informer did not sync")
			}
			expect(t, events, "add ns/seed")

			if _, err := dynamicClient(t, c).Resource(tc.gvr).Namespace("ns").Create(ctx, tc.obj, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			expect(t, events, "add ns/a")
			res := mc.Resource(tc.gvr).Namespace("ns")
			patched, err := res.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"web"}}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if patched.Labels["app"] != "web" || patched.UID == "" {
				t.Errorf("metadata patch answered %+v, want the object's metadata with the label", patched)
			}
			expect(t, events, "update ns/a")
			for _, o := range inf.GetStore().List() {
				if _, ok := o.(*metav1.PartialObjectMetadata); !ok {
					t.Errorf("the informer holds a %T, want *metav1.PartialObjectMetadata", o)
				}
			}
			if err := res.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			expect(t, events, "delete ns/a")
			mu.Lock()
			defer mu.Unlock()
			if len(errs) > 0 {
				t.Errorf("the metadata informer's lists and watches failed: %v", errs)
			}
		})
	}
}

// TestMetadataRequests checks kube-apiserver's answers to requests for
// metadata only, in JSON and protobuf: a PartialObjectMetadata for an
// object, a PartialObjectMetadataList for a list, 406 for a list asked
// for as one object, and the full object when no clause asks for
// metadata.
func TestMetadataRequests(t *testing.T) {
	seed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Labels: map[string]string{"app": "web"}}, Data: map[string][]byte{"k": []byte("hunter2")}}
	c := newCluster(t, seed, &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}})
	decoder := metainternalversionscheme.Codecs.UniversalDeserializer()
	for _, tc := range []struct {
		path, accept string
		wantType     string // Content-Type
		wantKind     string
	}{
		{"/api/v1/namespaces/ns/secrets/a", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", "application/json", "PartialObjectMetadata"},
		{"/api/v1/namespaces/ns/secrets/a", metadataAccept("PartialObjectMetadata"), "application/vnd.kubernetes.protobuf", "PartialObjectMetadata"},
		{"/api/v1/namespaces/ns/secrets", metadataAccept("PartialObjectMetadataList"), "application/vnd.kubernetes.protobuf", "PartialObjectMetadataList"},
		{"/api/v1/secrets", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "application/json", "PartialObjectMetadataList"},
		// As kube-apiserver serves them, custom resources have metadata in protobuf too.
		{"/apis/test.ctrlkit.io/v1/namespaces/ns/widgets/w", metadataAccept("PartialObjectMetadata"), "application/vnd.kubernetes.protobuf", "PartialObjectMetadata"},
		{"/apis/test.ctrlkit.io/v1/widgets", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "application/json", "PartialObjectMetadataList"},
		// Not a version kube-apiserver has: the clause is skipped.
		{"/api/v1/namespaces/ns/secrets/a", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v9,application/json", "application/json", "Secret"},
	} {
		code, ct, body := send(t, c, "GET", tc.path, tc.accept, "", nil)
		if code != http.StatusOK || ct != tc.wantType {
			t.Errorf("GET %s, Accept %s: %d %s, want 200 %s", tc.path, tc.accept, code, ct, tc.wantType)
			continue
		}
		if tc.wantKind == "Secret" {
			var s corev1.Secret
			if err := json.Unmarshal(body, &s); err != nil || s.Kind != "Secret" || len(s.Data) == 0 {
				t.Errorf("GET %s, Accept %s = %s (%v), want the full Secret", tc.path, tc.accept, body, err)
			}
			continue
		}
		obj, gvk, err := decoder.Decode(body, nil, nil)
		if err != nil {
			t.Errorf("GET %s, Accept %s: decoding %q: %v", tc.path, tc.accept, body, err)
			continue
		}
		if want := metav1.SchemeGroupVersion.WithKind(tc.wantKind); *gvk != want {
			t.Errorf("GET %s, Accept %s: a %v, want %v", tc.path, tc.accept, gvk, want)
		}
		var items []metav1.PartialObjectMetadata
		switch obj := obj.(type) {
		case *metav1.PartialObjectMetadata:
			items = []metav1.PartialObjectMetadata{*obj}
		case *metav1.PartialObjectMetadataList:
			if obj.ResourceVersion == "" {
				t.Errorf("GET %s, Accept %s: the list has no resourceVersion", tc.path, tc.accept)
			}
			items = obj.Items
		}
		if len(items) != 1 || items[0].UID == "" || items[0].ResourceVersion == "" {
			t.Errorf("GET %s, Accept %s = %+v, want one object with its uid and resourceVersion", tc.path, tc.accept, obj)
		}
		if strings.Contains(string(body), "hunter2") || strings.Contains(string(body), `"data"`) {
			t.Errorf("GET %s, Accept %s: the answer holds more than metadata: %q", tc.path, tc.accept, body)
		}
	}

	for path, as := range map[string]string{"/api/v1/namespaces/ns/secrets": "PartialObjectMetadata", "/api/v1/namespaces/ns/secrets/a": "PartialObjectMetadataList"} {
		code, ct, body := send(t, c, "GET", path, "application/json;as="+as+";g=meta.k8s.io;v=v1", "", nil)
		if s := decodeStatus(t, ct, body); code != http.StatusNotAcceptable || s.Reason != metav1.StatusReasonNotAcceptable {
			t.Errorf("GET %s as %s: %d %+v, want 406 NotAcceptable", path, as, code, s)
		}
	}
}

// TestMetadataWatch checks a watch for metadata only: every event's
// object is a PartialObjectMetadata, in JSON and protobuf.
func TestMetadataWatch(t *testing.T) {
	for _, accept := range []string{metadataAccept("PartialObjectMetadata"), "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"} {
		c := newCluster(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string][]byte{"k": []byte("hunter2")}})
		events := watchRaw(t, c, "/api/v1/namespaces/ns/secrets?watch=true", accept, 1)
		for _, e := range events {
			p, ok := e.Object.(*metav1.PartialObjectMetadata)
			if !ok || e.Type != "ADDED" || p.Name != "a" || p.Kind != "PartialObjectMetadata" {
				t.Errorf("Accept %s: event %s %#v, want ADDED PartialObjectMetadata a", accept, e.Type, e.Object)
			}
		}
	}
}
