package leader

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Defaults, the values kube components use.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// rateSlack is the margin validateTiming keeps between a leader fencing
// itself and a standby taking over: 10% of RenewDeadline + RetryPeriod, for
// clocks that run at slightly different rates and for a write already on
// the wire when the fence closes.
const rateSlack = 1.1

// ErrLeaseLost is the cause of a leading context cancelled because this
// replica can no longer prove it holds the lease (not because Run's ctx
// ended), and is wrapped by Run's error after such a loss.
var ErrLeaseLost = errors.New("leader election lost")

// namespaceFile holds the pod's namespace when running in a cluster.
var namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Options configures an Elector.
type Options struct {
	// Name is the Lease's name. Required.
	Name string
	// Namespace is the Lease's namespace. Empty means the pod's own
	// namespace (from the service account); outside a cluster it must be
	// set.
	Namespace string
	// Identity names this replica in the Lease. Empty means the hostname
	// with a random suffix, so two replicas on one host differ.
	Identity string
	// LeaseDuration is how long a standby waits, after it last saw the
	// lease renewed, before taking it. The Lease stores it in whole
	// seconds, and standbys use that. 0 means DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader retries renewing before it gives
	// up leading. 0 means DefaultRenewDeadline.
	RenewDeadline time.Duration
	// RetryPeriod is how often renewals and acquisitions are tried. 0 means
	// DefaultRetryPeriod.
	RetryPeriod time.Duration
	// ReleaseOnCancel clears the lease when Run's ctx ends, so a standby
	// takes over at once. The lease is released only after the leading
	// function returned nil, that is once nothing leader-only runs.
	ReleaseOnCancel bool
	// Logger receives acquire, loss and handover logs, and client-go's
	// leader-election logs.
	Logger logr.Logger
}

// Elector campaigns for a Lease. Create it with New or NewForConfig.
type Elector struct {
	opts  Options
	lock  resourcelock.Interface // shared by every Run, one at a time
	bound time.Duration          // the fence: see fenced

	mu        sync.Mutex
	running   bool // a Run is in progress
	term      *term
	renewedAt time.Time // when the last successful write naming this replica was sent
	lost      error     // a holder other than this replica seen since that write
	holder    string    // the holder last seen
	denied    time.Time // when the Lease was first refused (403/401) since the last success
	deniedErr error

	slowpaths atomic.Uint64 // renewals that had to read the Lease first
}

// New validates opts and returns an Elector that uses client for the
// Lease. client should be the Lease's own, as NewForConfig builds it: a
// client shared with the workload shares its rate limiter, and busy
// workers can then delay renewals until the lease is lost. Invalid options
// are an error naming the field to change.
func New(client kubernetes.Interface, opts Options) (*Elector, error) {
	if client == nil {
		return nil, errors.New("leader: client is nil: pass a clientset, or use NewForConfig")
	}
	if err := opts.complete(); err != nil {
		return nil, err
	}
	return newElector(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: opts.Name, Namespace: opts.Namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
	}, opts), nil
}

// NewForConfig is New with a client of its own for the Lease, built from a
// copy of cfg (which is not modified): it has its own rate limiter, sized
// for the elector's few requests per RetryPeriod, so reconcile writes never
// delay a renewal; a request timeout of max(RenewDeadline/2, 1s), so one
// hung request cannot use up the whole RenewDeadline; and cfg's user agent
// followed by "/leader-election", to tell its requests apart in API server
// logs and priority-and-fairness metrics. The Lease is read and written by
// client-go's resourcelock.LeaseLock.
func NewForConfig(cfg *rest.Config, opts Options) (*Elector, error) {
	if cfg == nil {
		return nil, errors.New("leader: rest config is nil: pass the one the manager uses")
	}
	if err := opts.complete(); err != nil { // leaseConfig reads RetryPeriod
		return nil, err
	}
	client, err := kubernetes.NewForConfig(leaseConfig(cfg, opts))
	if err != nil {
		return nil, fmt.Errorf("leader: building the Lease client: %w", err)
	}
	return New(client, opts)
}

// leaseRequestsPerRetry is the most requests client-go's elector sends per
// RetryPeriod: a Get, then an Update or a Create.
const leaseRequestsPerRetry = 3

// leaseConfig is the rest config of the Lease's own client.
func leaseConfig(cfg *rest.Config, o Options) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter = nil // never the workload's
	c.QPS = float32(max(5, leaseRequestsPerRetry/o.RetryPeriod.Seconds()))
	c.Burst = int(2 * c.QPS)
	c.Timeout = max(o.RenewDeadline/2, time.Second)
	c.UserAgent = cmp.Or(cfg.UserAgent, rest.DefaultKubernetesUserAgent()) + "/leader-election"
	return c
}

func newElector(lock resourcelock.Interface, opts Options) *Elector {
	return &Elector{opts: opts, lock: lock, bound: opts.RenewDeadline + opts.RetryPeriod}
}

// complete fills in defaults and validates o.
func (o *Options) complete() error {
	if o.Name == "" {
		return errors.New("leader: Options.Name is empty: name the Lease, e.g. \"my-operator\"")
	}
	if o.Namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		if err != nil || strings.TrimSpace(string(b)) == "" {
			return fmt.Errorf("leader: Options.Namespace is empty and this process is not in a cluster (no %s): set the Lease's namespace", namespaceFile)
		}
		o.Namespace = strings.TrimSpace(string(b))
	}
	if o.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("leader: Options.Identity is empty and the hostname is unknown: %w: set Options.Identity", err)
		}
		var suffix [4]byte
		_, _ = rand.Read(suffix[:])
		o.Identity = host + "_" + hex.EncodeToString(suffix[:])
	}
	o.LeaseDuration = cmp.Or(o.LeaseDuration, DefaultLeaseDuration)
	o.RenewDeadline = cmp.Or(o.RenewDeadline, DefaultRenewDeadline)
	o.RetryPeriod = cmp.Or(o.RetryPeriod, DefaultRetryPeriod)
	if err := o.validateTiming(); err != nil {
		return err
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return nil
}

// validateTiming refuses timings that let two replicas lead at once. A
// leader that cannot renew fences itself RenewDeadline + RetryPeriod after
// the last renewal it sent (client-go gives up about then too: RetryPeriod
// after that renewal it starts a round of retries that lasts
// RenewDeadline); a standby takes the lease no sooner than LeaseDuration,
// in whole seconds, after that renewal reached the API server. So
// LeaseDuration must exceed RenewDeadline + RetryPeriod, with rateSlack.
func (o Options) validateTiming() error {
	ld, rd, rp := o.LeaseDuration, o.RenewDeadline, o.RetryPeriod
	switch {
	case ld < 0 || rd < 0 || rp < 0:
		return fmt.Errorf("leader: durations must not be negative (LeaseDuration %v, RenewDeadline %v, RetryPeriod %v): use 0 for the defaults %v/%v/%v",
			ld, rd, rp, DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod)
	case ld <= rd:
		return fmt.Errorf("leader: Options.LeaseDuration (%v) must be greater than Options.RenewDeadline (%v): raise LeaseDuration or lower RenewDeadline, or a standby could lead while the old leader still believes it leads", ld, rd)
	case float64(rd) <= leaderelection.JitterFactor*float64(rp):
		return fmt.Errorf("leader: Options.RenewDeadline (%v) must be greater than %.1f × Options.RetryPeriod (%v): raise RenewDeadline or lower RetryPeriod", rd, leaderelection.JitterFactor, rp)
	case ld < time.Second:
		return fmt.Errorf("leader: Options.LeaseDuration (%v) is under 1s: the Lease stores it in whole seconds, and 0 lets a standby take the lease at once; use at least 1s", ld)
	}
	need := time.Duration(rateSlack * float64(rd+rp))
	if stored := ld.Truncate(time.Second); stored < need {
		counted := ""
		if stored != ld {
			counted = fmt.Sprintf(", counted as %v because the Lease stores whole seconds", stored)
		}
		return fmt.Errorf("leader: Options.LeaseDuration (%v%s) must be at least %.1f × (Options.RenewDeadline + Options.RetryPeriod) = %v: "+
			"a leader that cannot renew stops RenewDeadline + RetryPeriod (%v) after its last renewal and a standby may take the lease LeaseDuration after it, "+
			"so the difference is all that keeps them apart; raise LeaseDuration to %v, or lower RenewDeadline or RetryPeriod",
			ld, counted, rateSlack, need, rd+rp, need.Truncate(time.Second)+time.Second)
	}
	return nil
}

// Identity is this replica's name in the Lease.
func (e *Elector) Identity() string { return e.opts.Identity }

// Options returns the validated options, with defaults filled in.
func (e *Elector) Options() Options { return e.opts }

// IsLeader reports whether this replica leads and can prove it: it holds
// the lease and its last renewal is within the fence (see the package
// doc). It turns false the moment the fence closes, before the leading
// context's work has stopped.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	return t != nil && t.lostCause() == nil && e.fenced(time.Now()) == nil
}

// Check is the watchdog for /healthz. It fails when the Lease has been
// refused (403 Forbidden or 401 Unauthorized) for longer than
// LeaseDuration + RenewDeadline, and when this replica leads but has not
// renewed for that long, which means the elector is stuck. A standby, and
// a replica that lost the lease and campaigns again, pass: restarting it
// would only make it cold.
func (e *Elector) Check() error {
	now := time.Now()
	tolerance := e.opts.LeaseDuration + e.opts.RenewDeadline
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.denied.IsZero() && now.Sub(e.denied) > tolerance {
		return fmt.Errorf("leader: the API server has refused the Lease %s for %v: %w: %s",
			e.lease(), now.Sub(e.denied).Round(time.Second), e.deniedErr, e.deniedFix())
	}
	if e.term != nil && e.term.lostCause() == nil && now.Sub(e.renewedAt) > tolerance {
		return fmt.Errorf("leader: leading, but the Lease %s was last renewed %v ago: the elector is stuck", e.lease(), now.Sub(e.renewedAt).Round(time.Second))
	}
	return nil
}

// Collector reports leader_election_master_status{name} (1 while leading)
// and leader_election_slowpath_total{name}, the series client-go and
// controller-runtime expose. The slow path is a renewal that had to read
// the Lease first because the optimistic update of the record last seen
// failed: a sign of conflicting writers or a Lease changed behind the
// leader's back.
func (e *Elector) Collector() prometheus.Collector {
	labels := prometheus.Labels{"name": e.opts.Name}
	return collectors{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "leader_election_master_status",
			Help:        "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
			ConstLabels: labels,
		}, func() float64 {
			if e.IsLeader() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "leader_election_slowpath_total",
			Help:        "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
			ConstLabels: labels,
		}, func() float64 { return float64(e.slowpaths.Load()) }),
	}
}

// collectors is several collectors registered as one.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// lease names the Lease in logs and errors.
func (e *Elector) lease() string { return e.opts.Namespace + "/" + e.opts.Name }
