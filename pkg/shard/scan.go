package shard

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlkit/ctrlkit/internal/protolist"
)

// list calls fn with every labelled object of slot r, a page at a time:
// its item and what the sharder reads of it.
//
// Through opts.REST, each page is decoded as it arrives, and of each
// object only what a snap holds: a scan reads every object of the ring
// whenever the members change, and decoding each page whole (every
// object's metadata, its label, annotation and managedFields among them)
// was most of the garbage the sharder made during a move, in the size
// classes of the objects the replica caches meanwhile.
func (s *Sharder) list(ctx context.Context, r int, fn func(item, snap)) error {
	sl := s.slots[r]
	page := func(cont string) (string, error) {
		if s.opts.REST == nil {
			l, err := resourceClient(s.opts.Metadata, sl.res.Resource, sl.ns).List(ctx,
				metav1.ListOptions{LabelSelector: s.shardLabel, Limit: scanPage, Continue: cont})
			if err != nil {
				return "", err
			}
			s.each(r, l, fn)
			return l.Continue, nil
		}
		req := s.opts.REST.Get().AbsPath(resourcePath(sl.res.Resource, sl.ns, "")...).
			Param("labelSelector", s.shardLabel).Param("limit", strconv.Itoa(scanPage)).SetHeader("Accept", metadataListAccept)
		if cont != "" {
			req = req.Param("continue", cont)
		}
		body, err := req.Stream(ctx)
		if err != nil {
			return "", err
		}
		defer body.Close()
		m := &metaItem{shardLabel: s.shardLabel, drainLabel: s.drainLabel}
		intern := map[string]string{}
		l, err := protolist.DecodeBody(body, protolist.Hooks{
			New:     func() protolist.Item { return m },
			Decoded: func(protolist.Item) { fn(m.scanned(s, r, intern)) },
			Discard: true,
		}, func(answer io.Reader) (runtime.Object, error) { // a server that answers this list in JSON
			var l metav1.PartialObjectMetadataList
			if err := json.NewDecoder(answer).Decode(&l); err != nil {
				return nil, fmt.Errorf("decoding the answer: %w", err)
			}
			s.each(r, &l, fn)
			return &l, nil
		})
		if err != nil {
			return "", err
		}
		lm, err := apimeta.ListAccessor(l)
		if err != nil {
			return "", err
		}
		return lm.GetContinue(), nil
	}
	cont := ""
	for {
		var err error
		if cont, err = page(cont); err != nil {
			return fmt.Errorf("listing %s: %w", sl.res.Resource, err)
		}
		if cont == "" {
			return nil
		}
	}
}

// each calls fn with every object of l, of slot r.
func (s *Sharder) each(r int, l *metav1.PartialObjectMetadataList, fn func(item, snap)) {
	for i := range l.Items {
		m := &l.Items[i]
		fn(item{r: r, namespace: m.Namespace, name: m.Name}, s.snapOf(m))
	}
}

// metadataListAccept asks for a list of metadata only, as the metadata
// client does.
const metadataListAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

// metaItem is what list decodes each object of a protobuf page into, one
// value for every object: the fields of its metadata that a snap needs,
// as views into the bytes it was decoded from (valid until the next
// object is read), and nothing else.
type metaItem struct {
	shardLabel, drainLabel string // the label keys looked for

	namespace, name, rv, shard, drain []byte
	ownerAPIVersion, ownerKind        []byte
	ownerName                         []byte
	controlled, deleting              bool
}

var _ protolist.Item = (*metaItem)(nil)

// GetObjectKind implements runtime.Object.
func (m *metaItem) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (m *metaItem) DeepCopyObject() runtime.Object {
	c := *m
	for _, b := range []*[]byte{&c.namespace, &c.name, &c.rv, &c.shard, &c.drain, &c.ownerAPIVersion, &c.ownerKind, &c.ownerName} {
		*b = append([]byte(nil), *b...)
	}
	return &c
}

// Unmarshal reads a PartialObjectMetadata message (field 1: its
// ObjectMeta), keeping what a snap needs.
func (m *metaItem) Unmarshal(b []byte) error {
	*m = metaItem{shardLabel: m.shardLabel, drainLabel: m.drainLabel}
	return fields(b, func(num uint64, _ uint64, data []byte) error {
		if num != 1 || data == nil {
			return nil
		}
		return fields(data, m.objectMeta)
	})
}

// objectMeta reads one field of an ObjectMeta (generated.proto in
// k8s.io/apimachinery/pkg/apis/meta/v1).
func (m *metaItem) objectMeta(num uint64, _ uint64, data []byte) error {
	switch num {
	case 1:
		m.name = data
	case 3:
		m.namespace = data
	case 6:
		m.rv = data
	case 9: // deletionTimestamp
		m.deleting = true
	case 11: // a label: key 1, value 2
		var k, v []byte
		if err := fields(data, func(num uint64, _ uint64, data []byte) error {
			switch num {
			case 1:
				k = data
			case 2:
				v = data
			}
			return nil
		}); err != nil {
			return err
		}
		switch string(k) {
		case m.shardLabel:
			m.shard = v
		case m.drainLabel:
			m.drain = v
		}
	case 13: // an owner reference: kind 1, name 3, apiVersion 5, controller 6
		var kind, name, apiVersion []byte
		var controller bool
		if err := fields(data, func(num uint64, v uint64, data []byte) error {
			switch num {
			case 1:
				kind = data
			case 3:
				name = data
			case 5:
				apiVersion = data
			case 6:
				controller = v != 0
			}
			return nil
		}); err != nil {
			return err
		}
		if controller && !m.controlled {
			m.controlled, m.ownerKind, m.ownerName, m.ownerAPIVersion = true, kind, name, apiVersion
		}
	}
	return nil
}

// scanned returns the item and snap of the object m holds, of slot r,
// with strings of their own: the namespace, the label values and the
// owner's kind and apiVersion interned in intern (one map per page: they
// repeat), the name and resourceVersion made for it.
func (m *metaItem) scanned(s *Sharder, r int, intern map[string]string) (item, snap) {
	str := func(b []byte) string {
		if v, ok := intern[string(b)]; ok {
			return v
		}
		v := string(b)
		intern[v] = v
		return v
	}
	it := item{r: r, namespace: str(m.namespace), name: string(m.name)}
	sn := snap{rv: string(m.rv), shard: str(m.shard), drain: str(m.drain), deleting: m.deleting}
	if m.controlled {
		sn.owner, sn.hasOwner = s.ownerItem(&metav1.OwnerReference{APIVersion: str(m.ownerAPIVersion), Kind: str(m.ownerKind),
			Name: string(m.ownerName)}, it.namespace)
	}
	return it, sn
}

// fields calls fn with each field of the protobuf message b: its number,
// its value when it is a varint, its bytes when it is length-delimited
// (nil otherwise).
func fields(b []byte, fn func(num uint64, v uint64, data []byte) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return errMalformed
		}
		b = b[n:]
		var v uint64
		var data []byte
		switch key & 7 {
		case 0:
			if v, n = binary.Uvarint(b); n <= 0 {
				return errMalformed
			}
			b = b[n:]
		case 1, 5:
			size := 8
			if key&7 == 5 {
				size = 4
			}
			if len(b) < size {
				return errMalformed
			}
			b = b[size:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errMalformed
			}
			data, b = b[n:n+int(l)], b[n+int(l):]
			if data == nil {
				data = []byte{}
			}
		default:
			return fmt.Errorf("decoding an object's metadata: unsupported protobuf wire type %d", key&7)
		}
		if err := fn(key>>3, v, data); err != nil {
			return err
		}
	}
	return nil
}

var errMalformed = errors.New("decoding an object's metadata: malformed protobuf")
