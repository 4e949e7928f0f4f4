package shard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// restFor is a REST client of the kind a manager gives a Sharder
// (SharderOptions.REST), for the server at url.
func restFor(t *testing.T, url string) rest.Interface {
	t.Helper()
	cfg := metadata.ConfigFor(&rest.Config{Host: url})
	cfg.GroupVersion, cfg.APIPath = &schema.GroupVersion{}, "/"
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// protoAnswer is obj as kube-apiserver answers in protobuf.
func protoAnswer(t *testing.T, kind string, obj interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: kind}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("k8s\x00"), b...)
}

// scannedObjects are ConfigMaps, as metadata, with what a scan reads
// (the ring's labels, a deletion timestamp, a controlling owner of a
// primary kind or of another) among what it does not (other labels,
// annotations, managedFields, an owner that is not the controller).
func scannedObjects() []metav1.PartialObjectMetadata {
	now := metav1.NewTime(time.Unix(1000, 0))
	widget := func(name string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "test.ctrlkit.io/v1", Kind: "Widget", Name: name, UID: types.UID("uid-" + name), Controller: &controller}
	}
	return []metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a", ResourceVersion: "11",
			Labels: map[string]string{ShardLabel("web"): "m1", "app": "x"}, Annotations: map[string]string{"big": "value"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &now,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{}}`)}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", ResourceVersion: "12", DeletionTimestamp: &now,
			Labels: map[string]string{ShardLabel("web"): "m2", DrainLabel("web"): "true"}, Finalizers: []string{"f"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "13", Labels: map[string]string{ShardLabel("web"): "m1"},
			OwnerReferences: []metav1.OwnerReference{widget("w0", false), widget("w1", true)}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "d", ResourceVersion: "14", Labels: map[string]string{ShardLabel("web"): "m3"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: new(true)}}}},
	}
}

type scannedPair struct {
	it item
	sn snap
}

// TestListThroughREST: through SharderOptions.REST, a scan reads the
// ring's labelled objects page by page, whether the server answers in
// protobuf (decoded as it arrives, only what a snap holds) or in JSON,
// and reads of each exactly what the metadata client's path reads.
func TestListThroughREST(t *testing.T) {
	objs := scannedObjects()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	page1 := protoAnswer(t, "PartialObjectMetadataList", &metav1.PartialObjectMetadataList{
		ListMeta: metav1.ListMeta{ResourceVersion: "20", Continue: "page-2"}, Items: objs[:3]})
	page2, err := json.Marshal(map[string]any{"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
		"metadata": map[string]any{"resourceVersion": "20"}, "items": objs[3:]})
	if err != nil {
		t.Fatal(err)
	}
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		requests = append(requests, r.URL.Path+" continue="+q.Get("continue"))
		if q.Get("labelSelector") != ShardLabel("web") || q.Get("limit") != fmt.Sprint(scanPage) {
			http.Error(w, "unexpected query "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		switch q.Get("continue") {
		case "":
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
			_, _ = w.Write(page1)
		case "page-2":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(page2)
		default:
			http.Error(w, "unexpected continue", http.StatusBadRequest)
		}
	}))
	defer srv.Close()

	s := &Sharder{opts: SharderOptions{Ring: "web", REST: restFor(t, srv.URL)}, shardLabel: ShardLabel("web"), drainLabel: DrainLabel("web"),
		slots: []slot{{res: Resource{Resource: gvr, Kind: schema.GroupKind{Kind: "ConfigMap"}}},
			{res: Resource{Resource: schema.GroupVersionResource{Group: "test.ctrlkit.io", Version: "v1", Resource: "widgets"},
				Kind: schema.GroupKind{Group: "test.ctrlkit.io", Kind: "Widget"}, Primary: true}}}}
	var got []scannedPair
	if err := s.list(t.Context(), 0, func(it item, sn snap) { got = append(got, scannedPair{it, sn}) }); err != nil {
		t.Fatal(err)
	}
	var want []scannedPair
	s.each(0, &metav1.PartialObjectMetadataList{Items: objs}, func(it item, sn snap) { want = append(want, scannedPair{it, sn}) })
	if !slices.Equal(got, want) {
		t.Errorf("scanned through REST:\n%+v\nthrough the metadata client's path:\n%+v", got, want)
	}
	// What the metadata client's path reads, spelled out.
	spelled := []scannedPair{
		{item{0, "ns", "a"}, snap{rv: "11", shard: "m1"}},
		{item{0, "ns", "b"}, snap{rv: "12", shard: "m2", drain: "true", deleting: true}},
		{item{0, "ns", "c"}, snap{rv: "13", shard: "m1", owner: item{1, "ns", "w1"}, hasOwner: true}},
		{item{0, "other", "d"}, snap{rv: "14", shard: "m3"}},
	}
	if !slices.Equal(want, spelled) {
		t.Errorf("the metadata client's path read\n%+v\nwant\n%+v", want, spelled)
	}
	if !slices.Equal(requests, []string{"/api/v1/configmaps continue=", "/api/v1/configmaps continue=page-2"}) {
		t.Errorf("requests %q", requests)
	}
}

// TestMetaItemRejectsMalformed: a protobuf item cut short, or of a wire
// type the format does not have, is an error, not a partial object.
func TestMetaItemRejectsMalformed(t *testing.T) {
	whole, err := (&scannedObjects()[0]).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	m := &metaItem{shardLabel: ShardLabel("web"), drainLabel: DrainLabel("web")}
	if err := m.Unmarshal(whole); err != nil || string(m.name) != "a" || string(m.shard) != "m1" {
		t.Fatalf("whole item: %v, name %q, shard %q", err, m.name, m.shard)
	}
	for n := 1; n < len(whole); n++ {
		if err := m.Unmarshal(whole[:n]); err == nil {
			t.Errorf("the first %d of %d bytes decoded without an error", n, len(whole))
		}
	}
	if err := m.Unmarshal([]byte{0x0b}); err == nil { // field 1, wire type 3 (a group)
		t.Error("wire type 3 decoded without an error")
	}
}

// TestPatchUndecoded: a label patch through REST sends the merge patch
// with the sharder's field manager, and gives the API server's errors as
// apierrors (a conflict is a conflict; the sharder takes a vanished
// object for done).
func TestPatchUndecoded(t *testing.T) {
	status := http.StatusOK
	var body, contentType, manager string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body, contentType, manager = string(b), r.Header.Get("Content-Type"), r.URL.Query().Get("fieldManager")
		if r.Method != http.MethodPatch || r.URL.Path != "/apis/test.ctrlkit.io/v1/namespaces/ns/widgets/w" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status == http.StatusOK {
			_, _ = io.WriteString(w, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"w"}}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`,
			map[int]metav1.StatusReason{http.StatusConflict: metav1.StatusReasonConflict, http.StatusNotFound: metav1.StatusReasonNotFound}[status], status)
	}))
	defer srv.Close()
	s := &Sharder{opts: SharderOptions{Ring: "web", REST: restFor(t, srv.URL)},
		slots: []slot{{res: Resource{Resource: schema.GroupVersionResource{Group: "test.ctrlkit.io", Version: "v1", Resource: "widgets"}}}}}
	it := item{0, "ns", "w"}
	patch := labelPatch("7", ShardLabel("web"), "m1", DrainLabel("web"))
	if err := s.patch(t.Context(), it, patch); err != nil {
		t.Fatal(err)
	}
	if body != string(patch) || contentType != "application/merge-patch+json" || manager != sharderFieldManager {
		t.Errorf("sent %s as %q by %q; want %s as a merge patch by %q", body, contentType, manager, patch, sharderFieldManager)
	}
	status = http.StatusConflict
	if err := s.patch(t.Context(), it, patch); !apierrors.IsConflict(err) {
		t.Errorf("a conflict came back as %v", err)
	}
	status = http.StatusNotFound
	if err := s.patch(t.Context(), it, patch); err != nil {
		t.Errorf("an object gone came back as %v, want nil", err)
	}
}
