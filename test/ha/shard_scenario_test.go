//go:build linux

package ha

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlkit/ctrlkit/pkg/shard"
	"github.com/ctrlkit/ctrlkit/test/internal/leaks"
)

// shardSetup is what a sharding scenario runs.
type shardSetup struct {
	prefix    string
	objects   int
	workers   int
	work      time.Duration
	replicas  []string // started at once
	mutations map[string][]string
}

// shardScenario is one sharding scenario's objects, watches and replicas.
type shardScenario struct {
	t       *testing.T
	r       *shardRow
	c       kubernetes.Interface
	ns      string
	ring    string
	names   []string
	labels  *labelWatch
	sharder *leaseWatch
	fleet   *fleet
	members map[string]string      // replica → member name
	leases  map[string]*leaseWatch // replica → its member Lease
	workers int                    // per replica (setFencedApart)
}

// newShardScenario creates su.objects reconciled objects in a new
// namespace, watches their labels, and starts su.replicas, returning once
// each has synced its caches. Its ring is named after the namespace. When
// the test ends the replicas are killed, the objects deleted (newNamespace),
// and no goroutine of the test process may be left.
func newShardScenario(t *testing.T, r *shardRow, su shardSetup) *shardScenario {
	t.Helper()
	baseline := goleak.IgnoreCurrent()
	c, closeConns := client(t)
	t.Cleanup(func() { leaks.None(t, closeConns, baseline, waitTimeout) }) // runs last
	s := &shardScenario{t: t, r: r, c: c, members: map[string]string{}, leases: map[string]*leaseWatch{}, workers: su.workers}
	s.ns = newNamespace(t, c, "shard-"+su.prefix)
	s.ring = s.ns
	s.names = createObjects(t, c, s.ns, su.objects, true)
	s.labels = watchLabels(t, c, s.ns, s.ring)
	s.sharder = watchLease(t, c, s.ns, s.ring+"-sharder")
	s.fleet = startFleet(t, replicaConfig{
		Kubeconfig: kubeconfig, Namespace: s.ns,
		LeaseDuration: shardLease, RenewDeadline: shardRenew, RetryPeriod: shardRetry,
		Workers: su.workers, Dir: recordsDir(t),
		Shard: &shardConfig{Ring: s.ring, Work: su.work, QPS: shardQPS, Burst: 2 * shardQPS, Mutations: su.mutations},
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range s.fleet.procs {
				t.Logf("last lines of replica %s's log (%s):\n%s", p.name, p.logPath, p.logTail(30))
			}
		}
	})
	s.start(su.replicas...)
	return s
}

// start starts replicas and returns once each has synced its caches.
func (s *shardScenario) start(names ...string) {
	s.t.Helper()
	s.fleet.add(names...)
	for _, name := range names {
		s.waitStarted(name)
	}
}

// waitStarted waits until replica name has synced its caches, and starts
// watching its member Lease.
func (s *shardScenario) waitStarted(name string) {
	s.t.Helper()
	p := s.fleet.proc(name)
	eventually(s.t, 2*waitTimeout, func() bool {
		if exited, _, err := p.exit(); exited {
			s.t.Fatalf("replica %s exited while starting (%v):\n%s", name, err, p.logTail(30))
		}
		return hasKind(p.recs(), kindReady)
	}, "replica %s's caches to sync", name)
	for _, rec := range p.recs() {
		if rec.Kind == kindMember {
			s.members[name] = rec.Result
		}
	}
	if s.members[name] == "" {
		s.t.Fatalf("replica %s recorded no member name", name)
	}
	s.leases[name] = watchLease(s.t, s.c, s.ns, shard.LeaseName(s.ring, s.members[name]))
}

// placed lists the objects of names that are not where the ring of the
// replicas live puts them, or are draining.
func (s *shardScenario) placed(names []string, live ...string) (misplaced []string) {
	var members []string
	for _, r := range live {
		members = append(members, s.members[r])
	}
	ring := shard.NewRing(members...)
	cur := s.labels.current()
	for _, name := range names {
		o := cur[name]
		if want := ring.Owner(s.ns + "/" + name); o.owner != want || o.draining {
			misplaced = append(misplaced, fmt.Sprintf("%s on %q (draining %v), want %q", name, o.owner, o.draining, want))
		}
	}
	return misplaced
}

// settle waits until every object is labelled, not draining, for the
// member the ring of the replicas live picks.
func (s *shardScenario) settle(live ...string) {
	s.t.Helper()
	names := slices.Collect(maps.Keys(s.labels.current()))
	var misplaced []string
	eventually(s.t, 2*waitTimeout, func() bool {
		for _, r := range live {
			if exited, at, err := s.fleet.proc(r).exit(); exited {
				s.t.Fatalf("replica %s, which should be live, exited at %s (%v): it lost its member Lease, or failed:\n%s",
					r, at.Format("15:04:05.000"), err, s.fleet.proc(r).logTail(10))
			}
		}
		misplaced = s.placed(names, live...)
		return len(misplaced) == 0
	}, "every object on the member the ring of %v picks (misplaced: %v)", live, &misplaced)
}

// sharderReplica is the replica whose member holds the sharder Lease.
func (s *shardScenario) sharderReplica() string {
	h := s.sharder.holder()
	for r, m := range s.members {
		if m == h {
			return r
		}
	}
	return ""
}

// other is a replica of candidates that does not run the sharder.
func (s *shardScenario) other(candidates ...string) string {
	s.t.Helper()
	sh := s.sharderReplica()
	for _, c := range candidates {
		if c != sh {
			return c
		}
	}
	s.t.Fatalf("every replica of %v runs the sharder", candidates)
	return ""
}

// waitWrites waits until replica name has had n probe writes accepted
// that it sent at or after since.
func (s *shardScenario) waitWrites(name string, since time.Time, n int) {
	s.t.Helper()
	p := s.fleet.proc(name)
	eventually(s.t, waitTimeout, func() bool {
		got := 0
		for _, rec := range p.recs() {
			if rec.Kind == kindWrite && rec.Result == "configmaps" && rec.Verb == "PUT" && rec.Wall >= since.UnixNano() && rec.Code/100 == 2 {
				got++
			}
		}
		return got >= n
	}, "%d writes by %s under churn", n, name)
}

// churned is a churn and the objects it writes.
type churned struct {
	names []string
	ch    *churn
}

// finish stops the churns, then judges the scenario (judge) and fails the
// test on every breach.
func (s *shardScenario) finish(churns ...churned) {
	s.t.Helper()
	for _, b := range s.judge(convergeTimeout, churns...) {
		s.t.Error(b)
	}
}

// judge stops the churns, waits up to converge for every object to be
// reconciled at its last write, and judges the records of every replica
// against the ownership history: it fills in the row and returns every
// breach found, at most ten of a kind.
func (s *shardScenario) judge(converge time.Duration, churns ...churned) (breaches []string) {
	t, r := s.t, s.r
	t.Helper()
	for _, b := range churns {
		b.ch.stop()
	}
	stopped := time.Now()
	var lost []string
	eventually(t, converge+waitTimeout, func() bool {
		lost = lost[:0]
		for _, b := range churns {
			l, err := lostObjects(context.Background(), s.c, s.ns, b.names, b.ch)
			if err != nil {
				t.Logf("listing the objects: %v", err)
				return false
			}
			lost = append(lost, l...)
		}
		return len(lost) == 0 || time.Since(stopped) > converge
	}, "the objects to converge")
	r.converged = time.Since(stopped)
	r.lost = len(lost)
	add := func(n int, format string, args ...any) {
		if n < 10 {
			breaches = append(breaches, fmt.Sprintf(format, args...))
		} else if n == 10 {
			breaches = append(breaches, "... and more like it")
		}
	}
	if len(lost) > 0 {
		add(0, "%d objects were not reconciled at their last write within %v of the churn stopping, e.g. %s",
			len(lost), converge, strings.Join(lost[:min(5, len(lost))], "; "))
	}

	recs, fenced, bad := setFencedApart(s.fleet.allRecords(), s.workers)
	for i, b := range bad {
		add(i, "%s", b)
	}
	if fenced > 0 {
		r.note("%s", fencedNote(fenced))
	}
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
		if rec.Kind == kindStart {
			r.reconciles++
		}
	}
	for _, o := range overlaps(intervals(recs, diedAt, time.Now().UnixNano()), pauses) {
		if o.active == 0 || resumedAfterPause(o, pauses) {
			r.frozen++
			continue
		}
		add(r.overlapping, "overlapping Reconciles of one key on two replicas: %v", o)
		r.overlapping++
	}

	events, err := labelEvents(s.ns, s.ring)
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	for i, u := range unexplained(s.labels.history(), events) {
		add(i, "the test's watch saw a label change the audit log has no write for: %s", u)
	}
	ten := tenures(events)
	for i, w := range notOwned(recs, s.members, ten, kindStart) {
		add(i, "a Reconcile of a key its replica did not own: %s", describeNotOwned(w, s.members, ten))
		r.nonOwnerStarts++
	}
	for i, w := range notOwned(recs, s.members, ten, kindWrite) {
		add(i, "a write to a key its replica did not own: %s", describeNotOwned(w, s.members, ten))
		r.nonOwnerWrites++
	}
	r.moves = countMoves(events)
	r.done = true
	return breaches
}

// deadMoves checks that every key of the member of replica victim moved
// only once its Lease had expired, LeaseDuration after its last renewal
// that the test saw, and that its Lease was buried by the sharder first.
// It returns when the first and the last key moved.
func (s *shardScenario) deadMoves(victim string) (first, last time.Time) {
	s.t.Helper()
	events, err := labelEvents(s.ns, s.ring)
	if err != nil {
		s.t.Fatalf("reading the audit log: %v", err)
	}
	member := s.members[victim]
	moved := countMoves(events).directFrom[member]
	if len(moved) == 0 {
		s.t.Fatalf("no key of %s (member %s) was moved", victim, member)
	}
	var renewed time.Time
	buried := false
	for _, o := range s.leases[victim].observations() {
		if o.holder == member {
			renewed = o.renew
		}
		buried = buried || o.holder == "ctrlkit-sharder-buried"
	}
	if !buried {
		s.t.Errorf("the Lease of %s was not buried by the sharder before its keys moved", member)
	}
	first, last = slices.MinFunc(moved, time.Time.Compare), slices.MaxFunc(moved, time.Time.Compare)
	if expiry := renewed.Add(shardLease); first.Before(expiry) {
		s.t.Errorf("a key of %s moved at %s, before its Lease expired at %s (last renewal %s + LeaseDuration %v)",
			member, first.Format("15:04:05.000000"), expiry.Format("15:04:05.000000"), renewed.Format("15:04:05.000000"), shardLease)
	}
	return first, last
}

// observations is every version of the Lease seen so far.
func (lw *leaseWatch) observations() []leaseObs {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return slices.Clone(lw.obs)
}

// createNamed creates the ConfigMaps names in ns with gen 0, not yet
// reconciled.
func createNamed(t testing.TB, c kubernetes.Interface, ns string, names []string) {
	t.Helper()
	for _, name := range names {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{genKey: "0"}}
		if _, err := c.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// shardRow is one sharding scenario's line in the summary table.
type shardRow struct {
	scenario       string
	replicas       string // how the replicas changed, e.g. 1→3→4→2
	moves          moves
	reconciles     int
	overlapping    int // with active overlap
	frozen         int // overlapping only while one replica was stopped, or a Reconcile SIGSTOP froze in flight that ended within 1s of SIGCONT (resumedAfterPause)
	lost           int
	nonOwnerStarts int
	nonOwnerWrites int
	converged      time.Duration // churn stopped → every object converged
	notes          []string
	ran, done      bool
}

func (r *shardRow) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// shardTable renders rows as a fixed-width table.
func shardTable(rows []*shardRow) string {
	header := []string{"scenario", "replicas", "handovers (drained+direct)", "drains", "reconciles", "overlapping", "lost",
		"non-owner starts", "non-owner writes", "handover p50/max", "converged"}
	cells := [][]string{header}
	rows = slices.DeleteFunc(slices.Clone(rows), func(r *shardRow) bool { return !r.ran })
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	for _, r := range rows {
		name := r.scenario
		if !r.done {
			name += " (incomplete)"
		}
		handover := "-"
		if len(r.moves.handover) > 0 {
			handover = ms(quantile(r.moves.handover, 0.5)) + "/" + ms(quantile(r.moves.handover, 1))
		}
		cells = append(cells, []string{name, r.replicas, fmt.Sprintf("%d+%d", r.moves.handed, r.moves.direct), fmt.Sprint(r.moves.drains),
			fmt.Sprint(r.reconciles), fmt.Sprintf("%d (+%d frozen)", r.overlapping, r.frozen), fmt.Sprint(r.lost),
			fmt.Sprint(r.nonOwnerStarts), fmt.Sprint(r.nonOwnerWrites), handover, ms(r.converged)})
	}
	widths := make([]int, len(header))
	for _, c := range cells {
		for i, s := range c {
			widths[i] = max(widths[i], len([]rune(s)))
		}
	}
	var b strings.Builder
	for n, c := range cells {
		for i, s := range c {
			fmt.Fprintf(&b, "| %s%s ", s, strings.Repeat(" ", widths[i]-len([]rune(s))))
		}
		b.WriteString("|\n")
		if n == 0 {
			for i := range header {
				b.WriteString("|" + strings.Repeat("-", widths[i]+2))
			}
			b.WriteString("|\n")
		}
	}
	for _, r := range rows {
		for _, n := range r.notes {
			fmt.Fprintf(&b, "%s: %s\n", r.scenario, n)
		}
	}
	return b.String()
}

// resumedAfterPause reports whether o is a Reconcile that SIGSTOP froze in
// flight and that ran on for at most a second after SIGCONT: no
// implementation can preempt it, and its replica's fence keeps it from
// writing (judged apart, as writes by a replica that no longer owns the
// key). A Reconcile that starts after SIGCONT is never excused here; one
// that began fenced was set apart before (setFencedApart).
func resumedAfterPause(o overlap, pauses map[string][]span) bool {
	for _, iv := range []interval{o.a, o.b} {
		for _, p := range pauses[iv.replica] {
			if iv.start < p.from && iv.end > p.to && iv.end-p.to <= int64(time.Second) {
				return true
			}
		}
	}
	return false
}
