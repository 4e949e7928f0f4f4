package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
	"k8s.io/client-go/tools/cache"
)

// fullLease is a member Lease as kube-apiserver sends it: with what
// slimLease drops (uid, creation time, labels, annotations,
// managedFields) around what it keeps.
func fullLease(name, rv, holder string, renew time.Time) *coordinationv1.Lease {
	d, transitions := int32(4), int32(2)
	strategy := coordinationv1.OldestEmulationVersion
	acquire, renewed := metav1.NewMicroTime(renew.Add(-time.Minute)), metav1.NewMicroTime(renew)
	now := metav1.NewTime(renew.Truncate(time.Second))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv, UID: "uid-" + "name",
			CreationTimestamp: now, Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "ctrlkit", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "coordination.k8s.io/v1", Time: &now, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:holderIdentity":{},"f:renewTime":{}}}`)}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, AcquireTime: &acquire,
			RenewTime: &renewed, LeaseTransitions: &transitions, Strategy: &strategy},
	}
}

// watchFrame is one event of a protobuf watch stream, as kube-apiserver
// writes it: a length, then a WatchEvent whose object is in the protobuf
// serializer's envelope.
func watchFrame(t testing.TB, typ watch.EventType, obj runtime.Object) []byte {
	t.Helper()
	var object bytes.Buffer
	if err := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme).Encode(obj, &object); err != nil {
		t.Fatal(err)
	}
	ev, err := (&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: object.Bytes()}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(ev))), ev...)
}

// withKind sets obj's TypeMeta, which the protobuf encoder needs.
func withKind[T runtime.Object](obj T, kind string) T {
	gvk := coordinationv1.SchemeGroupVersion.WithKind(kind)
	if kind == "Status" {
		gvk = metav1.SchemeGroupVersion.WithKind(kind)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}

// TestLeaseEventsDecode checks that a watch stream decodes by hand into
// exactly what client-go's decoder and slimLease make of it, for every
// event type, an ERROR's Status included, and ends with the stream.
func TestLeaseEventsDecode(t *testing.T) {
	at := time.Unix(1700000000, 123456000)
	leases := []*coordinationv1.Lease{
		fullLease("ring-member-a", "10", "a", at),
		fullLease("ring-member-b", "11", "", at.Add(time.Second)),
		{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ns", ResourceVersion: "12"}},
	}
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}
	events := []struct {
		typ watch.EventType
		obj runtime.Object
	}{
		{watch.Added, leases[0]}, {watch.Modified, leases[1]}, {watch.Deleted, leases[2]},
		{watch.Bookmark, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "13"}}},
		{watch.Modified, leases[0]}, {watch.Error, status},
	}
	var stream []byte
	for _, e := range events {
		kind := "Lease"
		if e.typ == watch.Error {
			kind = "Status"
		}
		stream = append(stream, watchFrame(t, e.typ, withKind(e.obj.DeepCopyObject(), kind))...)
	}
	// What client-go makes of the same stream, slimmed as the sharder's
	// informer slims it.
	want := restwatch.NewDecoder(streamDecoder(stream), kubescheme.Codecs.UniversalDeserializer())
	got := newLeaseEvents(io.NopCloser(bytes.NewReader(stream)))
	for i := range events {
		wt, wo, err := want.Decode()
		if err != nil {
			t.Fatalf("event %d: client-go: %v", i, err)
		}
		slimmed, err := slimLease(wo)
		if err != nil {
			t.Fatal(err)
		}
		wo = slimmed.(runtime.Object)
		gt, gobj, err := got.Decode()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if gt != wt || !reflect.DeepEqual(gobj, wo) {
			t.Errorf("event %d: decoded %s %#v, want %s %#v", i, gt, gobj, wt, wo)
		}
	}
	if _, _, err := got.Decode(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}
}

// streamDecoder is client-go's decoder of the WatchEvents of a protobuf
// watch stream, as its REST client builds it.
func streamDecoder(stream []byte) streaming.Decoder {
	return streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))),
		protobuf.NewRawSerializer(kubescheme.Scheme, kubescheme.Scheme))
}

// TestLeaseListWatch checks the requests leaseListWatch sends, for a
// list and a watch of a namespace's Leases, and that a watch's events
// reach its channel decoded, and a failed request returns the API
// server's error.
func TestLeaseListWatch(t *testing.T) {
	lease := withKind(fullLease("ring-member-a", "10", "a", time.Unix(1700000000, 0)), "Lease")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/gone/leases" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"no"}`))
			return
		}
		if r.URL.Path != "/apis/coordination.k8s.io/v1/namespaces/ns/leases" {
			t.Errorf("request to %s", r.URL.Path)
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("watch") == "true" {
			if got := r.Header.Get("Accept"); got != "application/vnd.kubernetes.protobuf;stream=watch,application/json;stream=watch" {
				t.Errorf("watch: Accept %q", got)
			}
			if got := r.URL.Query().Get("resourceVersion"); got != "10" {
				t.Errorf("watch: resourceVersion %q, want 10", got)
			}
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
			_, _ = w.Write(watchFrame(t, watch.Modified, lease))
			return
		}
		list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: []coordinationv1.Lease{*lease}}
		list.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("LeaseList"))
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		if err := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme).Encode(list, w); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	rc := restFor(t, srv.URL)
	ctx := context.Background()
	lw := leaseListWatch(rc, "ns")
	obj, err := lw.(cache.ListerWithContext).ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := obj.(*coordinationv1.LeaseList); !ok || len(l.Items) != 1 || l.Items[0].Name != "ring-member-a" || l.ResourceVersion != "10" {
		t.Fatalf("list: %#v", obj)
	}
	w, err := lw.(interface {
		WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error)
	}).WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case e := <-w.ResultChan():
		l, ok := e.Object.(*coordinationv1.Lease)
		if e.Type != watch.Modified || !ok || l.Name != "ring-member-a" || *l.Spec.HolderIdentity != "a" || l.ResourceVersion != "10" {
			t.Errorf("watch event %s %#v", e.Type, e.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	if _, err := leaseListWatch(rc, "gone").(cache.ListerWithContext).ListWithContext(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list answered 403: error %v, want Forbidden", err)
	}
}

// loop reads frame again and again.
type loop struct {
	frame []byte
	off   int
}

func (l *loop) Read(p []byte) (int, error) {
	n := copy(p, l.frame[l.off:])
	l.off = (l.off + n) % len(l.frame)
	return n, nil
}

// BenchmarkLeaseEvent decodes one member Lease's renewal from a watch
// stream: by leaseEvents, and by client-go's watch decoder followed by
// slimLease, as the sharder's informer did before. Its allocations are
// what each renewal of each member leaves on the sharder's replica
// (go test -run '^$' -bench LeaseEvent -benchmem ./pkg/shard).
func BenchmarkLeaseEvent(b *testing.B) {
	frame := watchFrame(b, watch.Modified, withKind(fullLease("ring-member-a", "10", "a", time.Unix(1700000000, 0)), "Lease"))
	b.Run("ctrlkit", func(b *testing.B) {
		d := newLeaseEvents(io.NopCloser(&loop{frame: frame}))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := d.Decode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client-go", func(b *testing.B) {
		d := restwatch.NewDecoder(streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(io.NopCloser(&loop{frame: frame})),
			protobuf.NewRawSerializer(kubescheme.Scheme, kubescheme.Scheme)), kubescheme.Codecs.UniversalDeserializer())
		b.ReportAllocs()
		for b.Loop() {
			_, obj, err := d.Decode()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := slimLease(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLeaseEventsJSON checks that a watch stream a server sent in JSON
// is read too, by client-go's decoder.
func TestLeaseEventsJSON(t *testing.T) {
	lease := withKind(fullLease("ring-member-a", "10", "a", time.Unix(1700000000, 0)), "Lease")
	raw, err := json.Marshal(lease)
	if err != nil {
		t.Fatal(err)
	}
	var stream []byte
	for _, typ := range []watch.EventType{watch.Added, watch.Modified} {
		ev, err := json.Marshal(metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw}})
		if err != nil {
			t.Fatal(err)
		}
		stream = append(append(stream, ev...), '\n')
	}
	d := newLeaseEvents(io.NopCloser(bytes.NewReader(stream)))
	for _, want := range []watch.EventType{watch.Added, watch.Modified} {
		typ, obj, err := d.Decode()
		if err != nil {
			t.Fatal(err)
		}
		l, ok := obj.(*coordinationv1.Lease)
		if typ != want || !ok || l.Name != "ring-member-a" || l.ResourceVersion != "10" || *l.Spec.HolderIdentity != "a" ||
			!l.Spec.RenewTime.Equal(lease.Spec.RenewTime) {
			t.Errorf("decoded %s %#v, want %s of %#v", typ, obj, want, lease)
		}
	}
	if _, _, err := d.Decode(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}
}
