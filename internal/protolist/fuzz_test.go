package protolist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"testing"
	"testing/iotest"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
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

// checkList holds got and err, what Decode made of body with slim (nil
// for none), to what apimachinery makes of it.
func checkList(t *testing.T, body []byte, got *List, err error, slim *Slim) {
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
		if slim == nil || !slim.ManagedFields {
			t.Fatalf("Decode took a body apimachinery refuses (%v)\n%q", werr, body)
		}
		checkManagedFieldsOnly(t, body, got, slim, werr)
	default:
		if !apiequality.Semantic.DeepEqual(got.ListMeta, want.ListMeta) {
			t.Fatalf("list metadata %+v, apimachinery's %+v", got.ListMeta, want.ListMeta)
		}
		if len(got.Items) != len(want.Items) {
			t.Fatalf("%d items, apimachinery decodes %d", len(got.Items), len(want.Items))
		}
		for i := range got.Items {
			checkConfigMap(t, i, got.Items[i], &want.Items[i], slim)
		}
	}
}

// checkConfigMap holds item i, decoded with slim (nil for none), to want,
// decoded by apimachinery from the same bytes. A Slim that removes
// managedFields leaves them when it leaves the object as it was (when it
// cannot parse it as the decoder does: FuzzSlimObject holds it to that).
func checkConfigMap(t *testing.T, i int, got runtime.Object, want *corev1.ConfigMap, slim *Slim) {
	t.Helper()
	g, ok := got.(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("item %d is a %T", i, got)
	}
	g, want = g.DeepCopy(), want.DeepCopy()
	if slim != nil && slim.ManagedFields {
		if g.ManagedFields != nil && !apiequality.Semantic.DeepEqual(g.ManagedFields, want.ManagedFields) {
			t.Fatalf("item %d: managedFields %+v, apimachinery's %+v", i, g.ManagedFields, want.ManagedFields)
		}
		g.ManagedFields, want.ManagedFields = nil, nil
	}
	if !apiequality.Semantic.DeepEqual(g, want) {
		t.Fatalf("item %d:\n%+v\napimachinery's:\n%+v", i, g, want)
	}
}

// checkManagedFieldsOnly checks a list Decode took with slim, removing
// managedFields, that apimachinery refuses (werr): Slim drops them
// undecoded, so a list whose only fault is in some item's managedFields
// decodes. Every item must then decode with apimachinery once its
// managedFields are taken out (by withoutManagedFields), as got's, and
// at least one not before.
func checkManagedFieldsOnly(t *testing.T, body []byte, got *List, slim *Slim, werr error) {
	t.Helper()
	raw, err := Decode(bytes.NewReader(body), Hooks{New: func() Item { return &rawItem{} }})
	if err != nil {
		t.Fatalf("Decode takes the list with Slim but not its items' bytes: %v", err)
	}
	if len(raw.Items) != len(got.Items) {
		t.Fatalf("%d items, %d with Slim", len(raw.Items), len(got.Items))
	}
	faulty := 0
	for i, item := range raw.Items {
		b := item.(*rawItem).b
		var want corev1.ConfigMap
		if want.Unmarshal(b) != nil {
			faulty++
			stripped, ok := withoutManagedFields(b)
			if !ok {
				t.Fatalf("item %d: apimachinery refuses it and it is not plain protobuf\n%q", i, b)
			}
			want = corev1.ConfigMap{}
			if err := want.Unmarshal(stripped); err != nil {
				t.Fatalf("item %d: apimachinery refuses it (%v) for more than its managedFields\n%q", i, err, b)
			}
		}
		checkConfigMap(t, i, got.Items[i], &want, slim)
	}
	if faulty == 0 {
		t.Fatalf("apimachinery refuses the list (%v), not any of its items\n%q", werr, body)
	}
}

// rawItem keeps an item's bytes.
type rawItem struct{ b []byte }

func (r *rawItem) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (r *rawItem) DeepCopyObject() runtime.Object   { return &rawItem{bytes.Clone(r.b)} }
func (r *rawItem) Unmarshal(b []byte) error         { r.b = bytes.Clone(b); return nil }

// plainField is one field of a message as plainFields splits it.
type plainField struct {
	num, wire  uint64
	enc, value []byte // the whole field; its value (of wire type 2: without the length)
}

// plainFields splits msg into its fields; false unless it is plain
// protobuf: varints of at most 64 bits, field numbers up to MaxInt32,
// wire types 0, 1, 2 and 5. It is written apart from Slim, to check it.
func plainFields(msg []byte) ([]plainField, bool) {
	var fs []plainField
	for len(msg) > 0 {
		k, n := binary.Uvarint(msg)
		if n <= 0 || k>>3 > math.MaxInt32 {
			return nil, false
		}
		f := plainField{num: k >> 3, wire: k & 7}
		size := n
		switch f.wire {
		case 0:
			_, m := binary.Uvarint(msg[n:])
			if m <= 0 {
				return nil, false
			}
			size += m
		case 1:
			size += 8
		case 5:
			size += 4
		case 2:
			l, m := binary.Uvarint(msg[n:])
			if m <= 0 || l > uint64(len(msg)-n-m) {
				return nil, false
			}
			f.value = msg[n+m : n+m+int(l)]
			size += m + int(l)
		default:
			return nil, false
		}
		if size > len(msg) {
			return nil, false
		}
		f.enc = msg[:size]
		fs = append(fs, f)
		msg = msg[size:]
	}
	return fs, true
}

// withoutManagedFields returns obj, an object's encoding, with every
// ObjectMeta (field 1) in it rebuilt without its managedFields (17);
// false if obj is not plain protobuf at those two levels.
func withoutManagedFields(obj []byte) ([]byte, bool) {
	fs, ok := plainFields(obj)
	if !ok {
		return nil, false
	}
	var out []byte
	for _, f := range fs {
		if f.num != 1 || f.wire != 2 {
			out = append(out, f.enc...)
			continue
		}
		mfs, ok := plainFields(f.value)
		if !ok {
			return nil, false
		}
		var m []byte
		for _, mf := range mfs {
			if mf.num != managedFieldsField || mf.wire != 2 {
				m = append(m, mf.enc...)
			}
		}
		out = binary.AppendUvarint(out, 1<<3|2)
		out = binary.AppendUvarint(out, uint64(len(m)))
		out = append(out, m...)
	}
	return out, true
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
		checkList(t, body, got, err, nil)
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
			checkList(t, body, got, err, nil)
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

// FuzzDecodeSlim: Decode with Hooks.Slim agrees with apimachinery, once
// the managedFields Slim removes are cleared from both sides, labels and
// all else equal; a list apimachinery refuses only for faults in
// managedFields, which Slim drops undecoded, decodes
// (checkManagedFieldsOnly).
func FuzzDecodeSlim(f *testing.F) {
	for _, s := range listSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, slim := range slims() {
			got, err := Decode(bytes.NewReader(body), Hooks{New: newConfigMap, Slim: &slim})
			checkList(t, body, got, err, &slim)
		}
	})
}

// objectSeeds are ConfigMaps' encodings: with managedFields, labels,
// owner references and data, without, and inputs Slim leaves as they
// are.
func objectSeeds(tb testing.TB) [][]byte {
	seeds := [][]byte{hugeBody[len(magic):], {0x0a, 0x04, 0x5a, 0x02, 0x08, 0x01}, {0x0a, 0x06, 0x8a, 0x01, 0x00, 0x5a, 0x01, 0x0a}}
	for _, cm := range []*corev1.ConfigMap{managed(0), managed(1), managed(3), {ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"": "", "k": "v"}}}, {}} {
		cm.Annotations = nil
		if cm.Data != nil {
			cm.Data = map[string]string{"value": "v"}
		}
		b, err := cm.Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// FuzzSlimObject: an object Slim.Object changed decodes as apimachinery
// decodes the object as it was (the generated decoder, which the
// protobuf serializer calls on an envelope's Raw): without managedFields
// when they are removed, with the labels Object returned. Slim may leave
// an object as it was (it then decodes as it would have), but not the
// object's own encoding as marshalled. An object apimachinery refuses
// may decode once slimmed only if its managedFields were the fault.
func FuzzSlimObject(f *testing.F) {
	for _, s := range objectSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		var want corev1.ConfigMap
		werr := want.Unmarshal(obj)
		for name, s := range slims() {
			out, labels := s.Object(bytes.Clone(obj))
			if len(out) > len(obj) || labels != nil && s.Labels == nil {
				t.Fatalf("%s: %d bytes became %d, labels %v", name, len(obj), len(out), labels)
			}
			if labels == nil && bytes.Equal(out, obj) {
				continue
			}
			got := decodeSlimmed(t, out, labels)
			switch {
			case got == nil && werr == nil:
				t.Fatalf("%s: apimachinery decodes the object, not slimmed\n%q", name, obj)
			case got == nil:
			case werr != nil:
				if !s.ManagedFields {
					t.Fatalf("%s: apimachinery refuses the object (%v), not slimmed\n%q", name, werr, obj)
				}
				stripped, ok := withoutManagedFields(obj)
				var w corev1.ConfigMap
				if !ok || w.Unmarshal(stripped) != nil {
					t.Fatalf("%s: apimachinery refuses the object (%v) for more than its managedFields\n%q", name, werr, obj)
				}
				checkSlimmed(t, name, s, got, &w)
			default:
				checkSlimmed(t, name, s, got, &want)
			}
		}
		if werr != nil {
			return
		}
		canon, err := want.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range slims() {
			out, labels := s.Object(bytes.Clone(canon))
			if s.Labels != nil && len(labels) != len(want.Labels) || s.Labels == nil && labels != nil {
				t.Fatalf("%s: labels %v of %v taken out of the object as marshalled", name, labels, want.Labels)
			}
			if changes := s.ManagedFields && len(want.ManagedFields) > 0 || s.Labels != nil && len(want.Labels) > 0; changes == bytes.Equal(out, canon) {
				t.Fatalf("%s: the object as marshalled changed %v, want %v\n%q", name, !changes, changes, canon)
			}
			got := decodeSlimmed(t, out, labels)
			if got == nil {
				t.Fatalf("%s: the object as marshalled does not decode slimmed", name)
			}
			checkSlimmed(t, name, s, got, &want)
		}
	})
}

// decodeSlimmed decodes a slimmed ConfigMap and sets labels on it; nil
// if it does not decode.
func decodeSlimmed(t *testing.T, b []byte, labels map[string]string) *corev1.ConfigMap {
	t.Helper()
	var got corev1.ConfigMap
	if got.Unmarshal(b) != nil {
		return nil
	}
	if labels != nil {
		if len(got.Labels) != 0 {
			t.Fatalf("labels %v were taken out and %v left", labels, got.Labels)
		}
		if err := SetLabels(&got, labels); err != nil {
			t.Fatal(err)
		}
	}
	return &got
}

// checkSlimmed holds got, an object s changed, to want, decoded whole.
func checkSlimmed(t *testing.T, name string, s Slim, got, want *corev1.ConfigMap) {
	t.Helper()
	want = want.DeepCopy()
	if s.ManagedFields {
		if got.ManagedFields != nil {
			t.Fatalf("%s: an object slimmed still has managedFields %+v", name, got.ManagedFields)
		}
		want.ManagedFields = nil
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("%s: slimmed:\n%+v\napimachinery's:\n%+v", name, got, want)
	}
}

// envelopeSeeds are objects as the protobuf serializer writes them:
// ConfigMaps and a Pod, with managedFields and labels; a list and a
// Status, which Envelope leaves alone; and inputs that are not objects.
func envelopeSeeds(tb testing.TB) [][]byte {
	ser := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)
	cm := managed(2)
	cm.Annotations, cm.Data = nil, map[string]string{"k": "v"}
	pod := &corev1.Pod{ObjectMeta: cm.ObjectMeta, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{Continue: "c"}, Items: []corev1.ConfigMap{*cm}}
	seeds := [][]byte{hugeBody, bytes.Clone(magic), []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"managedFields":[{}]}}`)}
	for _, obj := range []runtime.Object{cm, managed(0), pod, list, &metav1.Status{Status: metav1.StatusFailure, Code: 410}} {
		var buf bytes.Buffer
		if err := ser.Encode(obj, &buf); err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	return seeds
}

// FuzzSlimEnvelope: Slim.Envelope changes only objects of the kinds it
// is given, and an object it changed decodes with apimachinery's
// deserializer as the object as it was does, as FuzzSlimObject has it.
func FuzzSlimEnvelope(f *testing.F) {
	for _, s := range envelopeSeeds(f) {
		f.Add(s)
	}
	kinds := ObjectKinds(kubescheme.Scheme, corev1.SchemeGroupVersion)
	ser := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)
	f.Fuzz(func(t *testing.T, data []byte) {
		var want runtime.Object
		var werr error
		wanted := false
		for name, s := range slims() {
			out, labels := s.Envelope(bytes.Clone(data), kinds)
			if len(out) > len(data) || labels != nil && s.Labels == nil {
				t.Fatalf("%s: %d bytes became %d, labels %v", name, len(data), len(out), labels)
			}
			if labels == nil && bytes.Equal(out, data) {
				continue
			}
			if kind, _, ok := Unwrap(data); !ok || !kinds[string(kind)] {
				t.Fatalf("%s: an object of kind %q changed", name, kind)
			}
			if !wanted {
				want, _, werr = deserializer.Decode(bytes.Clone(data), nil, nil)
				wanted = true
			}
			got, _, gerr := deserializer.Decode(out, nil, nil)
			if gerr == nil && labels != nil {
				if a, err := meta.Accessor(got); err != nil || len(a.GetLabels()) != 0 {
					t.Fatalf("%s: labels %v were taken out of %T and some left (%v)", name, labels, got, err)
				}
				if err := SetLabels(got, labels); err != nil {
					t.Fatal(err)
				}
			}
			switch {
			case gerr != nil && werr == nil:
				t.Fatalf("%s: apimachinery decodes the object, not slimmed (%v)\n%q", name, gerr, data)
			case gerr != nil:
			case werr != nil:
				if !s.ManagedFields {
					t.Fatalf("%s: apimachinery refuses the object (%v), not slimmed\n%q", name, werr, data)
				}
				var u runtime.Unknown
				if err := u.Unmarshal(data[len(magic):]); err != nil {
					t.Fatalf("%s: apimachinery refuses the envelope (%v), not slimmed\n%q", name, err, data)
				}
				stripped, ok := withoutManagedFields(u.Raw)
				if !ok {
					t.Fatalf("%s: apimachinery refuses the object (%v) and it is not plain protobuf\n%q", name, werr, data)
				}
				u.Raw = stripped
				b, err := u.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				w, _, err := deserializer.Decode(append(bytes.Clone(magic), b...), nil, nil)
				if err != nil {
					t.Fatalf("%s: apimachinery refuses the object (%v) for more than its managedFields\n%q", name, err, data)
				}
				checkSlimmedObject(t, name, s, got, w)
			default:
				checkSlimmedObject(t, name, s, got, want)
			}
		}
		// The object as the protobuf serializer writes it is slimmed.
		if !bytes.HasPrefix(data, magic) {
			return
		}
		if !wanted {
			want, _, werr = deserializer.Decode(bytes.Clone(data), nil, nil)
		}
		if werr != nil || !kinds[want.GetObjectKind().GroupVersionKind().Kind] {
			return
		}
		a, err := meta.Accessor(want)
		if err != nil {
			t.Fatalf("%T of an object kind: %v", want, err)
		}
		var buf bytes.Buffer
		if err := ser.Encode(want, &buf); err != nil {
			t.Fatal(err)
		}
		canon := buf.Bytes()
		for name, s := range slims() {
			out, labels := s.Envelope(bytes.Clone(canon), kinds)
			if changes := s.ManagedFields && len(a.GetManagedFields()) > 0 || s.Labels != nil && len(a.GetLabels()) > 0; changes == bytes.Equal(out, canon) {
				t.Fatalf("%s: the object as encoded changed %v, want %v\n%q", name, !changes, changes, canon)
			}
			if s.Labels != nil && len(labels) != len(a.GetLabels()) || s.Labels == nil && labels != nil {
				t.Fatalf("%s: labels %v of %v taken out", name, labels, a.GetLabels())
			}
			got, _, err := deserializer.Decode(out, nil, nil)
			if err != nil {
				t.Fatalf("%s: the object as encoded does not decode slimmed: %v", name, err)
			}
			if labels != nil {
				if err := SetLabels(got, labels); err != nil {
					t.Fatal(err)
				}
			}
			checkSlimmedObject(t, name, s, got, want)
		}
	})
}

// checkSlimmedObject holds got, an object s changed, to want, decoded
// whole.
func checkSlimmedObject(t *testing.T, name string, s Slim, got, want runtime.Object) {
	t.Helper()
	if reflect.TypeOf(got) != reflect.TypeOf(want) {
		t.Fatalf("%s: a %T, apimachinery's a %T", name, got, want)
	}
	want = want.DeepCopyObject()
	if s.ManagedFields {
		g, err := meta.Accessor(got)
		if err != nil {
			t.Fatal(err)
		}
		if g.GetManagedFields() != nil {
			t.Fatalf("%s: an object slimmed still has managedFields %+v", name, g.GetManagedFields())
		}
		w, err := meta.Accessor(want)
		if err != nil {
			t.Fatal(err)
		}
		w.SetManagedFields(nil)
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("%s: slimmed:\n%+v\napimachinery's:\n%+v", name, got, want)
	}
}

// FuzzUnwrap: what Unwrap returns is what apimachinery reads from the
// envelope: runtime.Unknown's kind and Raw. Unwrap may refuse envelopes
// apimachinery takes (those it cannot parse as plain protobuf: its
// callers then decode with apimachinery), but not one as marshalled.
func FuzzUnwrap(f *testing.F) {
	for _, s := range envelopeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kind, raw, ok := Unwrap(data)
		var u runtime.Unknown
		uerr := errors.New("not protobuf")
		if bytes.HasPrefix(data, magic) {
			uerr = u.Unmarshal(data[len(magic):])
		}
		if ok && (uerr != nil || u.Raw == nil || string(kind) != u.Kind || !bytes.Equal(raw, u.Raw)) {
			t.Fatalf("Unwrap: kind %q, raw %q; apimachinery: kind %q, raw %q, %v", kind, raw, u.Kind, u.Raw, uerr)
		}
		if uerr != nil || u.Raw == nil {
			return
		}
		b, err := u.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		kind, raw, ok = Unwrap(append(bytes.Clone(magic), b...))
		if !ok || string(kind) != u.Kind || !bytes.Equal(raw, u.Raw) {
			t.Fatalf("Unwrap of the envelope as marshalled: kind %q, raw %q, %v; want kind %q, raw %q", kind, raw, ok, u.Kind, u.Raw)
		}
	})
}
