package manager

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
	"github.com/ctrlkit/ctrlkit/pkg/shard"
	"github.com/ctrlkit/ctrlkit/pkg/webhook"
	"github.com/ctrlkit/ctrlkit/pkg/workqueue"
)

// Defaults used when the matching Options field is zero.
const (
	DefaultCacheSyncTimeout     = 2 * time.Minute
	DefaultSyncProgressInterval = 5 * time.Second
	DefaultName                 = "ctrlkit"
)

// Options configures a Manager. The zero value is valid: every namespace,
// no HTTP endpoints, a private Prometheus registry, logs discarded.
type Options struct {
	// Name identifies the operator: the user agent of its clients (unless
	// the rest config sets one) and the default source of the events it
	// records. Empty means DefaultName.
	Name string
	// Scheme maps Go types to kinds for everything the manager builds: its
	// cache (informer.For), its client, its event recorders and sharding.
	// Nil means client-go's scheme (built-in types only); add custom types
	// with their AddToScheme. It is the one place to set the scheme:
	// Informers.Scheme must stay nil.
	Scheme *runtime.Scheme
	// Informers are the options shared by every informer, except the
	// scheme (Scheme).
	Informers informer.Options
	// Logger receives the manager's logs and is the base of every
	// controller's logger. The zero value discards logs.
	Logger logr.Logger
	// Registry receives every metric of this manager. Nil means a new
	// registry with the Go and process collectors. It must also be a
	// prometheus.Gatherer (as *prometheus.Registry is) to serve /metrics;
	// pass prometheus.DefaultRegisterer to share the global registry.
	Registry prometheus.Registerer
	// HTTPAddr is where /healthz and /readyz are served in plain HTTP, with
	// /metrics unless SecureMetrics is set, e.g. ":8081" or "127.0.0.1:0".
	// Empty disables the endpoints. The server speaks HTTP/1.1 only.
	HTTPAddr string
	// SecureMetrics, when set, serves /metrics over HTTPS to authenticated
	// and authorized clients only, on a server of its own (kubebuilder's
	// ":8443" by default), and /metrics leaves HTTPAddr, which keeps the
	// health probes. It can serve pprof too (see SecureMetricsOptions).
	// Nil serves /metrics on HTTPAddr, to anyone who can reach it.
	SecureMetrics *SecureMetricsOptions
	// CacheSyncTimeout bounds the wait for the informers' initial sync.
	// 0 means DefaultCacheSyncTimeout.
	CacheSyncTimeout time.Duration
	// SyncProgressInterval is how often sync progress is logged.
	// 0 means DefaultSyncProgressInterval.
	SyncProgressInterval time.Duration
	// ShutdownTimeout is how long in-flight reconciles and Runnables may
	// run after Run's ctx is cancelled. 0 means
	// reconcile.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// LeaderElection, when set, makes controllers leader-only: every
	// replica syncs its caches (a warm standby), but only the replica that
	// holds the Lease runs their workers. The Lease gets a client of its
	// own, built from a copy of the rest config (leader.NewForConfig). Nil
	// disables leader election.
	LeaderElection *leader.Options
	// OnLeaseLost is what the manager does after Options.LeaderElection's
	// lease is lost. The leader-only work is aborted at once in every
	// case. The zero value, ExitOnLeaseLost, aborts everything.
	OnLeaseLost LeaseLostPolicy
	// Sharding, when set, splits the objects of the controllers it names
	// among the replicas (see shard.Options; declare their informers in
	// Manager.ShardScope); a sharded controller is not leader-only. Nil
	// disables sharding.
	Sharding *shard.Options
	// Webhook, when set, serves admission and conversion webhooks over
	// HTTPS (see WebhookOptions; register them on Manager.Webhooks). Nil
	// serves none.
	Webhook *WebhookOptions
	// ServerLimits bound the requests and connections of every server the
	// manager starts (probes, metrics, webhooks): read and idle timeouts,
	// header and body sizes. The zero value is webhook.Limits' defaults.
	ServerLimits webhook.Limits
	// ReadYourWrites tunes how long a write through Manager.Client waits
	// for the cache to reflect it (package client). The zero value waits
	// up to client.DefaultReadYourWritesTimeout.
	ReadYourWrites client.ReadYourWrites
}

// LeaseLostPolicy is what a manager does after its replica lost the lease
// (Options.OnLeaseLost).
type LeaseLostPolicy int

const (
	// ExitOnLeaseLost aborts every controller and Runnable (their
	// contexts are cancelled at once) and Run returns an error wrapping
	// leader.ErrLeaseLost within the abort timeout, for a process
	// supervisor to restart the replica quickly. The default, as in
	// kube-controller-manager and controller-runtime.
	ExitOnLeaseLost LeaseLostPolicy = iota
	// ShutdownOnLeaseLost stops the controllers and Runnables that are
	// not leader-only gracefully, within Options.ShutdownTimeout, and then
	// Run returns the error wrapping leader.ErrLeaseLost.
	ShutdownOnLeaseLost
	// RecampaignOnLeaseLost keeps the replica running, its caches warm, and
	// campaigns again once its leader-only work has stopped. If that work
	// does not stop within the abort timeout, or fails, Run returns the
	// error: a replica never holds the lease while its leader-only
	// controllers cannot run.
	RecampaignOnLeaseLost
)

// ControllerOptions configures one controller added with AddController.
type ControllerOptions struct {
	// Workers is the number of concurrent reconciles. 0 means 1.
	Workers int
	// Timeout bounds each Reconcile through its ctx. 0 means no bound.
	Timeout time.Duration
	// RateLimiter paces retries. Nil means workqueue.DefaultRateLimiter.
	RateLimiter workqueue.RateLimiter[reconcile.Request]
	// EveryReplica runs the controller on every replica, leader or not.
	// Without Options.LeaderElection every controller does. A leader-only
	// controller (the default with leader election) queues no events while
	// its replica stands by; when the replica takes over, every cached
	// object of its watches is queued.
	EveryReplica bool
	// Reads are informers the Reconciler reads through their Listers but
	// does not watch. With the sources of the watches, they are the
	// controller's informers: its workers start no Reconcile while one of
	// them is served but not synced (a CRD installed or recreated while
	// the manager runs), and the manager holds them (informer.Cache.Use)
	// until the controller is removed, so the informer of a type no other
	// controller uses stops then.
	Reads []informer.Source
}

// validate checks opts and fills in defaults.
func (o *Options) validate() error {
	var errs []error
	bad := func(field string, v any, fix string) {
		errs = append(errs, fmt.Errorf("manager: Options.%s is %v: %s", field, v, fix))
	}
	if err := o.ServerLimits.Apply(&http.Server{}); err != nil {
		errs = append(errs, fmt.Errorf("manager: Options.ServerLimits: %w", err))
	}
	if o.CacheSyncTimeout < 0 {
		bad("CacheSyncTimeout", o.CacheSyncTimeout, "use 0 for the default, or a positive duration")
	}
	if o.SyncProgressInterval < 0 {
		bad("SyncProgressInterval", o.SyncProgressInterval, "use 0 for the default, or a positive duration")
	}
	if o.ShutdownTimeout < 0 {
		bad("ShutdownTimeout", o.ShutdownTimeout, "use 0 for the default, or a positive duration")
	}
	if o.Informers.Scheme != nil {
		errs = append(errs, errors.New("manager: Options.Informers.Scheme is set: set Options.Scheme instead, which the manager's cache, client and event recorders all use"))
	}
	if o.Informers.Resync < 0 {
		bad("Informers.Resync", o.Informers.Resync, "use 0 to disable resync, or a positive period")
	}
	if o.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(o.HTTPAddr); err != nil {
			bad("HTTPAddr", fmt.Sprintf("%q", o.HTTPAddr), "use host:port such as \":8080\" or \"127.0.0.1:0\", or empty to disable")
		}
	}
	errs = append(errs, validateSecureMetrics(o)...)
	if o.Registry != nil {
		if _, ok := o.Registry.(prometheus.Gatherer); !ok {
			bad("Registry", fmt.Sprintf("%T", o.Registry), "it must also implement prometheus.Gatherer (pass a *prometheus.Registry)")
		}
	}
	errs = append(errs, validateWebhook(o)...)
	if o.OnLeaseLost < ExitOnLeaseLost || o.OnLeaseLost > RecampaignOnLeaseLost {
		bad("OnLeaseLost", int(o.OnLeaseLost), "use ExitOnLeaseLost, ShutdownOnLeaseLost or RecampaignOnLeaseLost")
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.CacheSyncTimeout == 0 {
		o.CacheSyncTimeout = DefaultCacheSyncTimeout
	}
	if o.SyncProgressInterval == 0 {
		o.SyncProgressInterval = DefaultSyncProgressInterval
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = reconcile.DefaultShutdownTimeout
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return nil
}
