//go:build linux

package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"

	ctrlkitclient "github.com/ctrlkit/ctrlkit/pkg/client"
	"github.com/ctrlkit/ctrlkit/pkg/informer"
	"github.com/ctrlkit/ctrlkit/pkg/leader"
	"github.com/ctrlkit/ctrlkit/pkg/manager"
	"github.com/ctrlkit/ctrlkit/pkg/objects"
	"github.com/ctrlkit/ctrlkit/pkg/reconcile"
)

// A replica is the test binary run again with replicaEnv set to its
// identity and configEnv naming its replicaConfig.
const (
	replicaEnv = "CTRLKIT_HA_REPLICA"
	configEnv  = "CTRLKIT_HA_CONFIG"
)

// The probe operator's data: the churn driver writes data[genKey], the
// probe copies it to the annotation observedKey.
const (
	genKey      = "gen"
	observedKey = "ha.ctrlkit.io/observed"
)

// replicaConfig is what a scenario tells its replicas.
type replicaConfig struct {
	Kubeconfig string
	Namespace  string // of the ConfigMaps and of the Lease
	Lease      string
	// Lease timings; zero means the leader package's defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Workers                                   int
	// Dir receives <identity>.jsonl (records) and <identity>.log.
	Dir string
	// Shard, when set, runs the sharded probe instead of the leader-elected
	// one (shard_replica_test.go).
	Shard *shardConfig `json:",omitempty"`
}

// Record kinds.
const (
	kindStart = "start" // a Reconcile began: ID, Key
	kindEnd   = "end"   // it returned: ID, Key, Result, Gen, Err
	kindWrite = "write" // a write left the HTTP transport at Wall and its response came at End
	kindLead  = "lead"  // Elector.IsLeader turned Result ("true"/"false")
	kindReady = "ready" // the caches synced
	kindExit  = "exit"  // Run returned Err
)

// record is one line of a replica's records file.
type record struct {
	Kind    string `json:"k"`
	Replica string `json:"r"`
	Wall    int64  `json:"w"`            // Unix ns, CLOCK_REALTIME
	Mono    int64  `json:"m"`            // ns since the replica started, monotonic
	ID      int64  `json:"id,omitempty"` // pairs a start with its end
	Key     string `json:"key,omitempty"`
	Result  string `json:"res,omitempty"`
	Gen     string `json:"gen,omitempty"`
	Err     string `json:"err,omitempty"`
	End     int64  `json:"we,omitempty"`   // write: Unix ns the response arrived
	Code    int    `json:"code,omitempty"` // write: HTTP status, 0 when none came
	Verb    string `json:"verb,omitempty"`
	Unsent  bool   `json:"unsent,omitempty"` // write: its ctx was done when it reached the transport
}

// recorder appends records to a file, one write(2) per record, so that a
// record is in the kernel as soon as add returns: kill -9 loses none.
// Safe for concurrent use.
type recorder struct {
	replica string
	t0      time.Time
	mu      sync.Mutex
	f       *os.File
}

func (r *recorder) add(rec record) {
	if rec.Wall == 0 {
		now := time.Now()
		rec.Wall, rec.Mono = now.UnixNano(), now.Sub(r.t0).Nanoseconds()
	}
	rec.Replica = r.replica
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err) // the record's fields all marshal
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(b); err != nil {
		fmt.Fprintf(os.Stderr, "ha: writing a record: %v\n", err)
	}
}

// transport records every write to ConfigMaps and Leases as it enters
// the HTTP transport (rest.Config.Wrap puts it right around the TLS
// transport): after client-go's rate limiter and after anything ctrlkit
// checks before sending, so Wall is the send time.
func (r *recorder) transport(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resource := writtenResource(req)
		if resource == "" {
			return rt.RoundTrip(req)
		}
		sent := time.Now()
		// net/http sends nothing for a request whose ctx is already done.
		unsent := req.Context().Err() != nil
		resp, err := rt.RoundTrip(req)
		rec := record{Kind: kindWrite, Wall: sent.UnixNano(), Mono: sent.Sub(r.t0).Nanoseconds(), End: time.Now().UnixNano(),
			Result: resource, Verb: req.Method, Key: path.Base(req.URL.Path), Err: errString(err), Unsent: unsent}
		if resp != nil {
			rec.Code = resp.StatusCode
		}
		r.add(rec)
		return resp, err
	})
}

// writtenResource is "configmaps" or "leases" for a write to one of them,
// else "".
func writtenResource(req *http.Request) string {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return ""
	}
	for _, res := range []string{"configmaps", "leases"} {
		if strings.Contains(req.URL.Path, "/"+res) {
			return res
		}
	}
	return ""
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// probe is the operator under test: it copies data[genKey] to the
// annotation observedKey through objects.CreateOrUpdate, ctrlkit's write
// helper, so that each Reconcile of a changed object makes one write.
type probe struct {
	ns     string
	lister informer.Lister[*corev1.ConfigMap]
	c      *ctrlkitclient.Client
	rec    *recorder
	seq    atomic.Int64
}

func (p *probe) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	id := p.seq.Add(1)
	p.rec.add(record{Kind: kindStart, ID: id, Key: req.Name, Result: startResult(ctx)})
	res, gen, err := p.observe(ctx, req.Name)
	p.rec.add(record{Kind: kindEnd, ID: id, Key: req.Name, Result: res, Gen: gen, Err: errString(err)})
	return reconcile.Result{}, err
}

func (p *probe) observe(ctx context.Context, name string) (result, gen string, err error) {
	if _, err := p.lister.Get(p.ns, name); apierrors.IsNotFound(err) {
		return "gone", "", nil // never Create what the driver did not
	} else if err != nil {
		return "error", "", err
	}
	_, op, err := objects.CreateOrUpdate(ctx, p.c, p.lister, p.ns, name, func(cm *corev1.ConfigMap) error {
		gen = cm.Data[genKey]
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[observedKey] = gen
		return nil
	})
	if err != nil {
		return "error", gen, err
	}
	return string(op), gen, nil
}

// replicaMain runs the replica name with the config in file configPath
// until SIGTERM or until Run fails, and returns the exit code.
func replicaMain(name, configPath string) int {
	t0 := time.Now()
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "ha replica %s: %v\n", name, err)
		return 2
	}
	b, err := os.ReadFile(configPath)
	if err != nil {
		return fail(err)
	}
	var c replicaConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fail(fmt.Errorf("%s: %w", configPath, err))
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, name+".jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	rec := &recorder{replica: name, t0: t0, f: f}

	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fail(err)
	}
	rc.Wrap(rec.transport)
	// A client-side limit, which the manager has none of by default: the
	// fault scenarios need the leader's workers waiting in it at the fault.
	rc.QPS, rc.Burst = haQPS, haBurst
	rc.UserAgent = userAgentPrefix + name // names the replica in the audit log
	log := funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000000"), prefix, args)
	}, funcr.Options{})
	if c.Shard != nil {
		return shardReplicaMain(name, c, rc, rec, log.WithValues("replica", name))
	}
	mgr, err := manager.New(rc, manager.Options{
		Name:      "ha-probe",
		Informers: informer.Options{Namespaces: []string{c.Namespace}},
		Logger:    log.WithValues("replica", name),
		LeaderElection: &leader.Options{
			Name: c.Lease, Namespace: c.Namespace, Identity: name,
			LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod,
		},
	})
	if err != nil {
		return fail(err)
	}
	cms, err := informer.For[*corev1.ConfigMap](mgr.Cache())
	if err != nil {
		return fail(err)
	}
	p := &probe{ns: c.Namespace, lister: cms.Lister(), c: mgr.Client(), rec: rec}
	if _, err := mgr.AddController("probe", p, manager.ControllerOptions{Workers: c.Workers}, manager.Watch{Source: cms}); err != nil {
		return fail(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pollCtx, stopPoll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { pollLeadership(pollCtx, mgr, rec) })
	err = mgr.Run(ctx)
	stopPoll()
	wg.Wait()
	rec.add(record{Kind: kindExit, Err: errString(err)})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "ha replica %s: Run: %v\n", name, err)
		return 3
	}
	return 0
}

// pollLeadership records when the caches first synced and every change
// of Elector.IsLeader, sampled every millisecond, until ctx ends.
func pollLeadership(ctx context.Context, mgr *manager.Manager, rec *recorder) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	ready, leading := false, false
	for {
		if !ready && mgr.Ready() {
			ready = true
			rec.add(record{Kind: kindReady})
		}
		if l := mgr.Elector().IsLeader(); l != leading {
			leading = l
			rec.add(record{Kind: kindLead, Result: fmt.Sprint(l)})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
