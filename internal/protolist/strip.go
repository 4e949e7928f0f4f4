package protolist

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A cache that strips metadata.managedFields still pays for decoding
// them: each entry is a struct, four strings, a time and its FieldsV1
// bytes, about 300 bytes in six allocations, all garbage as soon as the
// object is cached. An object written by three field managers carries
// three entries. That garbage is allocated between the pieces of the
// objects the cache keeps, and once it is collected the spans they share
// stay in use, part empty. In bench-shard's single replica, the
// ConfigMaps its sharder labels carry about three entries where the
// unsharded replica's carry one; in service that replica allocated 2.8
// times as many managedFields pieces and held 1.3 MiB more of spans in
// the 16 to 48-byte size classes, for the same live bytes in them (a
// heap dump, per size class). Removing the entries from the encoded
// object before it is decoded allocates nothing.

// managedFieldsKey is the key of ObjectMeta's field 17, managedFields,
// length-delimited (wire type 2): 17<<3 | 2 = 138, as a varint.
var managedFieldsKey = []byte{0x8a, 0x01}

// StripManagedFields removes metadata.managedFields from obj, the
// protobuf encoding of an API object whose field 1 is its ObjectMeta (as
// in every object type of k8s.io/api; ObjectKinds names them). obj is
// rewritten in place, and the shortened slice returned. Input it cannot parse is
// returned unchanged, for the decoder to report.
func StripManagedFields(obj []byte) []byte {
	for i := 0; i < len(obj); {
		f, ok := field(obj, i)
		if !ok {
			return obj
		}
		if f.num == 1 && f.wire == 2 {
			return rewrite(obj, f, stripMeta)
		}
		i = f.end
	}
	return obj
}

// StripManagedFieldsEnvelope does what StripManagedFields does to an
// object in the protobuf serializer's envelope: the bytes "k8s\x00",
// then a runtime.Unknown whose field 1 is its TypeMeta and whose field 2
// (Raw) holds the object. It strips only objects whose kind is in
// objectKinds: kinds whose field 1 is their ObjectMeta (ObjectKinds).
// Anything else (JSON, say) is returned unchanged.
func StripManagedFieldsEnvelope(data []byte, objectKinds map[string]bool) []byte {
	if !bytes.HasPrefix(data, magic) {
		return data
	}
	unknown := data[len(magic):]
	var kind []byte
	for i := 0; i < len(unknown); {
		f, ok := field(unknown, i)
		if !ok {
			return data
		}
		switch {
		case f.num == 1 && f.wire == 2: // TypeMeta
			kind = typeMetaKind(unknown[f.value:f.end])
		case f.num == 2 && f.wire == 2: // Raw, written after TypeMeta
			if !objectKinds[string(kind)] {
				return data
			}
			return data[:len(magic)+len(rewrite(unknown, f, StripManagedFields))]
		}
		i = f.end
	}
	return data
}

// typeMetaKind returns the kind of tm, a TypeMeta's encoding (field 2),
// or nil.
func typeMetaKind(tm []byte) []byte {
	for i := 0; i < len(tm); {
		f, ok := field(tm, i)
		if !ok {
			return nil
		}
		if f.num == 2 && f.wire == 2 {
			return tm[f.value:f.end]
		}
		i = f.end
	}
	return nil
}

// ObjectKinds returns the kinds of gv in scheme whose Go type has its
// ObjectMeta as protobuf field 1, those StripManagedFields may be given.
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

// stripMeta removes the managedFields entries of meta, an ObjectMeta's
// encoding, in place.
func stripMeta(meta []byte) []byte {
	if !bytes.Contains(meta, managedFieldsKey) {
		return meta // none, or a ListMeta
	}
	w := 0
	for i := 0; i < len(meta); {
		f, ok := field(meta, i)
		if !ok {
			return meta
		}
		if f.num != 17 || f.wire != 2 {
			w += copy(meta[w:], meta[i:f.end])
		}
		i = f.end
	}
	return meta[:w]
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
// protobuf there.
func field(b []byte, i int) (protoField, bool) {
	k, n := binary.Uvarint(b[i:])
	if n <= 0 {
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
