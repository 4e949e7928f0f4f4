package protolist

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A cache that strips metadata.managedFields still pays for decoding
// them: each entry is a struct, four strings, a time and its FieldsV1
// bytes, about 300 bytes in six allocations, all garbage as soon as the
// object is cached; an object written by three field managers carries
// three. Removing the entries from the encoded object before it is
// decoded allocates nothing. Labels cost two strings per entry per
// object as decoded, though a label set usually repeats over many
// objects (app=x; the shard label, whose value is one of a few members):
// decoded from the encoding here, they share one string per distinct
// key or value.
//
// Slim parses what it changes as the generated decoders do; what it
// cannot parse, or would parse otherwise, it leaves as it was, for the
// decoder to read or refuse. It never reads outside its input.

// Slim says what an object's encoding loses before it is decoded. The
// zero Slim changes nothing.
type Slim struct {
	// ManagedFields removes metadata.managedFields.
	ManagedFields bool
	// Labels, when not nil, takes metadata.labels out of the encoding and
	// decodes them with strings from Labels: Object and Envelope return
	// them, for the caller to set on the decoded object. A label set
	// repeated over many cached objects (app=x, a shard label) then holds
	// its strings once, not once per object.
	Labels *Interner
}

// Object rewrites obj, the protobuf encoding of an API object whose field
// 1 is its ObjectMeta (as in every object type of k8s.io/api; ObjectKinds
// names them), in place as s says, and returns it shortened, with the
// labels taken out (nil when none were, or s.Labels is nil). Input it
// cannot parse is returned unchanged, for the decoder to report, and so
// is an object whose ObjectMeta is not its first field, as marshalled,
// or not its only one (the decoder would merge them): the generated
// decoders bound a map entry's key and value by the end of the message,
// not of the entry, so an entry before the ObjectMeta could read into it.
func (s Slim) Object(obj []byte) ([]byte, map[string]string) {
	if !s.ManagedFields && s.Labels == nil {
		return obj, nil
	}
	meta, ok := field(obj, 0)
	if !ok || meta.num != 1 || meta.wire != 2 {
		return obj, nil
	}
	for i := meta.end; i < len(obj); {
		f, ok := field(obj, i)
		if !ok || f.num == 1 {
			return obj, nil
		}
		i = f.end
	}
	var labels map[string]string
	obj = rewrite(obj, meta, func(meta []byte) []byte {
		meta, labels = s.meta(meta)
		return meta
	})
	return obj, labels
}

// Envelope does what Object does to an object in the protobuf
// serializer's envelope: the bytes "k8s\x00", then a runtime.Unknown
// whose field 1 is its TypeMeta and whose field 2 (Raw) holds the object.
// It changes only objects whose kind is in objectKinds: kinds whose field
// 1 is their ObjectMeta (ObjectKinds). Anything else (JSON, say) is
// returned unchanged.
func (s Slim) Envelope(data []byte, objectKinds map[string]bool) ([]byte, map[string]string) {
	kind, unknown, f, ok := envelope(data)
	if !ok || !objectKinds[string(kind)] {
		return data, nil
	}
	var labels map[string]string
	unknown = rewrite(unknown, f, func(obj []byte) []byte {
		obj, labels = s.Object(obj)
		return obj
	})
	return data[:len(magic)+len(unknown)], labels
}

// typeMetaKind returns the kind of tm, a TypeMeta's encoding (its last
// field 2, as decoded), or kind when tm has none; ok is false when tm is
// not valid.
func typeMetaKind(tm, kind []byte) (_ []byte, ok bool) {
	for i := 0; i < len(tm); {
		f, ok := field(tm, i)
		if !ok || f.num == 0 || f.num <= 2 && f.wire != 2 {
			return nil, false
		}
		if f.num == 2 {
			kind = tm[f.value:f.end]
		}
		i = f.end
	}
	return kind, true
}

// ObjectKinds returns the kinds of gv in scheme whose Go type has its
// ObjectMeta as protobuf field 1, those Slim may be given.
func ObjectKinds(scheme *runtime.Scheme, gv schema.GroupVersion) map[string]bool {
	objectMeta := reflect.TypeFor[metav1.ObjectMeta]()
	kinds := make(map[string]bool)
	for kind, rt := range scheme.KnownTypes(gv) {
		for i := range rt.NumField() {
			if f := rt.Field(i); f.Type == objectMeta && strings.HasPrefix(f.Tag.Get("protobuf"), "bytes,1,") {
				kinds[kind] = true
			}
		}
	}
	return kinds
}

// ObjectMeta's fields that Slim takes out: labels (11) and managedFields
// (17), both length-delimited; and annotations (12), a map as labels is.
const (
	labelsField        = 11
	annotationsField   = 12
	managedFieldsField = 17
)

// meta rewrites meta, an ObjectMeta's encoding, in place as s says, and
// returns it with the labels it took out. It parses meta whole before it
// changes anything: what it cannot parse it leaves as it was, and so it
// does a meta with a labels or annotations entry that reads past its
// end (see Object), which could read what was taken out.
func (s Slim) meta(meta []byte) ([]byte, map[string]string) {
	drop := func(f protoField) bool {
		return f.wire == 2 && (s.ManagedFields && f.num == managedFieldsField || s.Labels != nil && f.num == labelsField)
	}
	dropped, labels := 0, 0
	for i := 0; i < len(meta); {
		f, ok := field(meta, i)
		if !ok {
			return meta, nil
		}
		if f.wire == 2 && (f.num == labelsField || f.num == annotationsField) {
			if _, _, ok := labelEntry(meta[f.value:f.end]); !ok {
				return meta, nil
			}
		}
		if drop(f) {
			dropped++
			if f.num == labelsField {
				labels++
			}
		}
		i = f.end
	}
	if dropped == 0 {
		return meta, nil
	}
	var out map[string]string
	if labels > 0 {
		out = make(map[string]string, labels)
		s.Labels.mu.Lock()
		defer s.Labels.mu.Unlock()
	}
	w := 0
	for i := 0; i < len(meta); {
		f, _ := field(meta, i)
		switch {
		case !drop(f):
			w += copy(meta[w:], meta[i:f.end])
		case f.num == labelsField:
			k, v, _ := labelEntry(meta[f.value:f.end])
			out[s.Labels.string(k)] = s.Labels.string(v)
		}
		i = f.end
	}
	return meta[:w], out
}

// labelEntry parses one entry of ObjectMeta's labels or annotations map:
// its key (field 1) and value (field 2), either absent when empty; false
// unless every field of e is length-delimited and inside e.
func labelEntry(e []byte) (k, v []byte, ok bool) {
	for i := 0; i < len(e); {
		f, ok := field(e, i)
		if !ok || f.wire != 2 {
			return nil, nil, false
		}
		switch f.num {
		case 1:
			k = e[f.value:f.end]
		case 2:
			v = e[f.value:f.end]
		}
		i = f.end
	}
	return k, v, true
}

// Interner hands out one string for equal byte strings, up to a bound:
// the strings of decoded labels, which repeat over the objects of a
// cache. Strings are immutable, so sharing them changes nothing a reader
// can see. It keeps what it holds for its lifetime: at most
// maxInterned strings of at most maxInternedLen bytes; others are
// allocated as decoded.
type Interner struct {
	mu sync.Mutex
	m  map[string]string
}

const (
	maxInterned    = 4096
	maxInternedLen = 128
)

// NewInterner returns an empty Interner.
func NewInterner() *Interner { return &Interner{m: make(map[string]string)} }

// String returns b as a string, the held one when there is one.
func (in *Interner) String(b []byte) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.string(b)
}

// string returns b as a string, the held one when there is one. Called
// with in.mu held.
func (in *Interner) string(b []byte) string {
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in.m) < maxInterned && len(s) <= maxInternedLen {
		in.m[s] = s
	}
	return s
}

// rewrite replaces the value of f, a length-delimited field of msg, by
// what change makes of it in place (no longer than it was), and returns
// msg shortened by what change removed.
func rewrite(msg []byte, f protoField, change func([]byte) []byte) []byte {
	value := change(msg[f.value:f.end])
	if len(value) == f.end-f.value {
		return msg
	}
	// The new length's varint is no longer than the old one, so it fits
	// where that one was; the value and the rest move back.
	w := f.key
	w += binary.PutUvarint(msg[w:], uint64(len(value)))
	w += copy(msg[w:], value)
	w += copy(msg[w:], msg[f.end:])
	return msg[:w]
}

// protoField is one field of a message: its number and wire type, where
// its key ends (and its length starts, for wire type 2), where its value
// starts and where it ends.
type protoField struct {
	num             uint64
	wire            byte
	key, value, end int
}

// field parses the field of b that starts at i; false if b is not valid
// protobuf there, or has a field number the generated decoders would read
// as another (they take it as an int32).
func field(b []byte, i int) (protoField, bool) {
	k, n := binary.Uvarint(b[i:])
	if n <= 0 || k>>3 > math.MaxInt32 {
		return protoField{}, false
	}
	f := protoField{num: k >> 3, wire: byte(k & 7), key: i + n}
	switch f.wire {
	case 0:
		_, m := binary.Uvarint(b[f.key:])
		if m <= 0 {
			return protoField{}, false
		}
		f.value, f.end = f.key, f.key+m
	case 1:
		f.value, f.end = f.key, f.key+8
	case 5:
		f.value, f.end = f.key, f.key+4
	case 2:
		l, m := binary.Uvarint(b[f.key:])
		if m <= 0 || l > uint64(len(b)-f.key-m) {
			return protoField{}, false
		}
		f.value = f.key + m
		f.end = f.value + int(l)
	default: // groups: not used by Kubernetes
		return protoField{}, false
	}
	if f.end > len(b) {
		return protoField{}, false
	}
	return f, true
}

// Unwrap returns the kind and the encoding of the object in data, an
// object in the protobuf serializer's envelope (see Envelope); ok is false
// when data is not one.
func Unwrap(data []byte) (kind, raw []byte, ok bool) {
	kind, unknown, f, ok := envelope(data)
	if !ok {
		return nil, nil, false
	}
	return kind, unknown[f.value:f.end], true
}

// envelope reads data as the protobuf serializer's envelope: it returns
// the kind its TypeMeta names, the runtime.Unknown after the magic bytes,
// and that Unknown's field 2 (Raw); ok is false when data is not an
// envelope or has no Raw. Where a field repeats, the last one counts,
// as in the generated decoder.
func envelope(data []byte) (kind, unknown []byte, raw protoField, ok bool) {
	if !bytes.HasPrefix(data, magic) {
		return nil, nil, protoField{}, false
	}
	unknown = data[len(magic):]
	for i := 0; i < len(unknown); {
		f, fine := field(unknown, i)
		if !fine || f.num == 0 || f.num <= 4 && f.wire != 2 { // TypeMeta, Raw, ContentEncoding, ContentType
			return nil, nil, protoField{}, false
		}
		switch f.num {
		case 1: // TypeMeta
			if kind, fine = typeMetaKind(unknown[f.value:f.end], kind); !fine {
				return nil, nil, protoField{}, false
			}
		case 2: // Raw
			raw, ok = f, true
		}
		i = f.end
	}
	if !ok {
		return nil, nil, protoField{}, false
	}
	return kind, unknown, raw, true
}
