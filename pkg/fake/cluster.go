package fake

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/watch"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Host is the host of the URLs in Config. Requests never leave the
// process: the transport is the fake itself.
const Host = "http://fake.invalid"

const (
	defaultHistory = 1000 // watch events kept for watches that resume
	defaultBuffer  = 100  // events a watcher may fall behind before it is closed
)

// Options configure New. The zero value serves client-go's built-in kinds
// and holds no object.
type Options struct {
	// Scheme is the scheme whose kinds the fake serves, and into which it
	// decodes requests. Nil means client-go's kubernetes/scheme.Scheme
	// (the built-in types). A custom type needs its kind, and its List
	// kind for typed clients, registered together with the built-in
	// types.
	Scheme *runtime.Scheme
	// Objects are stored in the fake before it serves requests, as if
	// created in order, with their status kept. Each is a pointer to a Go
	// type registered in Scheme (or an *unstructured.Unstructured of such
	// a kind) with a name, and a namespace when its kind is namespaced.
	// Their resourceVersion is replaced; uid, creationTimestamp and
	// generation are set when empty. An object may carry a
	// deletionTimestamp only if it has finalizers. New copies the
	// objects; the caller keeps its own.
	Objects []runtime.Object
	// ClusterScoped are the custom kinds served without a namespace. The
	// built-in cluster-scoped kinds (Namespace, Node, PersistentVolume,
	// ClusterRole, StorageClass, CustomResourceDefinition and the others
	// kube-apiserver serves cluster-wide) need not be listed; every other
	// kind is namespaced.
	ClusterScoped []schema.GroupVersionKind
	// ShardSelector makes the fake answer lists, watches and
	// deletecollections that carry a shardSelector
	// (metav1.ListOptions.ShardSelector, KEP-5866) as kube-apiserver does
	// with its feature gate ShardedListAndWatch on: they select only the
	// objects whose uid or namespace hashes into one of its ranges, a list
	// echoes the selector it applied in metadata.shardInfo, and a selector
	// that does not parse is a 400 BadRequest (see the package doc for the
	// syntax). False, the default as the gate's, ignores the parameter and
	// echoes nothing, as kube-apiserver does with the gate off.
	ShardSelector bool
	// TypeConverter is the schema server-side apply merges the custom
	// kinds by (those outside client-go's kubernetes/scheme):
	// CRDTypeConverter of their CRD manifests, or the NewTypeConverter
	// that applyconfiguration-gen writes for their Go types. Nil deduces
	// the schema from each object, as kube-apiserver does for a CRD
	// without one: every object merges key by key, every list is atomic.
	// Built-in kinds always use client-go's OpenAPI models.
	TypeConverter managedfields.TypeConverter
}

// Cluster is an in-memory Kubernetes API server, reached through an
// http.RoundTripper: Config and HTTPClient hand out clients that talk to
// it. It is safe for concurrent use.
type Cluster struct {
	scheme  *runtime.Scheme
	decoder runtime.Decoder
	media   []runtime.SerializerInfo // the media types of answers, JSON first (content.go)
	res     *resources

	mu       sync.Mutex
	rv       uint64                                                    // the last resourceVersion handed out
	objects  map[schema.GroupVersionResource]map[string]runtime.Object // by namespace/name
	writes   []Request
	listers  map[listerKey]cache.Indexer
	watchers map[*watcher]struct{}
	history  []event // the last historyLimit events, oldest first
	// compacted is the newest resourceVersion no longer in history: a
	// watch may resume from any resourceVersion at or after it.
	compacted    uint64
	historyLimit int
	bufferSize   int
	sharding     bool // Options.ShardSelector
	// typeConverter is Options.TypeConverter; fieldManagers are built
	// at a resource's first write (fieldmanager.go).
	typeConverter managedfields.TypeConverter
	fieldManagers map[schema.GroupVersionResource]fieldManagers
}

// Request is one write the fake answered, accepted or refused.
type Request struct {
	// Verb is "create", "update", "patch", "apply", "delete" or
	// "deletecollection".
	Verb string
	// Resource is the resource in the URL.
	Resource schema.GroupVersionResource
	// Subresource is "" or "status".
	Subresource string
	// Namespace is the namespace in the URL, empty for cluster-scoped
	// resources and for requests across all namespaces.
	Namespace string
	// Name is the name in the URL, or for a create the name in the body
	// (empty with generateName: Object holds the generated name).
	Name string
	// PatchType is the Content-Type of a patch or apply, else empty.
	PatchType types.PatchType
	// Body is the request body as JSON: objects sent as protobuf or YAML
	// are re-encoded, patches are as sent (apply YAML turned into JSON),
	// for deletes it is the DeleteOptions if the client sent any. A body
	// the fake could not decode is kept as sent.
	Body []byte
	// DryRun is true for dryRun=All: the answer was computed, nothing
	// stored.
	DryRun bool
	// FieldManager and Force are the query parameters of the same name.
	FieldManager string
	Force        bool
	// Err is the error the fake answered with (an *apierrors.StatusError),
	// nil on success.
	Err error
	// Object is the resulting object, typed, for successful creates,
	// updates, patches and applies; nil for deletes and errors.
	Object runtime.Object
}

// New returns a Cluster holding opts.Objects. It fails if a
// ClusterScoped kind is not in the scheme, or an object is not a pointer to
// a kind the scheme serves, lacks a name or namespace, or repeats another.
func New(opts Options) (*Cluster, error) {
	o := opts
	if o.Scheme == nil {
		o.Scheme = kubescheme.Scheme
	}
	codecs := serializer.NewCodecFactory(o.Scheme)
	c := &Cluster{
		scheme:       o.Scheme,
		decoder:      codecs.UniversalDeserializer(),
		res:          newResources(o.Scheme, o.ClusterScoped),
		objects:      map[schema.GroupVersionResource]map[string]runtime.Object{},
		listers:      map[listerKey]cache.Indexer{},
		watchers:     map[*watcher]struct{}{},
		historyLimit: defaultHistory,
		bufferSize:   defaultBuffer,
		sharding:     o.ShardSelector,

		typeConverter: o.TypeConverter,
		fieldManagers: map[schema.GroupVersionResource]fieldManagers{},
	}
	for _, info := range codecs.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON || info.MediaType == runtime.ContentTypeProtobuf {
			c.media = append(c.media, info)
		}
	}
	for _, gvk := range o.ClusterScoped {
		if _, ok := c.res.byGVK[gvk]; !ok {
			return nil, fmt.Errorf("fake: Options.ClusterScoped: %s: the scheme has no such kind: register it in Options.Scheme", gvk)
		}
	}
	for i, obj := range o.Objects {
		if err := c.seed(obj); err != nil {
			return nil, fmt.Errorf("fake: Options.Objects[%d] (%T): %w", i, obj, err)
		}
	}
	return c, nil
}

// seed stores one of Options.Objects.
func (c *Cluster) seed(obj runtime.Object) error {
	if obj == nil {
		return errors.New("object is nil")
	}
	if v := reflect.ValueOf(obj); v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return errors.New("not a non-nil pointer to a struct: pass &obj")
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		typed, err := c.scheme.New(u.GroupVersionKind())
		if err != nil {
			return fmt.Errorf("kind %s is not in the scheme: %w", u.GroupVersionKind(), err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), typed); err != nil {
			return err
		}
		obj = typed
	}
	r, ok := c.res.forObject(c.scheme, obj)
	if !ok {
		return errors.New("the type is not a kind the scheme serves: register it in fake.Options.Scheme")
	}
	obj = obj.DeepCopyObject()
	m, _ := meta.Accessor(obj)
	switch {
	case m.GetName() == "":
		return errors.New("metadata.name is empty")
	case r.namespaced && m.GetNamespace() == "":
		return fmt.Errorf("%s is namespaced and metadata.namespace is empty", r.gvk.Kind)
	case !r.namespaced && m.GetNamespace() != "":
		return fmt.Errorf("%s is cluster-scoped and metadata.namespace is %q (Options.ClusterScoped decides for custom kinds)", r.gvk.Kind, m.GetNamespace())
	case m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0:
		return errors.New("metadata.deletionTimestamp is set without finalizers: such an object would already be gone")
	}
	key := objectKey(m.GetNamespace(), m.GetName())
	if _, exists := c.objects[r.gvr][key]; exists {
		return fmt.Errorf("%s %s is given twice", r.gvk.Kind, key)
	}
	if m.GetUID() == "" {
		m.SetUID(newUID())
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(now())
	}
	if m.GetGeneration() == 0 {
		m.SetGeneration(1)
	}
	m.SetResourceVersion("")
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.commit(r, watch.Added, nil, obj)
	return err
}

// RoundTrip answers req as kube-apiserver would, from the fake's state.
// It implements http.RoundTripper; watch responses stream until the
// request's context ends or the client closes the body.
func (c *Cluster) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.serve(req)
}

var _ http.RoundTripper = (*Cluster)(nil)

// Config returns a new rest.Config for the fake: Host is Host, the
// transport is the Cluster, and client-side rate limiting is off. Callers
// may change the copy (ContentType, for example) and build any client-go
// client on it, with rest.HTTPClientFor or NewForConfig.
func (c *Cluster) Config() *rest.Config {
	return &rest.Config{Host: Host, Transport: c, QPS: -1}
}

// HTTPClient returns an http.Client whose transport is the Cluster.
func (c *Cluster) HTTPClient() *http.Client {
	return &http.Client{Transport: c}
}

// RESTMapper maps every kind the fake serves to its resource (the
// lowercase plural of the kind) and scope.
func (c *Cluster) RESTMapper() meta.RESTMapper { return c.res.mapper }

// Writes returns every write the fake answered, accepted or refused, in
// the order it answered them. The slice and its objects are copies.
func (c *Cluster) Writes() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Request, len(c.writes))
	for i, w := range c.writes {
		if w.Object != nil {
			w.Object = w.Object.DeepCopyObject()
		}
		out[i] = w
	}
	return out
}

// ResetWrites forgets the writes recorded so far.
func (c *Cluster) ResetWrites() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = nil
}

// Get copies the stored object key (Namespace empty for cluster-scoped
// kinds) into obj, a pointer to a typed Go struct the scheme serves (not
// unstructured). The kind is obj's. If there is no such object, the error
// is a NotFound (apierrors.IsNotFound).
func (c *Cluster) Get(key types.NamespacedName, obj runtime.Object) error {
	r, ok := c.res.forObject(c.scheme, obj)
	if !ok {
		return fmt.Errorf("fake: Get(%T): the type is not a typed kind the scheme serves", obj)
	}
	c.mu.Lock()
	stored, ok := c.objects[r.gvr][objectKey(key.Namespace, key.Name)]
	if ok {
		stored = stored.DeepCopyObject()
	}
	c.mu.Unlock()
	if !ok {
		return apierrors.NewNotFound(r.groupResource(), key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(stored).Elem())
	return nil
}
