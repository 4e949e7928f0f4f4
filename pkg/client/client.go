package client

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/ctrlkit/ctrlkit/internal/kube"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// Object is a pointer to an API type in the client's scheme, built-in such
// as *appsv1.Deployment or custom such as *v1alpha1.Website.
type Object interface {
	metav1.Object
	runtime.Object
}

// DefaultReadYourWritesTimeout bounds the wait of a write for the cache when
// Options.ReadYourWrites.Timeout is 0.
const DefaultReadYourWritesTimeout = 10 * time.Second

// Options configure a Client. Scheme, Mapper and FieldManager have
// defaults; Cache turns read-your-own-writes on.
type Options struct {
	// Scheme maps Go types to kinds. Nil means client-go's scheme
	// (built-in types only); add custom types with their AddToScheme.
	Scheme *runtime.Scheme
	// Mapper maps kinds to resources. Required.
	Mapper meta.RESTMapper
	// HTTPClient sends the requests, as it is. Nil means
	// rest.HTTPClientFor(leader.FenceConfig(cfg)), whose writes are
	// fenced; build a client given here from leader.FenceConfig for the
	// same.
	HTTPClient *http.Client
	// FieldManager names this client in metadata.managedFields on every
	// write; server-side apply requires one. Empty means "ctrlkit".
	FieldManager string
	// Cache is the informer cache whose listers must reflect this client's
	// writes (see the package doc). Nil means no waiting: a lister read
	// right after a write may return the object as it was before.
	Cache *informer.Cache
	// ReadYourWrites tunes the wait for Cache.
	ReadYourWrites ReadYourWrites
}

// ReadYourWrites tunes how a write waits for the cache (Options.Cache).
type ReadYourWrites struct {
	// Disabled turns the wait off: writes return as soon as the API
	// server answers.
	Disabled bool
	// Timeout bounds the wait of one write. 0 means
	// DefaultReadYourWritesTimeout. A write whose wait times out returns a
	// *CacheLagError: the write itself succeeded.
	Timeout time.Duration
}

// WriteOptions change how a Client writes; see Client.With.
type WriteOptions struct {
	// DryRun asks the API server to validate and answer each write
	// without persisting it (dryRun=All). A dry run does not wait for
	// the cache: nothing changed.
	DryRun bool
	// FieldManager, when set, replaces Options.FieldManager.
	FieldManager string
	// Force makes server-side apply take ownership of fields another
	// manager owns instead of failing with a conflict. It applies to
	// Apply only.
	Force bool
}

// Client writes objects of every type in its scheme, built-in or custom,
// with no generated clientset, and reads them from the API server when a
// read must bypass the cache. Create it with New, or take a manager's
// (manager.Manager.Client). Safe for concurrent use.
type Client struct {
	*shared
	wo WriteOptions
}

// shared is what every view of a Client (With, Status) has in common.
type shared struct {
	cfg     *rest.Config
	http    *http.Client
	scheme  *runtime.Scheme
	codecs  serializer.CodecFactory
	mapper  meta.RESTMapper
	manager string
	cache   *informer.Cache
	ryow    ReadYourWrites

	mu    sync.Mutex
	rests map[restKey]rest.Interface
}

type restKey struct {
	gv    schema.GroupVersion
	proto bool
}

// New returns a Client that talks to the API server at cfg. It fails when
// cfg or Options.Mapper is missing or an option is out of range. It does
// not contact the API server. Unless Options.HTTPClient is set, writes
// are fenced (leader.FenceConfig): a request whose context belongs to a
// term of leadership that is over is not sent.
func New(cfg *rest.Config, opts Options) (*Client, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("client: rest config is nil: pass one from manager.GetConfig or clientcmd")
	case opts.Mapper == nil:
		return nil, errors.New("client: Options.Mapper is nil: pass a meta.RESTMapper, e.g. the manager's (Manager.RESTMapper)")
	case opts.ReadYourWrites.Timeout < 0:
		return nil, fmt.Errorf("client: Options.ReadYourWrites.Timeout is %v: use 0 for the default (%v), or set Disabled", opts.ReadYourWrites.Timeout, DefaultReadYourWritesTimeout)
	}
	cfg = rest.CopyConfig(cfg)
	kube.ShareRateLimiter(cfg) // one budget for every group version
	hc := opts.HTTPClient
	if hc == nil {
		var err error
		if hc, err = rest.HTTPClientFor(leader.FenceConfig(cfg)); err != nil {
			return nil, fmt.Errorf("client: building the HTTP client: %w", err)
		}
	}
	scheme := cmp.Or(opts.Scheme, kubescheme.Scheme)
	s := &shared{
		cfg:     cfg,
		http:    hc,
		scheme:  scheme,
		codecs:  serializer.NewCodecFactory(scheme),
		mapper:  opts.Mapper,
		manager: cmp.Or(opts.FieldManager, "ctrlkit"),
		cache:   opts.Cache,
		ryow:    opts.ReadYourWrites,
		rests:   make(map[restKey]rest.Interface),
	}
	if s.ryow.Timeout == 0 {
		s.ryow.Timeout = DefaultReadYourWritesTimeout
	}
	return &Client{shared: s}, nil
}

// With returns a Client that shares c's connections and cache but writes
// with wo: for example c.With(WriteOptions{DryRun: true}) for dry runs,
// or c.With(WriteOptions{Force: true}) to apply with force.
func (c *Client) With(wo WriteOptions) *Client {
	return &Client{shared: c.shared, wo: wo}
}

// fieldManager is the field manager of c's writes.
func (c *Client) fieldManager() string { return cmp.Or(c.wo.FieldManager, c.manager) }

// target is what a request needs to know about an object's type.
type target struct {
	gvk        schema.GroupVersionKind
	gvr        schema.GroupVersionResource
	namespaced bool
	rest       rest.Interface
	proto      bool // built-in: sent and answered as protobuf
}

// targetFor resolves obj's Go type to its kind and resource.
func (s *shared) targetFor(obj runtime.Object) (target, error) {
	gvks, _, err := s.scheme.ObjectKinds(obj)
	if err != nil {
		return target{}, fmt.Errorf("client: %T is not in the client's scheme: register it with its AddToScheme in client.Options.Scheme (manager.Options.Scheme for a manager's client): %w", obj, err)
	}
	return s.targetForKind(gvks[0], kube.BuiltIn(gvks[0], reflect.TypeOf(obj)))
}

// targetForKind resolves gvk to its resource; proto says whether requests
// may use protobuf (the Go type is client-go's own).
func (s *shared) targetForKind(gvk schema.GroupVersionKind, proto bool) (target, error) {
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return target{}, fmt.Errorf("client: the API server does not serve %s (is its CRD installed?): %w", gvk, err)
	}
	rc, err := s.restFor(gvk.GroupVersion(), proto)
	if err != nil {
		return target{}, err
	}
	return target{gvk: gvk, gvr: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace, rest: rc, proto: proto}, nil
}

// restFor returns the REST client of one group version, built once.
func (s *shared) restFor(gv schema.GroupVersion, proto bool) (rest.Interface, error) {
	key := restKey{gv: gv, proto: proto}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rc, ok := s.rests[key]; ok {
		return rc, nil
	}
	rc, err := kube.RESTClient(s.cfg, s.http, kube.WithoutConversion(s.codecs), gv, proto)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	s.rests[key] = rc
	return rc, nil
}

// kindOfList returns the item kind of a list type such as
// *corev1.ConfigMapList, and whether its items are client-go's types.
func (s *shared) kindOfList(list runtime.Object) (schema.GroupVersionKind, bool, error) {
	gvks, _, err := s.scheme.ObjectKinds(list)
	if err != nil {
		return schema.GroupVersionKind{}, false, fmt.Errorf("client: %T is not in the client's scheme: register it with its AddToScheme: %w", list, err)
	}
	gvk := gvks[0]
	if !strings.HasSuffix(gvk.Kind, "List") || !meta.IsListType(list) {
		return schema.GroupVersionKind{}, false, fmt.Errorf("client: %T is not a list type: pass a list such as *corev1.ConfigMapList", list)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	t, ok := s.scheme.AllKnownTypes()[gvk]
	if !ok {
		return schema.GroupVersionKind{}, false, fmt.Errorf("client: %T lists %s, which is not in the client's scheme", list, gvk)
	}
	return gvk, kube.BuiltIn(gvk, reflect.PointerTo(t)), nil
}
