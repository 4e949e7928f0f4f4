package protolist

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
)

// managed is a ConfigMap written by n field managers, with fields on
// both sides of managedFields in ObjectMeta's encoding (ownerReferences
// is field 13, creationTimestamp 8; managedFields 17; none after it is
// set, so the test also sets a large data value that must survive).
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

// slims are the Slims the tests apply: managedFields removed, labels
// taken out, both.
func slims() map[string]Slim {
	return map[string]Slim{
		"managedFields": {ManagedFields: true},
		"labels":        {Labels: NewInterner()},
		"both":          {ManagedFields: true, Labels: NewInterner()},
	}
}

// TestSlim decodes objects slimmed in place, with the labels taken out
// set back, as the same objects without managedFields when those are
// removed, and leaves objects with nothing to take as they were. Labels
// decoded by one Interner share their strings.
func TestSlim(t *testing.T) {
	for name, slim := range slims() {
		for _, n := range []int{0, 1, 3, 40} {
			t.Run(fmt.Sprint(name, ", ", n, " entries"), func(t *testing.T) {
				cm := managed(n)
				b, err := cm.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				size := len(b)
				slimmed, labels := slim.Object(b)
				if n == 0 && slim.Labels == nil && len(slimmed) != size {
					t.Fatalf("nothing to take: %d bytes became %d", size, len(slimmed))
				}
				if (n > 0 || slim.Labels != nil) && len(slimmed) >= size {
					t.Fatalf("%d bytes became %d", size, len(slimmed))
				}
				got := &corev1.ConfigMap{}
				if err := got.Unmarshal(slimmed); err != nil {
					t.Fatalf("decoding the slimmed object: %v", err)
				}
				if slim.Labels == nil && labels != nil || slim.Labels != nil && got.Labels != nil {
					t.Fatalf("labels returned %v, left %v", labels, got.Labels)
				}
				if slim.Labels != nil {
					got.Labels = labels
				}
				want := cm.DeepCopy()
				if slim.ManagedFields {
					want.ManagedFields = nil
				}
				if !apiequality.Semantic.DeepEqual(got, want) {
					t.Fatalf("slimmed object decodes as\n%+v\nwant\n%+v", got, want)
				}
			})
		}
	}
	in := NewInterner()
	var values []string
	for range 2 {
		b, err := managed(1).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		_, labels := Slim{Labels: in}.Object(b)
		values = append(values, labels["shard.ctrlkit.io/ring"])
	}
	if unsafe.StringData(values[0]) != unsafe.StringData(values[1]) {
		t.Error("two objects' equal label values are two strings, want one")
	}
}

// TestSlimEnvelope strips an object as the protobuf
// serializer writes it, and leaves JSON and lists alone.
func TestSlimEnvelope(t *testing.T) {
	ser := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)
	encode := func(obj runtime.Object) []byte {
		var buf bytes.Buffer
		if err := ser.Encode(obj, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	cm := managed(3)
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	data := encode(cm)
	objectKind := ObjectKinds(kubescheme.Scheme, corev1.SchemeGroupVersion)
	stripped, _ := Slim{ManagedFields: true}.Envelope(data, objectKind)
	if len(stripped) >= len(data) {
		t.Fatalf("%d bytes became %d", len(data), len(stripped))
	}
	obj, _, err := ser.Decode(stripped, nil, nil)
	if err != nil {
		t.Fatalf("decoding the stripped envelope: %v", err)
	}
	want := cm.DeepCopy()
	want.ManagedFields = nil
	want.APIVersion, want.Kind = "", ""
	got := obj.(*corev1.ConfigMap)
	got.APIVersion, got.Kind = "", ""
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("stripped envelope decodes as\n%+v\nwant\n%+v", got, want)
	}

	list := &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "1", Continue: strings.Repeat("c", 200)}, Items: []corev1.ConfigMap{*managed(2)}}
	for name, in := range map[string][]byte{"json": []byte(`{"kind":"ConfigMap","metadata":{"managedFields":[{}]}}`), "list": encode(list)} {
		before := bytes.Clone(in)
		if out, _ := (Slim{ManagedFields: true, Labels: NewInterner()}).Envelope(in, objectKind); !bytes.Equal(out, before) {
			t.Errorf("%s changed", name)
		}
	}
}

// TestSlimLeavesBadInputAlone returns every truncation of an object
// unchanged or decodable as a prefix would be: never a panic, never bytes
// from outside the input. A malformed label entry leaves the object as
// it was.
func TestSlimLeavesBadInputAlone(t *testing.T) {
	full, err := managed(2).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, slim := range slims() {
		for n := range len(full) {
			in := bytes.Clone(full[:n])
			out, _ := slim.Object(in)
			if len(out) > n {
				t.Fatalf("%s: truncated to %d bytes: got %d", name, n, len(out))
			}
		}
		bad := [][]byte{nil, {0x0b}, {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, {0x0a, 0x05, 0x8a}}
		if slim.Labels != nil {
			bad = append(bad,
				[]byte{0x0a, 0x04, 0x5a, 0x02, 0x08, 0x01},             // a label entry whose field 1 is a varint
				[]byte{0x0a, 0x06, 0x8a, 0x01, 0x00, 0x5a, 0x01, 0x0a}) // managedFields, then a truncated label entry
		}
		for _, in := range bad {
			before := bytes.Clone(in)
			if out, labels := slim.Object(in); !bytes.Equal(out, before) || labels != nil {
				t.Errorf("%s: %x became %x, labels %v", name, before, out, labels)
			}
		}
	}
}

// TestObjectKinds: every kind of client-go's scheme whose Go type has an
// ObjectMeta has it as field 1, and ObjectKinds names those and no
// other (no list, option or event type).
func TestObjectKinds(t *testing.T) {
	objectMeta := reflect.TypeFor[metav1.ObjectMeta]()
	named := 0
	for _, gv := range kubescheme.Scheme.PrioritizedVersionsAllGroups() {
		kinds := ObjectKinds(kubescheme.Scheme, gv)
		for kind, rt := range kubescheme.Scheme.KnownTypes(gv) {
			f, has := rt.FieldByName("ObjectMeta")
			has = has && f.Type == objectMeta
			if has && !strings.HasPrefix(f.Tag.Get("protobuf"), "bytes,1,") {
				t.Errorf("%v %s: ObjectMeta is not field 1: %q", gv, kind, f.Tag.Get("protobuf"))
			}
			if kinds[kind] != has {
				t.Errorf("%v %s: ObjectKinds says %v, has ObjectMeta %v", gv, kind, kinds[kind], has)
			}
		}
		named += len(kinds)
	}
	if core := ObjectKinds(kubescheme.Scheme, corev1.SchemeGroupVersion); !core["ConfigMap"] || !core["Pod"] || core["ConfigMapList"] || core["WatchEvent"] || core["ListOptions"] {
		t.Errorf("core/v1 object kinds: %v", core)
	}
	if named < 150 {
		t.Fatalf("only %d kinds named", named)
	}
}

// TestDecodeStripsItems: with Hooks.Slim the items of a list decode
// without their managedFields, with their labels, and are otherwise
// whole.
func TestDecodeStripsItems(t *testing.T) {
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}}
	for range 3 {
		list.Items = append(list.Items, *managed(2))
	}
	body := encode(t, list)
	for _, strip := range []bool{false, true} {
		h := Hooks{New: newConfigMap}
		if strip {
			h.Slim = &Slim{ManagedFields: true, Labels: NewInterner()}
		}
		got, err := Decode(bytes.NewReader(body), h)
		if err != nil {
			t.Fatal(err)
		}
		for i, item := range got.Items {
			want := list.Items[i].DeepCopy()
			if strip {
				want.ManagedFields = nil
			}
			if !apiequality.Semantic.DeepEqual(item, want) {
				t.Errorf("strip %v, item %d: got\n%+v\nwant\n%+v", strip, i, item, want)
			}
		}
	}
}

// TestUnwrap returns the kind and the object's own encoding from an
// object as the protobuf serializer writes it, and refuses JSON, a
// truncated envelope and an envelope without the object.
func TestUnwrap(t *testing.T) {
	cm := managed(2)
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme).Encode(cm, &buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	kind, raw, ok := Unwrap(data)
	if !ok || string(kind) != "ConfigMap" {
		t.Fatalf("Unwrap = %q, ok %v; want ConfigMap", kind, ok)
	}
	var got corev1.ConfigMap
	if err := got.Unmarshal(raw); err != nil {
		t.Fatalf("the unwrapped object does not decode: %v", err)
	}
	cm.APIVersion, cm.Kind = "", ""
	if !apiequality.Semantic.DeepEqual(&got, cm) {
		t.Errorf("unwrapped\n%+v\nwant\n%+v", &got, cm)
	}
	for name, in := range map[string][]byte{
		"json":      []byte(`{"kind":"ConfigMap"}`),
		"truncated": data[:len(magic)+3],
		"no object": append(bytes.Clone(magic), 0x0a, 0x00), // a TypeMeta only
	} {
		if _, _, ok := Unwrap(in); ok {
			t.Errorf("%s: Unwrap ok", name)
		}
	}
}

// TestInternerString: equal bytes give one string, up to the bounds;
// past them, an equal string is still returned, newly allocated.
func TestInternerString(t *testing.T) {
	in := NewInterner()
	a, b := in.String([]byte("ring-member-a")), in.String([]byte("ring-member-a"))
	if a != "ring-member-a" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("equal bytes gave %q and %q, two strings: want one", a, b)
	}
	long := bytes.Repeat([]byte("x"), maxInternedLen+1)
	if c, d := in.String(long), in.String(long); c != string(long) || unsafe.StringData(c) == unsafe.StringData(d) {
		t.Errorf("a string over %d bytes was held, or changed", maxInternedLen)
	}
}
