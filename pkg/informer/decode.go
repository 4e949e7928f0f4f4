package informer

import (
	"context"
	stdjson "encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/watch"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/ctrlkit/ctrlkit/internal/kube"
)

// Custom types are listed and watched as JSON through a REST client of
// their group version and decoded straight into their Go type and its List
// type, as a generated clientset would: no unstructured maps in between.
//
// Why lists are decoded again item by item when they fail: with typed
// decoding, one object that does not fit the Go type fails the decode of
// the whole list; client-go's reflector would then relist forever (backing
// off up to 30s, logging "Failed to watch" through HandleError) and the
// informer would never sync, or never update again after a relist. A watch
// event that does not decode makes client-go's StreamWatcher send an Error
// event (500, "unable to decode an event from the watch stream"), the
// reflector logs "watch ended with error" and lists again (ctrlkit's
// informers list rather than use WatchList, initiallist.go): so every
// undecodable object ends up in ListWithContextFunc's fallback, which
// leaves it out and counts it.

// typedClients are what custom-type informers list and watch through: one
// REST client per group version over one HTTP client, and the decode
// error counts. The zero value is ready; restFor is called from declare's
// mk, under Cache.mu.
type typedClients struct {
	http   *http.Client
	cfg    *rest.Config
	codecs serializer.CodecFactory
	rests  map[schema.GroupVersion]rest.Interface
	// protos are built-in types' REST clients, in protobuf (builtin.go).
	protos map[schema.GroupVersion]rest.Interface

	errs decodeErrors
}

// restFor returns the REST client of gv, built from c.clients.Config:
// with proto, one of client-go's group versions that sends and accepts
// protobuf (builtin.go); without, one that sends and accepts JSON and
// decodes it into the Go types of c's scheme without conversion. Called
// under c.mu.
func (c *Cache) restFor(gv schema.GroupVersion, proto bool) (rest.Interface, error) {
	t, err := c.typedHTTP()
	if err != nil {
		return nil, err
	}
	clients, codecs := t.rests, t.codecs
	if proto {
		clients, codecs = t.protos, kubescheme.Codecs
	}
	if rc, ok := clients[gv]; ok {
		return rc, nil
	}
	rc, err := kube.RESTClient(t.cfg, t.http, kube.WithoutConversion(codecs), gv, proto)
	if err != nil {
		return nil, err
	}
	clients[gv] = rc
	return rc, nil
}

// typedHTTP returns c.typed, its HTTP client built from
// c.clients.Config if it was not yet. Called under c.mu.
func (c *Cache) typedHTTP() (*typedClients, error) {
	t := &c.typed
	if t.http == nil {
		cfg := rest.CopyConfig(c.clients.Config)
		kube.ShareRateLimiter(cfg) // one budget for every group version
		t.http, t.cfg = c.clients.HTTPClient, cfg
		t.codecs = serializer.NewCodecFactory(c.scheme)
		t.rests = make(map[schema.GroupVersion]rest.Interface)
		t.protos = make(map[schema.GroupVersion]rest.Interface)
	}
	return t, nil
}

// typedInformer returns a builder of informers, not started, of the
// custom Go type rt (kind gvk) that decode JSON straight into rt, for a
// resource, a namespace and a list options tweak. The informers are named
// name in logs and metrics. Called under c.mu.
func (c *Cache) typedInformer(rt reflect.Type, gvk schema.GroupVersionKind, name string) (builder, error) {
	newList, err := listTypeOf(c.scheme, rt, gvk)
	if err != nil {
		return nil, err
	}
	rc, err := c.restFor(gvk.GroupVersion(), false)
	if err != nil {
		return nil, err
	}
	decoder := c.typed.codecs.UniversalDeserializer()
	failures := c.typed.errs.counter(name)
	resync := c.resyncFor(rt)
	return func(gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions), _ *sharer) (cache.SharedIndexInformer, error) {
		return typedInformer(rc, decoder, newList, failures, rt, gvr, ns, tweak, name, resync), nil
	}, nil
}

// typedInformer is one informer of Cache.typedInformer's builder.
func typedInformer(rc rest.Interface, decoder runtime.Decoder, newList func() runtime.Object, failures *atomic.Uint64,
	rt reflect.Type, gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions), name string, resync time.Duration) cache.SharedIndexInformer {
	var inf cache.SharedIndexInformer // set below, before anything lists
	inf = restInformer(rc, rt, gvr, ns, tweak, resync, func(ctx context.Context, opts metav1.ListOptions, request func(metav1.ListOptions) *rest.Request) (runtime.Object, error) {
		list := newList()
		res := request(opts).Do(ctx)
		err := res.Into(list)
		switch {
		case err == nil:
			return list, nil
		case res.Error() != nil: // the request failed, not the decode
			return nil, err
		}
		body, _ := res.Raw()
		list = newList()
		bad, derr := decodeEach(decoder, body, list, rt)
		if derr != nil {
			return nil, fmt.Errorf("decoding the list of %s: %w (item by item: %w)", gvrString(gvr), err, derr)
		}
		log := klog.FromContext(ctx)
		var kept []runtime.Object
		for _, b := range bad {
			failures.Add(1)
			// A relist must not make an object that stopped decoding
			// look deleted: the cache keeps the last version that did.
			if old := lastGood(inf, b); old != nil {
				kept = append(kept, old)
				log.Error(b.err, "Keeping in the cache the last version that decoded of an object that no longer decodes into its Go type",
					"informer", name, "namespace", b.namespace, "name", b.name, "resourceVersion", old.(metav1.Object).GetResourceVersion())
				continue
			}
			log.Error(b.err, "Leaving out of the cache an object that does not decode into its Go type",
				"informer", name, "namespace", b.namespace, "name", b.name)
		}
		if len(kept) > 0 {
			items, err := meta.ExtractList(list)
			if err != nil {
				return nil, err
			}
			if err := meta.SetList(list, append(items, kept...)); err != nil {
				return nil, err
			}
		}
		return list, nil
	})
	return inf
}

// restInformer returns an informer, not started, of Go type rt over
// resource gvr in namespace ns ("" for all) through rc, every list and
// watch's options edited by tweak first. list answers a list with those
// options; request makes the request of a list with options as given.
// Watches decode each event as it comes.
func restInformer(rc rest.Interface, rt reflect.Type, gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions),
	resync time.Duration, list func(ctx context.Context, opts metav1.ListOptions, request func(metav1.ListOptions) *rest.Request) (runtime.Object, error)) cache.SharedIndexInformer {
	request := func(opts metav1.ListOptions) *rest.Request {
		return rc.Get().Namespace(ns).Resource(gvr.Resource).VersionedParams(&opts, metav1.ParameterCodec)
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&opts)
			}
			return list(ctx, opts, request)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			if tweak != nil {
				tweak(&opts)
			}
			return request(opts).Watch(ctx)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, kube.NoWatchList{}),
		reflect.New(rt.Elem()).Interface().(runtime.Object),
		cache.SharedIndexInformerOptions{
			ResyncPeriod:      resync,
			Indexers:          indexersFor(ns),
			ObjectDescription: gvr.String(),
		})
}

// lastGood returns the object inf's store holds for b, or nil. inf is nil
// only before the informer exists, when nothing lists.
func lastGood(inf cache.SharedIndexInformer, b undecodable) runtime.Object {
	if inf == nil || b.name == "" {
		return nil
	}
	key := b.name
	if b.namespace != "" {
		key = b.namespace + "/" + b.name
	}
	obj, ok, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	o, _ := obj.(runtime.Object)
	return o
}

// listTypeOf returns a constructor of the List type of kind gvk, whose
// items are of Go type rt: the kind gvk.Kind+"List" in scheme, as
// controller-gen and client-go's code generators name it.
func listTypeOf(scheme *runtime.Scheme, rt reflect.Type, gvk schema.GroupVersionKind) (func() runtime.Object, error) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	fix := fmt.Sprintf("register %[1]sList next to %[1]s, e.g. scheme.AddKnownTypes(%[2]s, &%[3]s{}, &%[3]sList{}) (controller-gen's AddToScheme does)",
		gvk.Kind, gvk.GroupVersion(), rt.Elem().Name())
	obj, err := scheme.New(listGVK)
	if err != nil {
		return nil, fmt.Errorf("the list kind %s is not in the scheme: %s", listGVK, fix)
	}
	lt := reflect.TypeOf(obj)
	items, ok := lt.Elem().FieldByName("Items")
	if !meta.IsListType(obj) || !ok || items.Type.Kind() != reflect.Slice || items.Type.Elem() != rt.Elem() {
		return nil, fmt.Errorf("the list kind %s is %v, which has no field Items []%v: %s", listGVK, lt, rt.Elem(), fix)
	}
	return func() runtime.Object { return reflect.New(lt.Elem()).Interface().(runtime.Object) }, nil
}

// undecodable is an item of a list that did not decode.
type undecodable struct {
	namespace, name string
	err             error
}

// decodeEach decodes body, a JSON list of objects of Go type rt, into list
// item by item, leaving out and returning the items that do not decode. It
// fails only if body is not a JSON list.
func decodeEach(decoder runtime.Decoder, body []byte, list runtime.Object, rt reflect.Type) ([]undecodable, error) {
	var raw struct {
		Metadata metav1.ListMeta      `json:"metadata"`
		Items    []stdjson.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(raw.Metadata.ResourceVersion)
	lm.SetContinue(raw.Metadata.Continue)
	lm.SetRemainingItemCount(raw.Metadata.RemainingItemCount)
	var bad []undecodable
	items := make([]runtime.Object, 0, len(raw.Items))
	for _, item := range raw.Items {
		obj := reflect.New(rt.Elem()).Interface().(runtime.Object)
		if _, _, err := decoder.Decode(item, nil, obj); err != nil {
			var m struct {
				Metadata struct {
					Namespace string `json:"namespace"`
					Name      string `json:"name"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(item, &m) // for the log only: best effort
			bad = append(bad, undecodable{namespace: m.Metadata.Namespace, name: m.Metadata.Name, err: err})
			continue
		}
		items = append(items, obj)
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	return bad, nil
}

// decodeErrors counts, per informer name, the objects its lists left out
// because they did not decode. Safe for concurrent use.
type decodeErrors struct {
	mu     sync.Mutex
	counts map[string]*atomic.Uint64
}

// counter returns the count of informer name, created at 0.
func (d *decodeErrors) counter(name string) *atomic.Uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		d.counts = make(map[string]*atomic.Uint64)
	}
	n, ok := d.counts[name]
	if !ok {
		n = new(atomic.Uint64)
		d.counts[name] = n
	}
	return n
}

// forget drops the count of informer name, removed.
func (d *decodeErrors) forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.counts, name)
}

// withKind returns a transform that sets the apiVersion and kind of
// decoded objects to gvk: the decoder clears them from watch events, and
// the dynamic path always set them.
func withKind(gvk schema.GroupVersionKind) cache.TransformFunc {
	return func(obj any) (any, error) {
		if o, ok := obj.(runtime.Object); ok {
			o.GetObjectKind().SetGroupVersionKind(gvk)
		}
		return obj, nil
	}
}
