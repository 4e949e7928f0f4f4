//go:build linux

package ha

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/test/internal/leaks"
)

// setup is what a scenario runs: its replicas' workers and lease timings
// (zero: the defaults), and whether the objects start reconciled.
type setup struct {
	prefix              string
	workers             int
	lease, renew, retry time.Duration
	annotated           bool
}

// recordsDir is where the replicas of t write: a temporary directory, kept
// (and named in the log) when CTRLKIT_HA_KEEP is set.
func recordsDir(t *testing.T) string {
	if os.Getenv("CTRLKIT_HA_KEEP") == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("", "ctrlkit-ha-"+strings.ReplaceAll(t.Name(), "/", "-")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica records and logs are kept in %s", dir)
	return dir
}

// scenario is one scenario's objects, Lease recording and replicas.
type scenario struct {
	t     *testing.T
	r     *row
	c     kubernetes.Interface
	ns    string
	names []string
	lease *leaseWatch
	fleet *fleet
	// workers per replica: at most that many Reconciles of a replica
	// may begin fenced (setFencedApart).
	workers int
}

// newScenario creates objectCount objects in a new namespace and starts
// three replicas, and returns once every replica's caches have synced
// and one of them leads. When the test ends, the replicas are killed and
// no goroutine of the test process may be left.
func newScenario(t *testing.T, r *row, su setup) *scenario {
	t.Helper()
	baseline := goleak.IgnoreCurrent()
	c, closeConns := client(t)
	t.Cleanup(func() { leaks.None(t, closeConns, baseline, waitTimeout) }) // runs last
	s := &scenario{t: t, r: r, c: c, workers: su.workers}
	s.ns = newNamespace(t, s.c, su.prefix)
	s.names = createObjects(t, s.c, s.ns, objectCount, su.annotated)
	const lease = "ha-probe"
	s.lease = watchLease(t, s.c, s.ns, lease)
	s.fleet = startFleet(t, replicaConfig{
		Kubeconfig: kubeconfig, Namespace: s.ns, Lease: lease,
		LeaseDuration: su.lease, RenewDeadline: su.renew, RetryPeriod: su.retry,
		Workers: su.workers, Dir: recordsDir(t),
	}, "r0", "r1", "r2")
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range s.fleet.procs {
				t.Logf("last lines of replica %s's log (%s):\n%s", p.name, p.logPath, p.logTail(30))
			}
		}
	})
	eventually(t, 2*waitTimeout, func() bool {
		for _, p := range s.fleet.procs {
			if !hasKind(p.recs(), kindReady) {
				return false
			}
		}
		return true
	}, "every replica's caches to sync")
	eventually(t, waitTimeout, func() bool {
		h := s.lease.holder()
		return h != "" && s.lastLead(h, 0) == "true"
	}, "a replica to lead")
	return s
}

// finish stops the churn, waits for every object to converge, then judges
// the records of every replica against the Lease's history, filling in
// the row and failing the test on any lost object, overlapping Reconcile
// or non-leader write.
func (s *scenario) finish(ch *churn) {
	t, r := s.t, s.r
	t.Helper()
	ch.stop()
	stopped := time.Now()
	var (
		lost []string
		err  error
	)
	deadline := stopped.Add(convergeTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		lost, err = lostObjects(context.Background(), s.c, s.ns, s.names, ch)
		if (err == nil && len(lost) == 0) || time.Now().After(deadline) {
			break
		}
		<-tick.C
	}
	r.converged = time.Since(stopped)
	if err != nil {
		t.Fatalf("listing the objects: %v", err)
	}
	r.lost = len(lost)
	if len(lost) > 0 {
		t.Errorf("%d of %d objects were not reconciled at their last write within %v of the churn stopping (%d churn writes, %d failed), e.g. %s",
			len(lost), len(s.names), convergeTimeout, ch.writes, len(ch.errs), strings.Join(lost[:min(5, len(lost))], "; "))
	}

	recs, fenced, bad := setFencedApart(s.fleet.allRecords(), s.workers)
	for _, b := range bad {
		t.Error(b)
	}
	if fenced > 0 {
		r.note("%s", fencedNote(fenced))
	}
	acqs := s.lease.acquisitions()
	diedAt, pauses := map[string]int64{}, map[string][]span{}
	for _, p := range s.fleet.procs {
		killedAt, ps := p.facts()
		pauses[p.name] = ps
		if exited, at, _ := p.exit(); exited {
			diedAt[p.name] = at.UnixNano()
			if !killedAt.IsZero() {
				diedAt[p.name] = killedAt.UnixNano()
			}
		}
	}
	for _, rec := range recs {
		switch {
		case rec.Kind == kindStart:
			r.reconciles++
		case rec.Kind == kindWrite && rec.Result == "configmaps":
			r.writes++
		}
	}
	var active []overlap
	for _, o := range overlaps(intervals(recs, diedAt, time.Now().UnixNano()), pauses) {
		if o.active > 0 && !resumedAfterPause(o, pauses) {
			active = append(active, o)
		} else {
			r.frozen++
		}
	}
	r.overlapping = len(active)
	for i, o := range active {
		if i == 10 {
			t.Errorf("... and %d more overlapping Reconciles", len(active)-i)
			break
		}
		t.Errorf("overlapping Reconciles of one key on two replicas: %v", o)
	}
	writes := nonLeader(recs, acqs, kindWrite)
	r.nonLeaderSent = len(writes)
	for i, w := range writes {
		if i == 10 {
			t.Errorf("... and %d more writes sent while another replica held the Lease", len(writes)-i)
			break
		}
		t.Errorf("a write sent while another replica held the Lease: %s", describeWrite(w, acqs))
	}
	received, err := replicaWrites(s.ns)
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	late := nonLeaderReceived(received, acqs)
	r.nonLeaderRecv = len(late)
	for i, w := range late {
		if w.code/100 == 2 {
			r.nonLeaderOK++
		}
		if i < 10 {
			t.Errorf("the API server received a write while another replica held the Lease: %v (lease held by %q)", w, holderAt(acqs, w.received.UnixNano()))
		}
	}
	r.nonLeaderStart = len(nonLeader(recs, acqs, kindStart))
	r.done = true
	t.Logf("%s: Lease acquisitions %v; churn %d writes (%d failed)", r.scenario, acqs, ch.writes, len(ch.errs))
}

// leader is the Lease's current holder.
func (s *scenario) leader() string {
	s.t.Helper()
	h := s.lease.holder()
	if h == "" {
		s.t.Fatal("no replica holds the Lease")
	}
	return h
}

// waitTakeover waits until a replica other than old holds the Lease and
// returns its acquisition.
func (s *scenario) waitTakeover(old string, timeout time.Duration) acquisition {
	s.t.Helper()
	var acq acquisition
	eventually(s.t, timeout, func() bool {
		acqs := s.lease.acquisitions()
		if len(acqs) == 0 {
			return false
		}
		acq = acqs[len(acqs)-1]
		return acq.holder != old && acq.holder != ""
	}, "a replica other than %s to take the Lease", old)
	return acq
}

// waitWrites waits until replica name has had activeWrites ConfigMap
// writes accepted that it sent at or after since.
func (s *scenario) waitWrites(name string, since time.Time, what string) {
	s.t.Helper()
	p := s.fleet.proc(name)
	eventually(s.t, waitTimeout, func() bool {
		n := 0
		for _, rec := range p.recs() {
			if rec.Kind == kindWrite && rec.Result == "configmaps" && rec.Wall >= since.UnixNano() && rec.Code/100 == 2 {
				n++
			}
		}
		return n >= activeWrites
	}, "%s (%d writes by %s)", what, activeWrites, name)
}

// waitBusy waits until replica name has busyWorkers Reconciles in flight
// at once: the churn has outrun its client's rate limit, so a fault now
// hits writes waiting to be sent.
func (s *scenario) waitBusy(name string) {
	s.t.Helper()
	p := s.fleet.proc(name)
	eventually(s.t, waitTimeout, func() bool {
		open := map[int64]bool{}
		for _, rec := range p.recs() {
			switch rec.Kind {
			case kindStart:
				open[rec.ID] = true
			case kindEnd:
				delete(open, rec.ID)
			}
		}
		return len(open) >= busyWorkers
	}, "the leader %s to have %d Reconciles in flight under churn", name, busyWorkers)
}

// firstStart is when replica name first started a Reconcile at or after
// since.
func (s *scenario) firstStart(name string, since int64) (int64, bool) {
	for _, rec := range s.fleet.proc(name).recs() {
		if rec.Kind == kindStart && rec.Wall >= since {
			return rec.Wall, true
		}
	}
	return 0, false
}

// lastLead is what replica name's IsLeader last turned to at or after
// since: "true", "false", or "" if it did not change then.
func (s *scenario) lastLead(name string, since int64) string {
	last := ""
	for _, rec := range s.fleet.proc(name).recs() {
		if rec.Kind == kindLead && rec.Wall >= since {
			last = rec.Result
		}
	}
	return last
}

// firstLead is when replica name's IsLeader first turned to v at or after
// since.
func (s *scenario) firstLead(name string, since int64, v string) (int64, bool) {
	for _, rec := range s.fleet.proc(name).recs() {
		if rec.Kind == kindLead && rec.Wall >= since && rec.Result == v {
			return rec.Wall, true
		}
	}
	return 0, false
}

func hasKind(recs []record, kind string) bool {
	for _, r := range recs {
		if r.Kind == kind {
			return true
		}
	}
	return false
}
