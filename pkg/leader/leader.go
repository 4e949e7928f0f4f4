package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Defaults, the values kube components use.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ErrLeaseLost is the cause of a leading context cancelled because the
// lease could not be renewed (not because Run's ctx ended).
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
	// LeaseDuration is how long a standby waits, after the last renewal,
	// before taking the lease. 0 means DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader retries renewing before it gives
	// up leading. 0 means DefaultRenewDeadline.
	RenewDeadline time.Duration
	// RetryPeriod is how often renewals and acquisitions are tried. 0 means
	// DefaultRetryPeriod.
	RetryPeriod time.Duration
	// ReleaseOnCancel clears the lease when Run's ctx ends, so a standby
	// takes over at once. Only safe if nothing leader-only runs after that.
	ReleaseOnCancel bool
	// Recampaign makes a manager that lost the lease campaign again,
	// keeping its caches, instead of returning an error from Run.
	Recampaign bool
	// Logger receives acquire, loss and handover logs.
	Logger logr.Logger
}

// Elector campaigns for a Lease. Create it with New.
type Elector struct {
	opts Options
	le   *leaderelection.LeaderElector

	mu     sync.Mutex
	leader bool
	holder string
	run    *run // the current Run
}

// New validates opts and returns an Elector that uses client for the
// Lease. Invalid timing is an error naming the value to change.
func New(client kubernetes.Interface, opts Options) (*Elector, error) {
	if client == nil {
		return nil, errors.New("leader: client is nil")
	}
	if opts.Name == "" {
		return nil, errors.New("leader: Options.Name is empty: name the Lease, e.g. \"my-operator\"")
	}
	if opts.Namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		if err != nil || strings.TrimSpace(string(b)) == "" {
			return nil, fmt.Errorf("leader: Options.Namespace is empty and this process is not in a cluster (no %s): set the Lease's namespace", namespaceFile)
		}
		opts.Namespace = strings.TrimSpace(string(b))
	}
	if opts.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("leader: Options.Identity is empty and the hostname is unknown: %w", err)
		}
		var suffix [4]byte
		_, _ = rand.Read(suffix[:])
		opts.Identity = host + "_" + hex.EncodeToString(suffix[:])
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.RenewDeadline == 0 {
		opts.RenewDeadline = DefaultRenewDeadline
	}
	if opts.RetryPeriod == 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if err := opts.validateTiming(); err != nil {
		return nil, err
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	e := &Elector{opts: opts}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metaFor(opts),
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            opts.Name,
		LeaseDuration:   opts.LeaseDuration,
		RenewDeadline:   opts.RenewDeadline,
		RetryPeriod:     opts.RetryPeriod,
		ReleaseOnCancel: opts.ReleaseOnCancel,
		Callbacks: leaderelection.LeaderCallbacks{
			// Run installs the real callbacks through e.onStarted/onStopped.
			OnStartedLeading: func(ctx context.Context) { e.onStarted(ctx) },
			OnStoppedLeading: func() { e.onStopped() },
			OnNewLeader:      e.onNewLeader,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader: %w", err)
	}
	e.le = le
	return e, nil
}

func (o Options) validateTiming() error {
	switch {
	case o.LeaseDuration < 0 || o.RenewDeadline < 0 || o.RetryPeriod < 0:
		return fmt.Errorf("leader: durations must not be negative (LeaseDuration %v, RenewDeadline %v, RetryPeriod %v): use 0 for the defaults %v/%v/%v",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod, DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod)
	case o.LeaseDuration <= o.RenewDeadline:
		return fmt.Errorf("leader: Options.LeaseDuration (%v) must be greater than Options.RenewDeadline (%v): raise LeaseDuration or lower RenewDeadline, or a standby could lead while the old leader still believes it leads", o.LeaseDuration, o.RenewDeadline)
	case float64(o.RenewDeadline) <= leaderelection.JitterFactor*float64(o.RetryPeriod):
		return fmt.Errorf("leader: Options.RenewDeadline (%v) must be greater than %.1f × Options.RetryPeriod (%v): raise RenewDeadline or lower RetryPeriod", o.RenewDeadline, leaderelection.JitterFactor, o.RetryPeriod)
	}
	return nil
}

// Identity is this replica's name in the Lease.
func (e *Elector) Identity() string { return e.opts.Identity }

// Options returns the validated options, with defaults filled in.
func (e *Elector) Options() Options { return e.opts }

// IsLeader reports whether this replica holds the lease.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader
}

// Check is the watchdog for /healthz: it fails while this replica believes
// it leads but has not renewed the lease for longer than LeaseDuration plus
// RenewDeadline, which means the renew loop is stuck.
func (e *Elector) Check() error {
	return e.le.Check(e.opts.RenewDeadline)
}

// Collector reports leader_election_master_status{name} (1 while leading),
// the gauge client-go and controller-runtime expose.
func (e *Elector) Collector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "leader_election_master_status",
		Help:        "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
		ConstLabels: prometheus.Labels{"name": e.opts.Name},
	}, func() float64 {
		if e.IsLeader() {
			return 1
		}
		return 0
	})
}
