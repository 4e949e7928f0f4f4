package shard

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/internal/kube"
	"github.com/ctrlkit/ctrlkit/internal/protolist"
)

// The sharder's informer of its namespace's Leases sees every renewal of
// every member, and of the sharder Lease: 2N+2 events a second with N
// members renewing every 500 ms. Decoded by client-go, each event is 36
// allocations (BenchmarkLeaseEvent: the WatchEvent and a copy of its
// object, and the whole Lease with its metadata, managedFields and spec),
// all garbage at once, in the size classes of the objects the replica
// caches. That steady
// garbage, not anything the sharder keeps, left the most room between
// the cached objects of the sharder's replica (bench/shard/README.md):
// with 4 replicas, a second informer of the Leases on every replica added
// about 1 MiB of heap in use per replica after every key was written six
// times, at the same live heap, whether its events were cached or only
// decoded. leaseListWatch's watches decode each event by hand into the
// Lease slimLease keeps, from a buffer they reuse.

// leaseListWatch lists and watches the Leases of namespace through rc, a
// REST client on which every request names its path (SharderOptions.REST).
// Lists, rare (at start and after a watch expires), are decoded by
// client-go; watch events are decoded by leaseEvents.
func leaseListWatch(rc rest.Interface, namespace string) cache.ListerWatcher {
	path := resourcePath(coordinationv1.SchemeGroupVersion.WithResource("leases"), namespace, "")
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			raw, err := rc.Get().AbsPath(path...).SpecificallyVersionedParams(&o, kubescheme.ParameterCodec, coordinationv1.SchemeGroupVersion).
				SetHeader("Accept", runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON).DoRaw(ctx)
			if err != nil {
				return nil, err
			}
			var l coordinationv1.LeaseList
			if _, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(raw, nil, &l); err != nil {
				return nil, fmt.Errorf("decoding the list of Leases: %w", err)
			}
			return &l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			body, err := rc.Get().AbsPath(path...).SpecificallyVersionedParams(&o, kubescheme.ParameterCodec, coordinationv1.SchemeGroupVersion).
				SetHeader("Accept", runtime.ContentTypeProtobuf+";stream=watch,"+runtime.ContentTypeJSON+";stream=watch").Stream(ctx)
			if err != nil {
				return nil, err
			}
			return watch.NewStreamWatcher(newLeaseEvents(body),
				apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding")), nil
		},
	}
	// A list, then a watch: the WatchList stream would send the initial
	// Leases as watch events, which leaseEvents does not mark.
	return cache.ToListWatcherWithWatchListSemantics(lw, kube.NoWatchList{})
}

// leaseEvents reads a protobuf watch stream of Leases (watch.Decoder):
// length-prefixed WatchEvent messages, each holding its object in the
// protobuf serializer's envelope. Strings that repeat from one renewal to
// the next (names, namespace, holders) are kept once. A server that
// answers in JSON (its first byte is '{', where a protobuf frame's length
// starts with a zero byte) is read by client-go's decoder.
type leaseEvents struct {
	body   io.ReadCloser
	r      *bufio.Reader
	json   *restwatch.Decoder // nil until the stream shows itself JSON
	close  sync.Once
	buf    []byte // the last frame: Decode's only
	intern *protolist.Interner
}

func newLeaseEvents(body io.ReadCloser) *leaseEvents {
	return &leaseEvents{body: body, r: bufio.NewReader(body), intern: protolist.NewInterner()}
}

// maxLeaseEvent bounds one event's frame: a Lease is well under a
// kilobyte; a frame this long is a broken stream.
const maxLeaseEvent = 16 << 20

// Decode returns the stream's next event.
func (d *leaseEvents) Decode() (watch.EventType, runtime.Object, error) {
	if d.json == nil {
		if b, err := d.r.Peek(1); err == nil && b[0] == '{' {
			d.json = restwatch.NewDecoder(streaming.NewDecoder(json.Framer.NewFrameReader(io.NopCloser(d.r)),
				json.NewSerializerWithOptions(json.DefaultMetaFactory, kubescheme.Scheme, kubescheme.Scheme, json.SerializerOptions{})),
				kubescheme.Codecs.UniversalDeserializer())
		}
	}
	if d.json != nil {
		return d.json.Decode()
	}
	var n [4]byte
	if _, err := io.ReadFull(d.r, n[:]); err != nil {
		return "", nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxLeaseEvent {
		return "", nil, fmt.Errorf("a watch event of %d bytes", size)
	}
	if cap(d.buf) < int(size) {
		d.buf = make([]byte, size)
	}
	frame := d.buf[:size]
	if _, err := io.ReadFull(d.r, frame); err != nil {
		return "", nil, err
	}
	var typ watch.EventType
	var object []byte
	if err := fields(frame, func(num uint64, _ uint64, data []byte) error {
		switch {
		case num == 1 && data != nil:
			switch string(data) { // compared, not allocated
			case string(watch.Added):
				typ = watch.Added
			case string(watch.Modified):
				typ = watch.Modified
			case string(watch.Deleted):
				typ = watch.Deleted
			case string(watch.Bookmark):
				typ = watch.Bookmark
			case string(watch.Error):
				typ = watch.Error
			default:
				return fmt.Errorf("a watch event of type %q", data)
			}
		case num == 2 && data != nil: // RawExtension: its field 1, Raw
			return fields(data, func(num uint64, _ uint64, raw []byte) error {
				if num == 1 {
					object = raw
				}
				return nil
			})
		}
		return nil
	}); err != nil {
		return "", nil, fmt.Errorf("decoding a watch event: %w", err)
	}
	if typ == "" || object == nil {
		return "", nil, errors.New("decoding a watch event: no type or no object")
	}
	kind, raw, ok := protolist.Unwrap(object)
	if !ok || string(kind) != "Lease" {
		// An ERROR event's Status, or an answer this decoder does not
		// know: client-go decodes it, from bytes of its own.
		obj, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(append([]byte(nil), object...), nil, nil)
		if err != nil {
			return "", nil, fmt.Errorf("decoding a watch event's object: %w", err)
		}
		return typ, obj, nil
	}
	l, err := d.lease(raw)
	if err != nil {
		return "", nil, err
	}
	return typ, l, nil
}

// lease decodes a Lease message (k8s.io/api/coordination/v1's
// generated.proto) into what slimLease keeps: name, namespace,
// resourceVersion and spec. The Lease and the values its spec points to
// are one allocation (leaseBox), its resourceVersion a second.
func (d *leaseEvents) lease(b []byte) (*coordinationv1.Lease, error) {
	x := &leaseBox{}
	l, s := &x.lease, &x.lease.Spec
	err := fields(b, func(num uint64, _ uint64, data []byte) error {
		switch num {
		case 1: // metadata
			return fields(data, func(num uint64, _ uint64, data []byte) error {
				switch num {
				case 1:
					l.Name = d.intern.String(data)
				case 3:
					l.Namespace = d.intern.String(data)
				case 6:
					l.ResourceVersion = string(data)
				}
				return nil
			})
		case 2: // spec
			return fields(data, func(num uint64, v uint64, data []byte) error {
				var err error
				switch num {
				case 1:
					x.holder = d.intern.String(data)
					s.HolderIdentity = &x.holder
				case 2:
					x.duration = int32(v)
					s.LeaseDurationSeconds = &x.duration
				case 3:
					err = microTime(data, &x.acquire)
					s.AcquireTime = &x.acquire
				case 4:
					err = microTime(data, &x.renew)
					s.RenewTime = &x.renew
				case 5:
					x.transitions = int32(v)
					s.LeaseTransitions = &x.transitions
				case 6:
					x.strategy = coordinationv1.CoordinatedLeaseStrategy(d.intern.String(data))
					s.Strategy = &x.strategy
				case 7:
					x.preferred = d.intern.String(data)
					s.PreferredHolder = &x.preferred
				}
				return err
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decoding a watched Lease: %w", err)
	}
	return l, nil
}

// leaseBox holds a decoded Lease and the values its spec points to.
type leaseBox struct {
	lease                 coordinationv1.Lease
	holder, preferred     string
	strategy              coordinationv1.CoordinatedLeaseStrategy
	duration, transitions int32
	acquire, renew        metav1.MicroTime
}

// microTime decodes a MicroTime message, seconds (1) and nanos (2),
// into t.
func microTime(b []byte, t *metav1.MicroTime) error {
	var sec, nsec int64
	if err := fields(b, func(num uint64, v uint64, _ []byte) error {
		switch num {
		case 1:
			sec = int64(v)
		case 2:
			nsec = int64(int32(v))
		}
		return nil
	}); err != nil {
		return err
	}
	t.Time = time.Unix(sec, nsec)
	return nil
}

// Close closes the stream; a Decode blocked on it returns.
func (d *leaseEvents) Close() { d.close.Do(func() { _ = d.body.Close() }) }
