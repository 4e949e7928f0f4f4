package informer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/internal/protolist"
)

// Built-in types are listed in protobuf and each list is decoded while it
// is read (internal/protolist), when Clients.Config is set and does not
// name a ContentType other than protobuf; otherwise through client-go's
// SharedInformerFactory and the clientset. client-go's REST client reads a
// whole list before it decodes any of it. Reading 10,000 ConfigMaps
// (4.9 MB) on a 2-core VM, median of 7 rounds: list, then decode 89.6 ms;
// decoded while read 50.9 ms (0.57x); WatchList, as client-go's
// reflectors fill a cache by default, 91.0 ms (1.02x). The command is
// bench/cmd/listtime. Watches decode each event as it comes, as the
// clientset's do.

// streamsLists reports whether built-in types are listed in protobuf and
// decoded while read: Clients.Config is set and asks for protobuf or
// leaves the content type to ctrlkit.
func (c *Cache) streamsLists() bool {
	cfg := c.clients.Config
	return cfg != nil && (cfg.ContentType == "" || cfg.ContentType == runtime.ContentTypeProtobuf)
}

// builtInInformer returns a builder of informers, not started, of
// client-go's type rt (kind gvk) whose lists are decoded while they are
// read. Called under c.mu.
func (c *Cache) builtInInformer(rt reflect.Type, gvk schema.GroupVersionKind) (builder, error) {
	if _, ok := reflect.New(rt.Elem()).Interface().(protolist.Item); !ok {
		return nil, fmt.Errorf("%v has no protobuf decoder", rt)
	}
	newList, err := listTypeOf(kubescheme.Scheme, rt, gvk)
	if err != nil {
		return nil, err
	}
	rc, err := c.restFor(gvk.GroupVersion(), true)
	if err != nil {
		return nil, err
	}
	resync := c.resyncFor(rt)
	newItem := func() protolist.Item { return reflect.New(rt.Elem()).Interface().(protolist.Item) }
	return func(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions), share *sharer) (cache.SharedIndexInformer, error) {
		return restInformer(rc, rt, gvr, ns, tweak, resync, func(ctx context.Context, req *rest.Request) (runtime.Object, error) {
			body, err := req.Stream(ctx)
			if err != nil {
				return nil, err
			}
			defer body.Close()
			if share == nil {
				return decodeList(body, newItem, nil, newList)
			}
			d := &decodeSharing{s: share}
			return decodeList(body, func() protolist.Item {
				item := newItem()
				d.prepare(item)
				return item
			}, func(item protolist.Item) { d.decoded(item) }, newList)
		}), nil
	}, nil
}

// decodeList decodes a list response body: protobuf while it is read,
// each item made by newItem and given to decoded (when not nil) once
// decoded, or, when the server answered in JSON, once it is all in.
func decodeList(body io.Reader, newItem func() protolist.Item, decoded func(protolist.Item), newList func() runtime.Object) (runtime.Object, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	if protolist.IsProtobuf(br) {
		return protolist.Decode(br, newItem, decoded)
	}
	raw, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("reading the list: %w", err)
	}
	list := newList()
	if _, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(raw, nil, list); err != nil {
		return nil, fmt.Errorf("decoding the list: %w", err)
	}
	return list, nil
}
