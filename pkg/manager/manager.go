package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"

	internalkube "github.com/ctrlkit/ctrlkit/internal/kube"
	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
	"github.com/ctrlkit/ctrlkit/pkg/webhook"
	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// Runnable is anything the manager runs next to its controllers once the
// caches have synced. Start blocks until ctx is done; an error stops the
// whole manager. Start must return soon after ctx is done: Run waits for
// it up to Options.ShutdownTimeout (the abort timeout when the lease was
// lost), then returns an error naming it and leaves it running.
type Runnable interface {
	Start(ctx context.Context) error
}

// Watch connects an informer to a controller: its events, after
// Predicates, are mapped to keys by Map (informer.ObjectKey when nil).
type Watch struct {
	Source     informer.Source
	Map        informer.MapFunc
	Predicates []informer.Predicate
}

// Manager owns everything an operator runs. Create it with New.
type Manager struct {
	opts     Options
	log      logr.Logger
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	client   *client.Client // nil when built by newWithClients
	cache    *informer.Cache
	registry prometheus.Registerer
	gatherer prometheus.Gatherer
	qMetrics *workqueue.Metrics
	rMetrics *reconcile.Metrics

	started atomic.Bool
	ready   atomic.Bool

	webhooks *webhook.Server // nil without Options.Webhook

	elector *leader.Elector // nil without leader election
	shard   *shard.Replica  // nil without Options.Sharding
	metrics *secureMetrics  // nil without Options.SecureMetrics

	mu              sync.Mutex
	controllers     []*controller
	runnables       []Runnable
	leaderRunnables []Runnable
	checks          map[string]func() error
	addr            net.Addr
	metricsAddr     net.Addr // of the secure metrics server
	broadcaster     record.EventBroadcaster
	eventLog        logGate                 // of the broadcaster's logger: closed when Run returns
	stopped         bool                    // Run has returned; events are dropped
	cancelRun       context.CancelCauseFunc // of Run's ctx, while it runs
	lost            error                   // the lease loss that made Run abort
	// runCtx is Run's ctx once its controllers started (nil before and
	// after): a controller added then starts at once, counted in extra.
	runCtx context.Context
	extra  sync.WaitGroup
	// term is the current term of leadership while lead runs, for
	// leader-only controllers added during it.
	term *term
	// conns are the connections of the manager's clients (all but the
	// Lease's), closed when Run returns; nil for a manager built on given
	// clients (unit tests).
	conns *conns
}

// New validates opts and builds the clients, the cache and the metrics of a
// Manager that talks to the cluster at cfg. It does not contact the API
// server. When cfg leaves QPS and Burst at zero, the manager's clients
// have no client-side rate limit (QPS -1), as controller-runtime's since
// v0.21: the API server's priority and fairness protects it, and a
// controller that fans out writes is not held to client-go's 5 requests a
// second. Set QPS and Burst to have one, shared by every client but the
// Lease's. The clientset (events,
// Kubernetes) sends and accepts protobuf unless cfg sets a ContentType,
// which it then keeps: set cfg.ContentType to runtime.ContentTypeJSON for
// JSON; so do the cache's informers of built-in types. Custom types are
// always JSON, decoded straight into their Go types. With
// Options.LeaderElection, the Lease gets a client of its own, built from a
// copy of cfg by leader.NewForConfig, so the workload cannot starve it.
func New(cfg *rest.Config, opts Options) (*Manager, error) {
	if cfg == nil {
		return nil, errors.New("manager: rest config is nil: pass one from manager.GetConfig or clientcmd")
	}
	cfg = clientConfig(cfg, cmp.Or(opts.Name, DefaultName))
	// rest_client_* series of this manager's own, counted on its transport.
	clientMetrics := newRESTMetrics()
	cfg.Wrap(clientMetrics.wrap)
	// The Lease's client is built from this config, unfenced: renewing
	// and releasing the lease is not leader-only work.
	leaseCfg := rest.CopyConfig(cfg)
	// One request budget for every client but the Lease's (copied above,
	// it keeps its own).
	internalkube.ShareRateLimiter(cfg)
	// Two HTTP clients of the manager's own, apart from client-go's shared
	// transports and the Lease's connection, whose connections Run closes
	// when it returns: the caches' lists and watches go over one; every
	// write (the clientset, the dynamic client, the client, the sharder's
	// label writes) over the other, fenced (leader.FenceConfig), so that the
	// end of a term, which closes a connection that carried its writes,
	// leaves the watches be.
	var own conns
	readHC, cacheKube, _, err := ownClients(cfg, &own)
	if err != nil {
		return nil, err
	}
	writeHC, kube, dyn, err := ownClients(leader.FenceConfig(cfg), &own)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cacheKube.Discovery()))
	// The Lease gets a client of its own, so the workload cannot starve it.
	newElector := func(o leader.Options) (*leader.Elector, error) { return leader.NewForConfig(leaseCfg, o) }
	// The sharder's label writes are fenced by its own Lease.
	md, err := metadata.NewForConfigAndClient(cfg, writeHC)
	if err != nil {
		return nil, fmt.Errorf("manager: building the metadata client: %w", err)
	}
	m, err := newWithClients(informer.Clients{Config: cfg, HTTPClient: readHC, Mapper: mapper}, opts, newElector,
		&writers{kube: kube, dyn: dyn, md: md})
	if err != nil {
		return nil, err
	}
	m.conns = &own
	m.client, err = client.New(cfg, client.Options{
		HTTPClient:     writeHC,
		Scheme:         opts.Scheme,
		Mapper:         mapper,
		FieldManager:   cmp.Or(opts.Name, DefaultName),
		Cache:          m.cache,
		ReadYourWrites: opts.ReadYourWrites,
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	if err := clientMetrics.register(m.registry); err != nil {
		return nil, fmt.Errorf("manager: registering rest_client metrics: %w", err)
	}
	return m, nil
}

// clientConfig returns a copy of cfg with the manager's defaults: no
// client-side rate limit when cfg sets neither QPS nor Burst, and
// userAgent when cfg names none.
func clientConfig(cfg *rest.Config, userAgent string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		cfg.QPS = -1
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = userAgent
	}
	return cfg
}

// ownClients returns an HTTP client built from cfg whose connections own
// tracks, and a clientset (newClientset) and a dynamic client on it.
func ownClients(cfg *rest.Config, own *conns) (*http.Client, *kubernetes.Clientset, *dynamic.DynamicClient, error) {
	c := rest.CopyConfig(cfg)
	c.Dial = own.dial(c.Dial)
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("manager: building the HTTP client: %w", err)
	}
	kube, err := newClientset(c, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("manager: building dynamic client: %w", err)
	}
	return hc, kube, dyn, nil
}

// newClientset is the manager's clientset on hc: every request in
// protobuf, as kube-controller-manager does. client-go's generated
// clients already prefer it for their own methods when ContentType is
// empty, but not the hand-written ones (events, evictions, bindings). A
// cfg that names a ContentType keeps it.
func newClientset(cfg *rest.Config, hc *http.Client) (*kubernetes.Clientset, error) {
	c := rest.CopyConfig(cfg)
	if c.ContentType == "" {
		c.ContentType = runtime.ContentTypeProtobuf
		c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	kube, err := kubernetes.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, fmt.Errorf("manager: building clientset: %w", err)
	}
	return kube, nil
}

// writers are the clients a manager writes through; New's are fenced.
type writers struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
	md   metadata.Interface
}

// newWithClients is New after the clients exist: c are the cache's, w
// write, and newElector builds the Elector.
func newWithClients(c informer.Clients, opts Options, newElector func(leader.Options) (*leader.Elector, error), w *writers) (*Manager, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	io := opts.Informers
	io.Scheme = opts.Scheme
	cache, err := informer.New(c, io)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	m := &Manager{
		opts:     opts,
		log:      opts.Logger,
		kube:     w.kube,
		dyn:      w.dyn,
		mapper:   c.Mapper,
		cache:    cache,
		registry: opts.Registry,
		checks:   make(map[string]func() error),
	}
	if m.registry == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		m.registry = reg
	}
	m.gatherer = m.registry.(prometheus.Gatherer)
	if m.qMetrics, err = workqueue.NewMetrics(m.registry); err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	if m.rMetrics, err = reconcile.NewMetrics(m.registry); err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	if err := m.registry.Register(cache.Collector()); err != nil {
		return nil, fmt.Errorf("manager: registering ctrlkit_cache_* metrics: %w", err)
	}
	if err := m.newWebhookServer(); err != nil {
		return nil, err
	}
	if opts.SecureMetrics != nil {
		if m.metrics, err = newSecureMetrics(*opts.SecureMetrics, c); err != nil {
			return nil, err
		}
	}
	if opts.LeaderElection != nil {
		le := *opts.LeaderElection
		if le.Logger.GetSink() == nil {
			le.Logger = m.log
		}
		if m.elector, err = newElector(le); err != nil {
			return nil, fmt.Errorf("manager: Options.LeaderElection: %w", err)
		}
		if err := m.registry.Register(m.elector.Collector()); err != nil {
			return nil, fmt.Errorf("manager: registering leader_election_* metrics: %w", err)
		}
		m.checks["leader-election"] = m.elector.Check
	}
	if opts.Sharding != nil {
		if err := m.newReplica(w.md, newElector); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Cache is where informers are declared (informer.For, informer.ForResource)
// before Run.
func (m *Manager) Cache() *informer.Cache { return m.cache }

// Client writes objects of every type in the scheme
// (Options.Scheme), built-in or custom, and its writes are
// reflected by the cache's listers when they return (see package client).
// Its field manager is Options.Name. Reads belong to listers.
func (m *Manager) Client() *client.Client { return m.client }

// Kubernetes is the clientset, for what Client does not do: subresources
// other than status (pods' logs, exec, eviction, scale) and discovery. Its
// writes are fenced like Client's, but the cache is not made to reflect
// them.
func (m *Manager) Kubernetes() kubernetes.Interface { return m.kube }

// Dynamic is the dynamic client, for unstructured objects of resources
// that have no Go type in the scheme.
func (m *Manager) Dynamic() dynamic.Interface { return m.dyn }

// RESTMapper maps kinds to resources through the server's discovery.
func (m *Manager) RESTMapper() meta.RESTMapper { return m.mapper }

// Registry is the manager's Prometheus registerer, for the operator's own
// metrics.
func (m *Manager) Registry() prometheus.Registerer { return m.registry }

// Logger is the manager's logger.
func (m *Manager) Logger() logr.Logger { return m.log }

// priorityOf ranks an event: the initial list and resyncs that changed
// nothing wait behind real changes.
func priorityOf(ev informer.Event) workqueue.Priority {
	switch {
	case ev.Type == informer.Added && ev.InitialList:
		return workqueue.PriorityLow
	case ev.Type == informer.Updated && ev.Old.GetResourceVersion() == ev.Object.GetResourceVersion():
		return workqueue.PriorityLow
	}
	return workqueue.PriorityNormal
}

// Add registers a Runnable to start on every replica with the controllers,
// after the caches have synced. It fails after Run has started.
func (m *Manager) Add(r Runnable) error {
	return m.add("Add", r, &m.runnables)
}

// AddLeaderOnly registers a Runnable to start, like leader-only controllers,
// each time this replica becomes the leader, with a leading context: it is
// cancelled the moment the lease is lost, and leader.CheckLeading tells
// whether the Runnable may still act as the leader. The replica campaigns
// again (with RecampaignOnLeaseLost) only once Start has returned. Without
// Options.LeaderElection it is the same as Add. It fails after Run has
// started.
func (m *Manager) AddLeaderOnly(r Runnable) error {
	if m.elector == nil {
		return m.add("AddLeaderOnly", r, &m.runnables)
	}
	return m.add("AddLeaderOnly", r, &m.leaderRunnables)
}

func (m *Manager) add(method string, r Runnable, to *[]Runnable) error {
	if r == nil {
		return fmt.Errorf("manager: %s(nil): pass a Runnable", method)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started.Load() {
		return fmt.Errorf("manager: %s after Run started: add every Runnable before Run", method)
	}
	*to = append(*to, r)
	return nil
}

// EventRecorder returns a recorder that writes core/v1 Events as
// component (Options.Name when empty). The first call starts the manager's
// event broadcaster, which Run shuts down when it returns; after that the
// recorder drops events. Call it only on a manager you Run, or its
// broadcaster goroutines outlive it.
func (m *Manager) EventRecorder(component string) record.EventRecorder {
	component = cmp.Or(component, m.opts.Name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		// Run has returned: nothing would stop a new broadcaster.
		return &record.FakeRecorder{}
	}
	if m.broadcaster == nil {
		// Its goroutines log through the context's logger, not global klog,
		// gated so that a write still in flight when Run returns does not
		// log after it (Run closes the gate).
		m.broadcaster = record.NewBroadcaster(record.WithContext(logr.NewContext(context.Background(), gated(m.log, &m.eventLog))))
		m.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.kube.CoreV1().Events("")})
	}
	return m.broadcaster.NewRecorder(cmp.Or(m.opts.Scheme, kubescheme.Scheme), corev1.EventSource{Component: component}).WithLogger(m.log)
}

// Ready reports whether /readyz passes: the caches have synced, Run has
// not begun to shut down, and, with Options.Webhook, the webhook server and
// its certificate source are ready (see WebhookOptions).
func (m *Manager) Ready() bool { return m.notReady() == nil }

// notReady says why the manager is not Ready, or returns nil.
func (m *Manager) notReady() error {
	if !m.ready.Load() {
		return errors.New("caches have not synced, or the manager is stopping")
	}
	return m.webhooksReady()
}
