package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// Runnable is anything the manager runs next to its controllers once the
// caches have synced. Start blocks until ctx is done; an error stops the
// whole manager.
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
	cache    *informer.Cache
	registry prometheus.Registerer
	gatherer prometheus.Gatherer
	qMetrics *workqueue.Metrics
	rMetrics *reconcile.Metrics

	started atomic.Bool
	ready   atomic.Bool

	elector *leader.Elector // nil without leader election

	mu          sync.Mutex
	controllers []*reconcile.Controller
	leaderOnly  map[*reconcile.Controller][]replay // controllers that run only on the leader
	runnables   []Runnable
	checks      map[string]func() error
	addr        net.Addr
	broadcaster record.EventBroadcaster
	stopped     bool // Run has returned; events are dropped
}

// New validates opts and builds the clients, the cache and the metrics of a
// Manager that talks to the cluster at cfg. It does not contact the API
// server. When cfg leaves QPS and Burst at zero they are raised from
// client-go's 5/10 to 20/30, as controllers need.
func New(cfg *rest.Config, opts Options) (*Manager, error) {
	if cfg == nil {
		return nil, errors.New("manager: rest config is nil: pass one from manager.GetConfig or clientcmd")
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.Burst == 0 {
		cfg.QPS, cfg.Burst = 20, 30
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = cmp.Or(opts.Name, DefaultName)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("manager: building clientset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("manager: building dynamic client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return newWithClients(informer.Clients{Kube: kube, Dynamic: dyn, Mapper: mapper}, opts)
}

// newWithClients is New after the clients exist; unit tests use it with
// fake clients.
func newWithClients(c informer.Clients, opts Options) (*Manager, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cache, err := informer.New(c, opts.Informers)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	m := &Manager{
		leaderOnly: make(map[*reconcile.Controller][]replay),
		opts:       opts,
		log:        opts.Logger,
		kube:       c.Kube,
		dyn:        c.Dynamic,
		mapper:     c.Mapper,
		cache:      cache,
		registry:   opts.Registry,
		checks:     make(map[string]func() error),
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
	if opts.LeaderElection != nil {
		le := *opts.LeaderElection
		if le.Logger.GetSink() == nil {
			le.Logger = m.log
		}
		if m.elector, err = leader.New(c.Kube, le); err != nil {
			return nil, fmt.Errorf("manager: Options.LeaderElection: %w", err)
		}
		if err := m.registry.Register(m.elector.Collector()); err != nil {
			return nil, fmt.Errorf("manager: registering leader_election_master_status: %w", err)
		}
		m.checks["leader-election"] = m.elector.Check
	}
	return m, nil
}

// Cache is where informers are declared (informer.For, informer.ForResource)
// before Run.
func (m *Manager) Cache() *informer.Cache { return m.cache }

// Client is the clientset for writes to built-in types. Reads belong to
// listers.
func (m *Manager) Client() kubernetes.Interface { return m.kube }

// Dynamic is the dynamic client, for writes to custom resources.
func (m *Manager) Dynamic() dynamic.Interface { return m.dyn }

// RESTMapper maps kinds to resources through the server's discovery.
func (m *Manager) RESTMapper() meta.RESTMapper { return m.mapper }

// Registry is the manager's Prometheus registerer, for the operator's own
// metrics.
func (m *Manager) Registry() prometheus.Registerer { return m.registry }

// Logger is the manager's logger.
func (m *Manager) Logger() logr.Logger { return m.log }

// AddController creates a controller named name that reconciles with r and
// is fed by watches, and registers it to run in Run. Names are unique per
// manager. It fails after Run has started, on a duplicate name, on a watch
// whose source was not declared on this manager's cache, or on invalid
// options.
func (m *Manager) AddController(name string, r reconcile.Reconciler, opts ControllerOptions, watches ...Watch) (*reconcile.Controller, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Checked under mu, which Run holds while it sets started: a controller
	// is either added before Run or refused, never added and left unrun.
	if m.started.Load() {
		return nil, fmt.Errorf("manager: AddController(%q) after Run started: add every controller before Run", name)
	}
	if slices.ContainsFunc(m.controllers, func(c *reconcile.Controller) bool { return c.Name() == name }) {
		return nil, fmt.Errorf("manager: a controller named %q already exists: controller names must be unique per manager", name)
	}
	declared := m.cache.Informers()
	for i, w := range watches {
		if w.Source == nil {
			return nil, fmt.Errorf("manager: controller %q: watch %d has no Source: pass an informer from informer.For", name, i)
		}
		if !slices.ContainsFunc(declared, func(s informer.Source) bool { return s.Informer() == w.Source.Informer() }) {
			return nil, fmt.Errorf("manager: controller %q: watch source %s was not declared on this manager's cache", name, w.Source.Name())
		}
	}
	ctrl, err := reconcile.New(name, r, reconcile.Options{
		Workers:         opts.Workers,
		Timeout:         opts.Timeout,
		ShutdownTimeout: m.opts.ShutdownTimeout,
		RateLimiter:     opts.RateLimiter,
		QueueMetrics:    m.qMetrics,
		Metrics:         m.rMetrics,
		Logger:          m.log,
		AbortTimeout:    m.abortTimeout(),
	})
	if err != nil {
		return nil, err
	}
	var replays []replay
	for _, w := range watches {
		h := informer.Handler{Map: w.Map, Predicates: w.Predicates}
		enqueue := func(key types.NamespacedName, ev informer.Event) {
			ctrl.EnqueuePriority(reconcile.Request{NamespacedName: key}, priorityOf(ev))
		}
		reh := h.ResourceEventHandler(enqueue)
		reg, err := w.Source.Informer().AddEventHandler(reh)
		if err != nil {
			for _, r := range replays { // leave nothing behind
				_ = r.source.Informer().RemoveEventHandler(r.registration)
			}
			ctrl.Queue().ShutDown()
			return nil, fmt.Errorf("manager: controller %q: watching %s: %w", name, w.Source.Name(), err)
		}
		replays = append(replays, replay{source: w.Source, handler: reh, registration: reg})
	}
	m.controllers = append(m.controllers, ctrl)
	if m.elector != nil && !opts.EveryReplica {
		m.leaderOnly[ctrl] = replays
	}
	return ctrl, nil
}

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

// Add registers a Runnable to start with the controllers, after the caches
// have synced. It fails after Run has started.
func (m *Manager) Add(r Runnable) error {
	if r == nil {
		return errors.New("manager: Add(nil): pass a Runnable")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started.Load() {
		return errors.New("manager: Add after Run started: add every Runnable before Run")
	}
	m.runnables = append(m.runnables, r)
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
		m.broadcaster = record.NewBroadcaster()
		m.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.kube.CoreV1().Events("")})
	}
	scheme := m.opts.Informers.Scheme
	if scheme == nil {
		scheme = kubescheme.Scheme
	}
	return m.broadcaster.NewRecorder(scheme, corev1.EventSource{Component: component})
}

// Run starts everything and blocks until ctx is cancelled and everything
// has stopped, or until something fails. See the package doc for the order.
// It returns nil after a clean shutdown. Run may be called once.
func (m *Manager) Run(ctx context.Context) (err error) {
	m.mu.Lock()
	first := m.started.CompareAndSwap(false, true)
	m.mu.Unlock()
	if !first {
		return errors.New("manager: Run called twice: a Manager runs once")
	}
	// Each controller's queue owns goroutines from AddController on. A
	// started controller shuts its queue down itself; this also ends the
	// queues of controllers that never started because Run returned before
	// the caches synced.
	defer m.shutDownQueues()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	if m.opts.HTTPAddr != "" {
		stop, err := m.serveHTTP(m.opts.HTTPAddr)
		if err != nil {
			return err
		}
		defer stop()
	}
	defer m.stopBroadcaster()

	if err := m.cache.Start(ctx); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	defer func() {
		cancel(nil)
		m.cache.Wait()
	}()

	start := time.Now()
	m.log.Info("Waiting for caches to sync", "informers", len(m.cache.Informers()), "timeout", m.opts.CacheSyncTimeout)
	syncCtx, cancelSync := context.WithTimeoutCause(ctx, m.opts.CacheSyncTimeout,
		fmt.Errorf("cache sync timeout of %v exceeded (Options.CacheSyncTimeout)", m.opts.CacheSyncTimeout))
	err = m.cache.WaitForSync(syncCtx, m.log, m.opts.SyncProgressInterval)
	cancelSync()
	if err != nil {
		if ctx.Err() != nil {
			m.log.Info("Shutdown requested before caches synced")
			return nil
		}
		return fmt.Errorf("manager: %w", err)
	}
	m.log.Info("Caches synced", "duration", time.Since(start))
	m.ready.Store(true)

	m.mu.Lock()
	runs := make([]Runnable, 0, len(m.controllers)+len(m.runnables))
	for _, c := range m.controllers {
		if _, ok := m.leaderOnly[c]; !ok {
			runs = append(runs, c)
		}
	}
	runs = append(runs, m.runnables...)
	m.mu.Unlock()

	var wg sync.WaitGroup
	errs := make([]error, len(runs)+1)
	for i, r := range runs {
		wg.Go(func() {
			err := r.Start(ctx)
			if err != nil && !(ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))) {
				// A Runnable that returns ctx.Err() on shutdown stopped cleanly.
				errs[i] = err
				cancel(err)
			}
		})
	}
	if m.elector != nil {
		wg.Go(func() {
			if err := m.campaign(ctx); err != nil {
				errs[len(runs)] = err
				cancel(err)
			}
		})
	}
	<-ctx.Done()
	m.ready.Store(false)
	m.log.Info("Stopping: waiting for controllers and runnables")
	wg.Wait()
	m.log.Info("Stopped")
	return errors.Join(errs...)
}

// campaign runs the leader-only controllers while this replica leads, until
// ctx ends (nil) or the lease is lost (an error, unless the elector's
// Recampaign option asks to campaign again).
func (m *Manager) campaign(ctx context.Context) error {
	for {
		err := m.elector.Run(ctx, m.lead)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		if !m.elector.Options().Recampaign {
			return fmt.Errorf("manager: %w", err)
		}
		m.log.Info("Lost leadership; campaigning again with warm caches", "identity", m.elector.Identity())
	}
}

// lead runs the leader-only controllers until leadCtx ends: gracefully on
// shutdown, at once (reconcile.ErrAborted) when the lease was lost. Every
// object of their watches is enqueued first, at low priority, so nothing
// that changed while another replica led, or while this one stood by, is
// missed.
func (m *Manager) lead(leadCtx context.Context) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(leadCtx))
	defer cancel(nil)
	stop := context.AfterFunc(leadCtx, func() {
		cause := context.Cause(leadCtx)
		if errors.Is(cause, leader.ErrLeaseLost) {
			cause = fmt.Errorf("%w: %w", reconcile.ErrAborted, cause)
		}
		cancel(cause)
	})
	defer stop()

	m.mu.Lock()
	ctrls := maps.Clone(m.leaderOnly)
	m.mu.Unlock()
	var wg sync.WaitGroup
	for c, replays := range ctrls {
		for _, r := range replays {
			for _, obj := range r.source.Informer().GetStore().List() {
				r.handler.OnAdd(obj, true)
			}
		}
		wg.Go(func() {
			if err := c.Start(ctx); err != nil {
				m.log.Error(err, "Leader-only controller stopped with an error", "controller", c.Name())
			}
		})
	}
	wg.Wait()
}

// abortTimeout bounds how long lease loss waits for in-flight reconciles:
// at most the window between the old leader giving up (RenewDeadline) and
// a standby taking over (LeaseDuration).
func (m *Manager) abortTimeout() time.Duration {
	if m.elector == nil {
		return 0
	}
	o := m.elector.Options()
	return min(reconcile.DefaultAbortTimeout, o.LeaseDuration-o.RenewDeadline)
}

// Elector is the manager's leader elector, or nil without leader election.
func (m *Manager) Elector() *leader.Elector { return m.elector }

// replay re-delivers a watch's cached objects to its handler.
type replay struct {
	source       informer.Source
	handler      cache.ResourceEventHandler
	registration cache.ResourceEventHandlerRegistration
}

// Ready reports whether the caches have synced and Run has not begun to
// shut down; /readyz serves it.
func (m *Manager) Ready() bool { return m.ready.Load() }

func (m *Manager) shutDownQueues() {
	m.mu.Lock()
	ctrls := slices.Clone(m.controllers)
	m.mu.Unlock()
	for _, c := range ctrls {
		c.Queue().ShutDown()
	}
}

func (m *Manager) stopBroadcaster() {
	m.mu.Lock()
	b := m.broadcaster
	m.stopped = true
	m.mu.Unlock()
	if b != nil {
		b.Shutdown()
	}
}
