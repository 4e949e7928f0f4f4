// Package protolist decodes a Kubernetes protobuf list response while it
// is read, one item at a time, instead of after the whole body arrived.
//
// A list of 10,000 ConfigMaps is about 5 MB and takes tens of
// milliseconds to transfer and as long again to decode. client-go's
// REST client reads the whole body before it decodes any of it; decoding
// each item as soon as its bytes are in overlaps the two, with the HTTP/2
// stream's flow-control window (4 MiB in golang.org/x/net/http2) letting
// the server send on meanwhile.
//
// The format is apimachinery's protobuf serializer's: the four bytes
// "k8s\x00", then a runtime.Unknown whose field 2 (Raw) holds the list
// message, whose field 1 is its ListMeta and whose field 2, repeated, its
// items.
package protolist

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
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
	// token can be acted on while the page's items are still arriving.
	Meta func(*metav1.ListMeta)
	// Discard leaves the items out of the returned List: Decoded is then
	// the only one to see each, and New may return the same value every
	// time, to decode every item into.
	Discard bool
	// Slim, when not nil, slims each item's encoding before it is decoded
	// (Slim.Object) and sets the labels it took out on the decoded item,
	// before Decoded. The items' kind must be one of ObjectKinds.
	Slim *Slim
}

// DecodeBody decodes a list answer's body: in protobuf, item by item
// while it is read (Decode, with h); otherwise (a server that answered in
// JSON) with other, given the body from its start.
func DecodeBody(body io.Reader, h Hooks, other func(io.Reader) (runtime.Object, error)) (runtime.Object, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	if IsProtobuf(br) {
		return Decode(br, h)
	}
	return other(br)
}

// Decode reads one protobuf-encoded list from r and decodes each item as
// soon as it has been read, calling h's hooks. It reads r to its end.
func Decode(r io.Reader, h Hooks) (*List, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 64<<10), left: -1, hooks: h}
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(d.r, head); err != nil {
		return nil, fmt.Errorf("reading the protobuf list: %w", unexpected(err))
	}
	if !bytes.Equal(head, magic) {
		return nil, errors.New("reading the protobuf list: the response is not protobuf")
	}
	list := &List{}
	var sawRaw bool
	// runtime.Unknown's fields, until the body ends.
	for {
		field, wire, err := d.key()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch {
		case field == 2 && wire == 2: // Raw: the list
			n, err := d.uvarint()
			if err != nil {
				return nil, err
			}
			if err := d.list(int64(n), list); err != nil {
				return nil, err
			}
			sawRaw = true
		case field == 3 && wire == 2: // ContentEncoding: must be empty
			b, err := d.bytes()
			if err != nil {
				return nil, err
			}
			if len(b) > 0 {
				return nil, fmt.Errorf("reading the protobuf list: content encoding %q is not supported", b)
			}
		default:
			if err := d.skip(wire); err != nil {
				return nil, err
			}
		}
	}
	if !sawRaw {
		return nil, errors.New("reading the protobuf list: the response holds no object")
	}
	return list, nil
}

// decoder reads protobuf fields from r; left is how many bytes of the
// current message are still to be read, or -1 outside a message.
type decoder struct {
	r     *bufio.Reader
	left  int64
	buf   []byte // the bytes of the last field read, reused
	hooks Hooks
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
		switch {
		case field == 1 && wire == 2: // ListMeta
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
		case field == 2 && wire == 2: // one item
			b, err := d.bytes()
			if err != nil {
				return err
			}
			var labels map[string]string
			if d.hooks.Slim != nil {
				b, labels = d.hooks.Slim.Object(b) // b is d.buf, the decoder's own
			}
			item := d.hooks.New()
			if err := item.Unmarshal(b); err != nil {
				return fmt.Errorf("decoding item %d of the list: %w", len(l.Items), err)
			}
			if labels != nil {
				if err := SetLabels(item, labels); err != nil {
					return fmt.Errorf("decoding item %d of the list: %w", len(l.Items), err)
				}
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
		return errors.New("reading the protobuf list: a field runs past the end of the list")
	}
	return nil
}

// key reads a field's key: its number and wire type. At the end of the
// body it returns io.EOF.
func (d *decoder) key() (field uint64, wire byte, err error) {
	k, err := d.uvarint()
	if err != nil {
		return 0, 0, err
	}
	return k >> 3, byte(k & 7), nil
}

func (d *decoder) uvarint() (uint64, error) {
	var n int64
	v, err := binary.ReadUvarint(byteCounter{d, &n})
	d.consumed(n)
	return v, err
}

// bytes reads a length-delimited field's bytes into d.buf, valid until the
// next call.
func (d *decoder) bytes() ([]byte, error) {
	n, err := d.uvarint()
	if err != nil {
		return nil, unexpected(err)
	}
	if d.left >= 0 && int64(n) > d.left {
		return nil, errors.New("reading the protobuf list: a field runs past the end of the list")
	}
	if uint64(cap(d.buf)) < n {
		d.buf = make([]byte, n)
	}
	b := d.buf[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, fmt.Errorf("reading the protobuf list: %w", unexpected(err))
	}
	d.consumed(int64(n))
	return b, nil
}

// skip reads past a field of wire type wire whose key was read.
func (d *decoder) skip(wire byte) error {
	var n int64
	switch wire {
	case 0:
		_, err := d.uvarint()
		return unexpected(err)
	case 1:
		n = 8
	case 5:
		n = 4
	case 2:
		l, err := d.uvarint()
		if err != nil {
			return unexpected(err)
		}
		n = int64(l)
	default:
		return fmt.Errorf("reading the protobuf list: unsupported wire type %d", wire)
	}
	if _, err := d.r.Discard(int(n)); err != nil {
		return fmt.Errorf("reading the protobuf list: %w", unexpected(err))
	}
	d.consumed(n)
	return nil
}

func (d *decoder) consumed(n int64) {
	if d.left >= 0 {
		d.left -= n
	}
}

// byteCounter counts the bytes binary.ReadUvarint reads.
type byteCounter struct {
	d *decoder
	n *int64
}

func (c byteCounter) ReadByte() (byte, error) {
	b, err := c.d.r.ReadByte()
	if err == nil {
		*c.n++
	}
	return b, err
}

// unexpected turns an end of input in the middle of a message into
// io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// SetLabels sets labels, which a Slim took out of obj's encoding, on obj
// decoded.
func SetLabels(obj runtime.Object, labels map[string]string) error {
	a, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	a.SetLabels(labels)
	return nil
}
