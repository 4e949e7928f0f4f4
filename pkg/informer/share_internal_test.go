package informer

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/ctrlkit/ctrlkit/internal/protolist"
)

// protobufList encodes n ConfigMaps as kube-apiserver lists them in
// protobuf: every one labelled alike, the last labelsApart of them each
// with a label set of its own, and every tenth annotated.
func protobufList(t testing.TB, n, labelsApart int) []byte {
	t.Helper()
	l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}}
	for i := range n {
		labels := map[string]string{"app": "bench"}
		if i >= n-labelsApart {
			labels["own"] = fmt.Sprint(i)
		}
		var annotations map[string]string
		if i%10 == 0 {
			annotations = map[string]string{"note": "tenth"}
		}
		l.Items = append(l.Items, corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%d", i), Labels: labels, Annotations: annotations},
			Data:       map[string]string{"value": "v"},
		})
	}
	info, _ := runtime.SerializerInfoForMediaType(kubescheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	b, err := runtime.Encode(kubescheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newConfigMapItem() protolist.Item { return &corev1.ConfigMap{} }

// decodeShared decodes body as a built-in informer's list does with
// Options.ShareMetadata.
func decodeShared(t testing.TB, s *sharer, body []byte) *protolist.List {
	t.Helper()
	d := &decodeSharing{s: s}
	l, err := protolist.Decode(bytes.NewReader(body), protolist.Hooks{New: func() protolist.Item {
		item := newConfigMapItem()
		d.prepare(item)
		return item
	}, Decoded: func(item protolist.Item) { d.decoded(item) }})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDecodeSharing: sharing while a list decodes gives each object the
// labels and annotations it was listed with, shares equal ones, leaves
// none where there were none, and keeps each object's own label set
// apart.
func TestDecodeSharing(t *testing.T) {
	const n, apart = 50, 3
	l := decodeShared(t, newSharer(), protobufList(t, n, apart))
	if len(l.Items) != n {
		t.Fatalf("%d items, want %d", len(l.Items), n)
	}
	first := l.Items[0].(*corev1.ConfigMap)
	for i, o := range l.Items {
		cm := o.(*corev1.ConfigMap)
		want := map[string]string{"app": "bench"}
		if i >= n-apart {
			want["own"] = fmt.Sprint(i)
		}
		if !reflect.DeepEqual(cm.Labels, want) {
			t.Errorf("item %d: labels %v, want %v", i, cm.Labels, want)
		}
		if shared := reflect.ValueOf(cm.Labels).UnsafePointer() == reflect.ValueOf(first.Labels).UnsafePointer(); shared != (i < n-apart) {
			t.Errorf("item %d: labels shared with item 0: %v", i, shared)
		}
		switch {
		case i%10 == 0 && !reflect.DeepEqual(cm.Annotations, map[string]string{"note": "tenth"}):
			t.Errorf("item %d: annotations %v", i, cm.Annotations)
		case i%10 != 0 && cm.Annotations != nil:
			t.Errorf("item %d: annotations %#v, want nil", i, cm.Annotations)
		}
	}
	for i := n - apart; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if reflect.ValueOf(l.Items[i].(*corev1.ConfigMap).Labels).UnsafePointer() == reflect.ValueOf(l.Items[j].(*corev1.ConfigMap).Labels).UnsafePointer() {
				t.Errorf("items %d and %d share one map for different labels", i, j)
			}
		}
	}
}

// TestDecodeSharingAllocatesNoMapPerObject: decoding objects whose labels
// repeat allocates no label map for each of them, only the label strings:
// a map decoded and then replaced by a shared one would stay behind as a
// hole between the maps the cache keeps (decodeSharing's doc).
func TestDecodeSharingAllocatesNoMapPerObject(t *testing.T) {
	const n = 200
	body := protobufList(t, n, 0)
	s := newSharer()
	decodeShared(t, s, body) // the shared maps exist from here on
	shared := testing.AllocsPerRun(5, func() { decodeShared(t, s, body) })
	plain := testing.AllocsPerRun(5, func() {
		if _, err := protolist.Decode(bytes.NewReader(body), protolist.Hooks{New: newConfigMapItem}); err != nil {
			t.Fatal(err)
		}
	})
	// A one-entry label map is two allocations: its header and its group.
	if saved := plain - shared; saved < 2*n {
		t.Errorf("sharing while decoding %d objects saved %.0f allocations (%.0f against %.0f), want at least %d: a label map per object",
			n, saved, shared, plain, 2*n)
	}
}
