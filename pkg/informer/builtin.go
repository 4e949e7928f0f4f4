package informer

import (
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

// For[T] picks an informer's backend in one place, from T. A built-in
// type (internal/kube.BuiltIn) is listed and watched in protobuf, with
// JSON accepted (in JSON if Config's ContentType says so), through
// client-go's REST client of its group version, each list decoded item by
// item while it is read (builtInInformer); any other Go type is listed and
// watched as JSON decoded straight into it (typedInformer, decode.go).
// client-go's REST client would read a whole list before decoding any of
// it; what decoding while reading buys is measured in docs/design.md.
// Watches decode each event as it comes, as the clientset's do.

// builtInInformer returns a builder of informers, not started, of
// client-go's type rt (kind gvk) whose lists are decoded while they are
// read, the first of them in pipelined pages (protolist.Pages). Called
// under c.mu.
func (c *Cache) builtInInformer(rt reflect.Type, gvk schema.GroupVersionKind) (builder, error) {
	if _, ok := reflect.New(rt.Elem()).Interface().(protolist.Item); !ok {
		return nil, fmt.Errorf("%v has no protobuf decoder", rt)
	}
	newList, err := listTypeOf(kubescheme.Scheme, rt, gvk)
	if err != nil {
		return nil, err
	}
	// Protobuf unless the rest config asks for JSON; decodeList reads
	// either.
	rc, err := c.restFor(gvk.GroupVersion(), c.clients.Config.ContentType != runtime.ContentTypeJSON)
	if err != nil {
		return nil, err
	}
	resync := c.resyncFor(rt)
	newItem := func() protolist.Item { return reflect.New(rt.Elem()).Interface().(protolist.Item) }
	return func(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions), share *sharer) (cache.SharedIndexInformer, error) {
		return restInformer(rc, rt, gvr, ns, tweak, resync, func(ctx context.Context, opts metav1.ListOptions, request func(metav1.ListOptions) *rest.Request) (runtime.Object, error) {
			hooks := func() protolist.Hooks {
				h := protolist.Hooks{New: newItem}
				if share != nil {
					d := &decodeSharing{s: share}
					h.New = func() protolist.Item {
						item := newItem()
						d.prepare(item)
						return item
					}
					h.Decoded = func(item protolist.Item) { d.decoded(item) }
				}
				return h
			}
			page := func(ctx context.Context, opts metav1.ListOptions, meta func(*metav1.ListMeta)) (runtime.Object, error) {
				body, err := request(opts).Stream(ctx)
				if err != nil {
					return nil, err
				}
				defer body.Close()
				h := hooks()
				h.Meta = meta
				return decodeList(body, h, newList)
			}
			if opts.Limit != 0 || opts.Continue != "" || opts.ResourceVersion != "" {
				return page(ctx, opts, nil)
			}
			opts.Limit = initialPage
			return protolist.Pages(ctx, opts, pagesInFlight, page)
		}), nil
	}, nil
}

// decodeList decodes a list response body: protobuf while it is read,
// with h's hooks, or, when the server answered in JSON, once it is all in.
func decodeList(body io.Reader, h protolist.Hooks, newList func() runtime.Object) (runtime.Object, error) {
	return protolist.DecodeBody(body, h, func(r io.Reader) (runtime.Object, error) {
		raw, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("reading the list: %w", err)
		}
		list := newList()
		if _, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(raw, nil, list); err != nil {
			return nil, fmt.Errorf("decoding the list: %w", err)
		}
		return list, nil
	})
}

// The initial list of a built-in type (a consistent one: resourceVersion
// "", no page size, consistentList) is asked for in pages of initialPage
// objects, and the request for each next page is sent as soon as the
// page before it has given its continue token, which kube-apiserver
// writes before the page's items. The server then prepares and sends the
// next page while this one is still being read and decoded, where one
// response is prepared whole before its first byte (111 ms of 478 ms for
// 50,000 ConfigMaps in one traced bench/e2e run). Every page of a list is
// read at the first page's resourceVersion, so the result is the same
// consistent list (protolist.Pages). At most pagesInFlight requests are
// out at once.
// Reading 50,000 ConfigMaps, median of 9 rounds of bench/cmd/listtime
// (-pages 5000,10000,25000): one list decoded while read 266.5 ms; pages
// of 5,000 254.5 ms, of 10,000 202.7 ms (0.76x), of 25,000 214.1 ms.
// Smaller pages cost more requests than they save (2,000: 1.6x one list,
// in another run).
const (
	initialPage   = 10000
	pagesInFlight = 3
)
