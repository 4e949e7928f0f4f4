package protolist

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
)

// The fuzz targets hold each decoder to apimachinery's on the same bytes:
// both refuse them, or both decode them to semantically equal objects.
// Where the two differ by design, the target says how and checks the
// difference is that one.

// hugeBody is a 12-byte body whose ContentEncoding claims about 200 TB;
// it used to end the process with "fatal error: out of memory".
var hugeBody = []byte("k8s\x00\x1a\x8a\x8a\x8a\x8a\x8a\x8a0")

// deserializer is what client-go's REST client decodes a protobuf answer
// with.
var deserializer = kubescheme.Codecs.UniversalDeserializer()

// listSeeds are bodies for the list targets: lists of ConfigMaps with
// labels, data, managedFields and a continue token, an empty list, and
// bodies Decode refuses.
func listSeeds(tb testing.TB) [][]byte {
	withManaged := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "9", Continue: "c"}}
	for range 2 {
		cm := managed(2)
		cm.Annotations, cm.Data = nil, map[string]string{"k": "v"}
		withManaged.Items = append(withManaged.Items, *cm)
	}
	twoRaws := encode(tb, configMaps(1))
	twoRaws = append(twoRaws, twoRaws[len(magic):]...)
	seeds := [][]byte{
		encode(tb, &corev1.ConfigMapList{}),
		encode(tb, configMaps(1)),
		encode(tb, configMaps(3)),
		encode(tb, withManaged),
		twoRaws,
		bytes.Clone(magic),
		hugeBody,
	}
	return seeds
}

// wantList decodes body as client-go's REST client decodes a list of
// ConfigMaps, with the envelope's TypeMeta naming that list: Decode
// checks the TypeMeta decodes but not what it names (the caller knows
// the type it asked for), where apimachinery would decode the items as
// whatever type it names. It also returns the envelope, as apimachinery
// reads it before anything else.
func wantList(body []byte) (*corev1.ConfigMapList, *runtime.Unknown, error) {
	if !bytes.HasPrefix(body, magic) {
		return nil, nil, errors.New("not protobuf")
	}
	u := &runtime.Unknown{}
	if err := u.Unmarshal(body[len(magic):]); err != nil {
		return nil, nil, err
	}
	env := *u
	env.TypeMeta = runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}
	b, err := env.Marshal()
	if err != nil {
		return nil, u, err
	}
	obj, _, err := deserializer.Decode(append(bytes.Clone(magic), b...), nil, &corev1.ConfigMapList{})
	if err != nil {
		return nil, u, err
	}
	return obj.(*corev1.ConfigMapList), u, nil
}

// raws counts the Raw fields (2) of an envelope apimachinery decodes:
// corev1.Capabilities's field 2 is a repeated string and its field 1 one
// too, others unknown, so its generated decoder reads an envelope's keys
// and lengths as runtime.Unknown's does, and keeps every field 2 where
// runtime.Unknown keeps the last.
func raws(body []byte) int {
	var c corev1.Capabilities
	if err := c.Unmarshal(body[len(magic):]); err != nil {
		return -1
	}
	return len(c.Drop)
}

// checkList holds got and err, what Decode made of body, to what
// apimachinery makes of it.
func checkList(t *testing.T, body []byte, got *List, err error) {
	t.Helper()
	want, u, werr := wantList(body)
	switch {
	case err != nil && werr != nil:
	case err != nil:
		// Decode refuses, as an error, three envelopes apimachinery takes:
		// one without a list (apimachinery decodes nothing as an empty
		// list), one with a ContentEncoding (apimachinery ignores it), and
		// one with more than one list (apimachinery keeps the last, after
		// Decode has handed the first one's items to its hooks).
		if u.Raw == nil || u.ContentEncoding != "" || raws(body) > 1 {
			return
		}
		t.Fatalf("Decode refused a body apimachinery decodes: %v\n%q", err, body)
	case werr != nil:
		t.Fatalf("Decode took a body apimachinery refuses (%v)\n%q", werr, body)
	default:
		if !apiequality.Semantic.DeepEqual(got.ListMeta, want.ListMeta) {
			t.Fatalf("list metadata %+v, apimachinery's %+v", got.ListMeta, want.ListMeta)
		}
		if len(got.Items) != len(want.Items) {
			t.Fatalf("%d items, apimachinery decodes %d", len(got.Items), len(want.Items))
		}
		for i := range got.Items {
			g, ok := got.Items[i].(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("item %d is a %T", i, got.Items[i])
			}
			if !apiequality.Semantic.DeepEqual(g, &want.Items[i]) {
				t.Fatalf("item %d:\n%+v\napimachinery's:\n%+v", i, g, &want.Items[i])
			}
		}
	}
}

// FuzzDecode: Decode of a body, read whole or a byte at a time, with
// Discard or not, agrees with apimachinery (checkList).
func FuzzDecode(f *testing.F) {
	for _, s := range listSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		metas := 0
		got, err := Decode(bytes.NewReader(body), Hooks{New: newConfigMap, Meta: func(*metav1.ListMeta) { metas++ }})
		checkList(t, body, got, err)
		if err == nil && metas == 0 && !apiequality.Semantic.DeepEqual(got.ListMeta, metav1.ListMeta{}) {
			t.Fatal("the list has metadata and Meta was not called")
		}

		slow, serr := Decode(iotest.OneByteReader(bytes.NewReader(body)), Hooks{New: newConfigMap})
		if (serr == nil) != (err == nil) || err == nil && !apiequality.Semantic.DeepEqual(slow, got) {
			t.Fatalf("read a byte at a time: %v, %v; read whole: %v, %v", slow, serr, got, err)
		}

		scratch := &corev1.ConfigMap{}
		var decoded []runtime.Object
		discarded, derr := Decode(bytes.NewReader(body), Hooks{
			New: func() Item {
				*scratch = corev1.ConfigMap{}
				return scratch
			},
			Decoded: func(it Item) { decoded = append(decoded, it.DeepCopyObject()) },
			Discard: true,
		})
		if (derr == nil) != (err == nil) {
			t.Fatalf("with Discard: %v; without: %v", derr, err)
		}
		if err == nil && (len(discarded.Items) != 0 || !apiequality.Semantic.DeepEqual(decoded, got.Items) ||
			!apiequality.Semantic.DeepEqual(discarded.ListMeta, got.ListMeta)) {
			t.Fatalf("with Discard: %d items kept, Decoded saw %v; without: %v", len(discarded.Items), decoded, got.Items)
		}
	})
}

// FuzzDecodeBody: DecodeBody decodes a protobuf body as Decode does
// (held to apimachinery), and hands any other body, every byte of it, to
// its fallback: here apimachinery's deserializer, as pkg/informer's.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range listSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"continue":"c"},"items":[{"metadata":{"name":"a"}}]}`))
	f.Add([]byte("k8s"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var handed []byte
		called := false
		other := func(r io.Reader) (runtime.Object, error) {
			called = true
			var err error
			if handed, err = io.ReadAll(r); err != nil {
				return nil, err
			}
			obj, _, err := deserializer.Decode(handed, nil, &corev1.ConfigMapList{})
			return obj, err
		}
		obj, err := DecodeBody(bytes.NewReader(body), Hooks{New: newConfigMap}, other)
		if err != nil && obj != nil {
			t.Fatalf("an error (%v) and an object %#v", err, obj)
		}
		if bytes.HasPrefix(body, magic) {
			if called {
				t.Fatal("a protobuf body went to the fallback")
			}
			var got *List
			if err == nil {
				got = obj.(*List)
			}
			checkList(t, body, got, err)
			return
		}
		if !called || !bytes.Equal(handed, body) {
			t.Fatalf("the fallback was handed %q of %q", handed, body)
		}
		want, _, werr := deserializer.Decode(bytes.Clone(body), nil, &corev1.ConfigMapList{})
		if (err == nil) != (werr == nil) || err == nil && !apiequality.Semantic.DeepEqual(obj, want) {
			t.Fatalf("%v, %v; apimachinery: %v, %v", obj, err, want, werr)
		}
	})
}

// managed is a ConfigMap with labels, an annotation, an owner, data and
// n managedFields entries.
func managed(n int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns", UID: "0b0b2b3c-aaaa-bbbb-cccc-000000000001", ResourceVersion: "4711",
			CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0)),
			Labels:            map[string]string{"app": "x", "shard.ctrlkit.io/ring": "member-1"},
			Annotations:       map[string]string{"note": strings.Repeat("a", 300)},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: "owner", UID: "u-1"}}},
		Data: map[string]string{"value": strings.Repeat("v", 1024)},
	}
	for i := range n {
		ts := metav1.NewTime(time.Unix(1700000000+int64(i), 0))
		cm.ManagedFields = append(cm.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: fmt.Sprintf("manager-%d", i), Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &ts,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:value":{}},"f:metadata":{"f:labels":{"f:app":{}}}}`)})
	}
	return cm
}
