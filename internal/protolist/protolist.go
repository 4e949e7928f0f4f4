// Package protolist decodes a Kubernetes protobuf list response while it
// is read, one item at a time, instead of after the whole body arrived.
//
// A list of thousands of objects is megabytes, whose transfer and
// decoding each take a while. client-go's REST client reads the whole
// body before it decodes any of it; decoding each item as soon as its
// bytes are in overlaps the two, with the HTTP/2 stream's flow-control
// window (4 MiB in golang.org/x/net/http2) letting the server send on
// meanwhile.
//
// The format is apimachinery's protobuf serializer's: the four bytes
// "k8s\x00", then a runtime.Unknown whose field 2 (Raw) holds the list
// message, whose field 1 is its ListMeta and whose field 2, repeated, its
// items.
package protolist

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// magic starts every protobuf-encoded Kubernetes object.
var magic = []byte{0x6b, 0x38, 0x73, 0x00}

// Item is an API type with its generated protobuf decoder, such as
// *corev1.ConfigMap.
type Item interface {
	runtime.Object
	Unmarshal([]byte) error
}

// List is a decoded list: its ListMeta and its items, each its own
// allocation, so that a cache holding some of them keeps nothing else of
// the list alive (client-go's reflector copies the items of a typed list
// out of it for the same reason; it leaves items that are already
// runtime.Objects as they are).
type List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []runtime.Object `json:"items"`
}

// GetObjectKind implements runtime.Object.
func (l *List) GetObjectKind() schema.ObjectKind { return &l.TypeMeta }

// DeepCopyObject implements runtime.Object.
func (l *List) DeepCopyObject() runtime.Object {
	c := &List{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	if l.Items != nil {
		c.Items = make([]runtime.Object, len(l.Items))
		for i, o := range l.Items {
			c.Items[i] = o.DeepCopyObject()
		}
	}
	return c
}

// IsProtobuf reports whether what r holds next starts like a protobuf
// object, without consuming it.
func IsProtobuf(r *bufio.Reader) bool {
	head, err := r.Peek(len(magic))
	return err == nil && bytes.Equal(head, magic)
}

// Hooks are what Decode calls as it reads.
type Hooks struct {
	// New returns the value to decode the next item into; it is required.
	// It may return a value with fields already set: the generated
	// decoders add a map field's entries to a map that is there rather
	// than make one, which lets a caller reuse a map that decoded and was
	// then replaced by another object's equal map.
	New func() Item
	// Decoded, if not nil, is called with each item once it is decoded.
	Decoded func(Item)
	// Meta, if not nil, is called with the list's metadata as soon as it
	// is decoded. kube-apiserver writes it before the items, so a continue
	// token can be acted on while the page's items are still arriving. A
	// list whose metadata comes in several fields (they merge, as in the
	// generated decoder) calls it after each.
	Meta func(*metav1.ListMeta)
	// Discard leaves the items out of the returned List: Decoded is then
	// the only one to see each, and New may return the same value every
	// time, to decode every item into.
	Discard bool
}

// DecodeBody decodes a list answer's body: in protobuf, item by item
// while it is read (Decode, with h); otherwise (a server that answered in
// JSON) with other, given the body from its start.
func DecodeBody(body io.Reader, h Hooks, other func(io.Reader) (runtime.Object, error)) (runtime.Object, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	if IsProtobuf(br) {
		l, err := Decode(br, h)
		if err != nil {
			return nil, err // not a nil *List in a non-nil interface
		}
		return l, nil
	}
	return other(br)
}

// Decode reads one protobuf-encoded list from r and decodes each item as
// soon as it has been read, calling h's hooks. It reads r to its end.
//
// It reads the envelope and the list as apimachinery's generated
// decoders do and refuses what they refuse. It does not compare the
// TypeMeta (which must decode) with the items' type: the caller chose
// that by its request. It also refuses three bodies they take: one
// without a list, one with a ContentEncoding, and one with more than one
// list (the generated decoder keeps the last; Decode has by then handed
// the first one's items to the hooks). A length read from the wire is
// never allocated before its bytes have arrived.
func Decode(r io.Reader, h Hooks) (*List, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 64<<10), left: -1, hooks: h}
	list, err := d.decode()
	if err != nil {
		return nil, fmt.Errorf("reading the protobuf list: %w", err)
	}
	return list, nil
}

// decode reads the magic bytes and the runtime.Unknown that follows.
func (d *decoder) decode() (*List, error) {
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(d.r, head); err != nil {
		return nil, unexpected(err)
	}
	if !bytes.Equal(head, magic) {
		return nil, errors.New("the response is not protobuf")
	}
	list := &List{}
	var sawRaw bool
	var encoding string // the last ContentEncoding, which the generated decoder keeps
	// runtime.Unknown's fields, until the body ends.
	for {
		field, wire, err := d.key()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if field <= 4 && wire != 2 { // TypeMeta, Raw, ContentEncoding, ContentType
			return nil, fmt.Errorf("field %d of the envelope has wire type %d", field, wire)
		}
		switch field {
		case 1: // TypeMeta
			b, err := d.bytes()
			if err != nil {
				return nil, err
			}
			if err := d.typeMeta.Unmarshal(b); err != nil {
				return nil, fmt.Errorf("decoding the list's type: %w", err)
			}
		case 2: // Raw: the list
			if sawRaw {
				return nil, errors.New("the response holds more than one object")
			}
			sawRaw = true
			n, err := d.length()
			if err != nil {
				return nil, err
			}
			if err := d.list(n, list); err != nil {
				return nil, err
			}
		case 3: // ContentEncoding: must be empty
			b, err := d.bytes()
			if err != nil {
				return nil, err
			}
			encoding = string(b)
		default:
			if err := d.skip(wire); err != nil {
				return nil, err
			}
		}
	}
	if encoding != "" {
		return nil, fmt.Errorf("content encoding %q is not supported", encoding)
	}
	if !sawRaw {
		return nil, errors.New("the response holds no object")
	}
	return list, nil
}

// decoder reads protobuf fields from r; left is how many bytes of the
// current message are still to be read, or -1 outside a message.
type decoder struct {
	r        *bufio.Reader
	left     int64
	buf      []byte // the bytes of the last field read, reused
	hooks    Hooks
	typeMeta runtime.TypeMeta
}

// list decodes a list message of n bytes into l.
func (d *decoder) list(n int64, l *List) error {
	d.left = n
	defer func() { d.left = -1 }()
	for d.left > 0 {
		field, wire, err := d.key()
		if err != nil {
			return unexpected(err)
		}
		if field <= 2 && wire != 2 { // ListMeta, items
			return fmt.Errorf("field %d of the list has wire type %d", field, wire)
		}
		switch field {
		case 1: // ListMeta
			b, err := d.bytes()
			if err != nil {
				return err
			}
			if err := l.ListMeta.Unmarshal(b); err != nil {
				return fmt.Errorf("decoding the list's metadata: %w", err)
			}
			if d.hooks.Meta != nil {
				d.hooks.Meta(&l.ListMeta)
			}
		case 2: // one item
			b, err := d.bytes()
			if err != nil {
				return err
			}
			item := d.hooks.New()
			if err := item.Unmarshal(b); err != nil {
				return fmt.Errorf("decoding item %d of the list: %w", len(l.Items), err)
			}
			if d.hooks.Decoded != nil {
				d.hooks.Decoded(item)
			}
			if !d.hooks.Discard {
				l.Items = append(l.Items, item)
			}
		default:
			if err := d.skip(wire); err != nil {
				return err
			}
		}
	}
	if d.left < 0 {
		return errPastList
	}
	return nil
}

var errPastList = errors.New("a field runs past the end of the list")

// key reads a field's key: its number, as the generated decoders take it
// (the key's bits above the wire type, as an int32), and its wire type.
// At the end of the body it returns io.EOF.
func (d *decoder) key() (field int32, wire byte, err error) {
	k, err := d.uvarint()
	if err != nil {
		return 0, 0, err
	}
	field, wire = int32(k>>3), byte(k&7)
	if wire == 4 {
		return 0, 0, errors.New("an end of group outside a group")
	}
	if field <= 0 {
		return 0, 0, fmt.Errorf("illegal field number %d", field)
	}
	return field, wire, nil
}

// uvarint reads a varint of at most 10 bytes (bits past the 64th are
// dropped, as the generated decoders drop them), not past the end of the
// current message. It returns io.EOF if the input ends before its first
// byte.
func (d *decoder) uvarint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if d.left == 0 {
			return 0, errPastList
		}
		b, err := d.r.ReadByte()
		if err != nil {
			if shift > 0 {
				return 0, unexpected(err)
			}
			return 0, err
		}
		d.consumed(1)
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("a varint longer than 10 bytes")
}

// length reads a length-delimited field's length: not negative as an
// int64, not past the end of the current message.
func (d *decoder) length() (int64, error) {
	v, err := d.uvarint()
	if err != nil {
		return 0, unexpected(err)
	}
	n := int64(v)
	if n < 0 {
		return 0, fmt.Errorf("a field of length %d", v)
	}
	if d.left >= 0 && n > d.left {
		return 0, errPastList
	}
	return n, nil
}

// readChunk bounds how far a buffer grows ahead of the bytes that arrived
// to fill it: a length read from the wire is only a claim.
const readChunk = 64 << 10

// bytes reads a length-delimited field's bytes into d.buf, valid until the
// next call. A field longer than d.buf can hold is read as it arrives,
// the buffer growing to at most twice what has arrived, or readChunk.
func (d *decoder) bytes() ([]byte, error) {
	n, err := d.length()
	if err != nil {
		return nil, err
	}
	b := d.buf[:0]
	for int64(len(b)) < n {
		if len(b) == cap(b) { // grow by what has arrived, not by what n claims
			b = append(make([]byte, 0, min(n, int64(max(2*len(b), readChunk)))), b...)
		}
		m, err := io.ReadFull(d.r, b[len(b):min(int64(cap(b)), n)])
		b = b[:len(b)+m]
		if err != nil {
			return nil, unexpected(err)
		}
	}
	d.buf = b
	d.consumed(n)
	return b, nil
}

// skip reads past a field of wire type wire whose key was read. A group
// (wire type 3) is skipped to its end as the generated decoders skip it:
// to the end of group that balances it, whatever its field number.
func (d *decoder) skip(wire byte) error {
	for depth := 0; ; {
		var n int64
		switch wire {
		case 0:
			if _, err := d.uvarint(); err != nil {
				return unexpected(err)
			}
		case 1:
			n = 8
		case 5:
			n = 4
		case 2:
			l, err := d.length()
			if err != nil {
				return err
			}
			n = l
		case 3:
			depth++
		case 4:
			if depth == 0 {
				return errors.New("an end of group outside a group")
			}
			depth--
		default:
			return fmt.Errorf("unsupported wire type %d", wire)
		}
		if d.left >= 0 && n > d.left {
			return errPastList
		}
		if _, err := d.r.Discard(int(n)); err != nil {
			return unexpected(err)
		}
		d.consumed(n)
		if depth == 0 {
			return nil
		}
		k, err := d.uvarint()
		if err != nil {
			return unexpected(err)
		}
		wire = byte(k & 7)
	}
}

func (d *decoder) consumed(n int64) {
	if d.left >= 0 {
		d.left -= n
	}
}

// unexpected turns an end of input in the middle of a message into
// io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
