//go:build linux

package ha

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

const (
	// objectCount ConfigMaps per scenario, in one namespace.
	objectCount = 500
	// Short lease timings for the kill and pause scenarios. The fence
	// closes RenewDeadline + RetryPeriod = 2.5s after the last renewal; a
	// standby may take over LeaseDuration = 4s after it.
	shortLease, shortRenew, shortRetry = 4 * time.Second, 2 * time.Second, 500 * time.Millisecond
	// maxTakeover is the longest a takeover may take after the leader
	// died, by client-go's timing: a standby tries every RetryPeriod ×
	// [1, 1+JitterFactor], so it sees the last renewal up to 2.2 ×
	// RetryPeriod after it and, LeaseDuration after that, tries again up
	// to 2.2 × RetryPeriod late. Issue 11's target, LeaseDuration + 2 ×
	// RetryPeriod (the row's bound), is exceeded by a few per cent of
	// kills by design: it is reported, not failed.
	maxTakeover = shortLease + 2*time.Duration((1+leaderelection.JitterFactor)*float64(shortRetry))
	// pauseFor is the shortest SIGSTOP: twice LeaseDuration, as issue
	// 11's 8s.
	pauseFor = 2 * shortLease
	// faultWorkers is the workers per replica in the kill and pause
	// scenarios; faultChurn the churn driver's writes per second there:
	// twice what the leader's client (haQPS) can write, so at the
	// fault its workers wait in the client's rate limiter with writes the
	// fence must hold back.
	faultWorkers, faultChurn = 16, 40
	// haQPS and haBurst are the client-side rate limit of the HA
	// scenarios' replicas: client-go's QPS and Burst as controllers long
	// ran with, before controller-runtime and ctrlkit dropped the limit.
	haQPS, haBurst = 20, 30
	// The load scenario: 256 workers, churn well above the haQPS writes
	// per second the leader's client allows, for loadFor.
	loadWorkers, loadChurn, loadFor = 256, 50, 60 * time.Second
	// convergeTimeout bounds the wait, after the churn stops, for every
	// object to be reconciled at its last write. At 20 writes per second
	// 500 dirty objects take 25s.
	convergeTimeout = 90 * time.Second
	// busyWorkers is how many of the leader's faultWorkers must be in a
	// Reconcile when the fault is injected.
	busyWorkers = faultWorkers / 2
	// activeWrites is how many writes a leader must have made under churn
	// before a fault is injected or the churn is stopped, to show it works.
	activeWrites = 20
)

// TestHA runs the scenarios of issue 11 in turn and logs their figures as
// one table.
func TestHA(t *testing.T) {
	var rows []*row
	t.Cleanup(func() { t.Logf("process-level HA faults (%d objects, 3 replicas):\n%s", objectCount, table(rows)) })
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *row)
	}{
		{"kill-9-leader", killLeader},
		{"sigstop-leader", pauseLeader},
		{"load-256-workers", loadLeader},
	} {
		r := &row{scenario: sc.name}
		rows = append(rows, r) // shown only if -run selects it
		t.Run(sc.name, func(t *testing.T) {
			r.ran = true
			sc.run(t, r)
		})
	}
}

// killLeader: kill -9 of the leader under churn, while its workers wait
// to write. A standby takes the Lease within client-go's worst case
// (maxTakeover; issue 11's LeaseDuration + 2 × RetryPeriod is reported),
// and nothing is lost.
func killLeader(t *testing.T, r *row) {
	s := newScenario(t, r, setup{prefix: "kill", workers: faultWorkers, lease: shortLease, renew: shortRenew, retry: shortRetry, annotated: true})
	r.bound = shortLease + 2*shortRetry
	ch := startChurn(t, s.c, s.ns, s.names, faultChurn)
	old := s.leader()
	s.waitBusy(old)

	killedAt := s.fleet.kill(s.fleet.proc(old))
	acq := s.waitTakeover(old, r.bound+waitTimeout)
	r.takeover = acq.at.Sub(killedAt)
	if r.takeover > maxTakeover {
		t.Errorf("takeover took %v after kill -9, want at most LeaseDuration + 2 × (1 + JitterFactor) × RetryPeriod = %v (issue 11's target: LeaseDuration + 2 × RetryPeriod = %v)",
			r.takeover, maxTakeover, r.bound)
	}
	if r.takeover > r.bound {
		r.note("takeover %v exceeds issue 11's LeaseDuration + 2 × RetryPeriod (%v), within client-go's jittered worst case (%v)", r.takeover, r.bound, maxTakeover)
	}
	s.waitWrites(acq.holder, acq.at, "the new leader to reconcile under churn")
	first, _ := s.firstStart(acq.holder, killedAt.UnixNano())
	r.note("%s killed; %s acquired the Lease %v later and started reconciling %v after the kill",
		old, acq.holder, r.takeover.Round(time.Millisecond), time.Unix(0, first).Sub(killedAt).Round(time.Millisecond))
	s.finish(ch)
}

// pauseLeader: SIGSTOP of the leader until a standby has taken the Lease
// and is reconciling, then SIGCONT. The old leader sends no write after
// the takeover, and no two replicas reconcile one key at once.
func pauseLeader(t *testing.T, r *row) {
	s := newScenario(t, r, setup{prefix: "pause", workers: faultWorkers, lease: shortLease, renew: shortRenew, retry: shortRetry, annotated: true})
	r.bound = shortLease + 2*shortRetry
	ch := startChurn(t, s.c, s.ns, s.names, faultChurn)
	old := s.leader()
	p := s.fleet.proc(old)
	s.waitBusy(old)

	stoppedAt := s.fleet.stop(p)
	acq := s.waitTakeover(old, r.bound+waitTimeout)
	r.takeover = acq.at.Sub(stoppedAt)
	// The fault is the pause itself: it lasts until the new leader has
	// been writing for a while, and at least pauseFor, so the old one
	// wakes into a split brain, as in issue 11.
	s.waitWrites(acq.holder, acq.at, "the new leader to reconcile while the old one is stopped")
	hold := time.NewTimer(time.Until(stoppedAt.Add(pauseFor)))
	defer hold.Stop()
	<-hold.C
	contAt := s.fleet.cont(p)
	paused := contAt.Sub(stoppedAt)
	if paused <= shortLease {
		t.Fatalf("the leader was stopped for %v, not longer than LeaseDuration (%v)", paused, shortLease)
	}
	// The old leader must notice it lost: it stops leading (and, without
	// RecampaignOnLeaseLost, its Run returns and the process exits).
	eventually(t, waitTimeout, func() bool {
		exited, _, _ := p.exit()
		return exited || s.lastLead(old, contAt.UnixNano()) == "false"
	}, "the old leader %s to stop leading after SIGCONT", old)
	s.waitWrites(acq.holder, contAt, "the new leader to reconcile after the old one woke")
	s.finish(ch)

	wake := contAt.UnixNano()
	starts, fenced, writes, unsent := 0, 0, 0, 0
	for _, rec := range p.recs() {
		switch {
		case rec.Wall < wake:
		case rec.Kind == kindStart && rec.Result == resultFenced:
			fenced++
		case rec.Kind == kindStart:
			starts++
		case rec.Kind == kindWrite && rec.Result == "configmaps" && rec.Unsent:
			unsent++
		case rec.Kind == kindWrite && rec.Result == "configmaps":
			writes++
		}
	}
	gaveUp := "never"
	if at, ok := s.firstLead(old, wake, "false"); ok {
		gaveUp = fmt.Sprintf("%v after", time.Unix(0, at).Sub(contAt).Round(time.Millisecond))
	}
	exitNote := "still running"
	if exited, at, err := p.exit(); exited {
		exitNote = fmt.Sprintf("exited %v after SIGCONT (%v)", at.Sub(contAt).Round(time.Millisecond), err)
	}
	r.note("%s stopped for %v; %s acquired the Lease %v after SIGSTOP", old, paused.Round(time.Millisecond), acq.holder, r.takeover.Round(time.Millisecond))
	r.note("after SIGCONT the old leader started %d Reconciles (and %d with its fence closed, frozen between check and call) and sent %d ConfigMap writes (%d more reached its transport with their ctx cancelled, unsent); IsLeader false %s SIGCONT; %s",
		starts, fenced, writes, unsent, gaveUp, exitNote)
}

// loadLeader: 256 workers, one write per Reconcile, a client limited to
// haQPS and the default lease timings, under churn for loadFor: the leader never
// loses the Lease and everything converges.
func loadLeader(t *testing.T, r *row) {
	s := newScenario(t, r, setup{prefix: "load", workers: loadWorkers, annotated: false})
	first := s.leader()
	ch := startChurn(t, s.c, s.ns, s.names, loadChurn)
	window := time.NewTimer(loadFor) // the duration of the load is the fault
	defer window.Stop()
	<-window.C
	s.finish(ch)

	acqs := s.lease.acquisitions()
	if len(acqs) != 1 || s.lease.holder() != first {
		t.Errorf("the Lease changed hands under load: acquisitions %v, want only %s's", acqs, first)
	}
	if at, ok := s.firstLead(first, 0, "false"); ok {
		t.Errorf("the leader %s stopped leading at %s under load", first, time.Unix(0, at).Format("15:04:05.000"))
	}
	for _, p := range s.fleet.procs {
		if exited, at, err := p.exit(); exited {
			t.Errorf("replica %s exited at %s under load: %v", p.name, at.Format("15:04:05.000"), err)
		}
	}
	var slowest time.Duration
	leaseWrites, failed := 0, 0
	for _, rec := range s.fleet.proc(first).recs() {
		if rec.Kind == kindWrite && rec.Result == "leases" {
			leaseWrites++
			slowest = max(slowest, time.Duration(rec.End-rec.Wall))
			if rec.Code/100 != 2 {
				failed++
			}
		}
	}
	r.note("churn %.0f writes/s for %v; %d Lease holder(s); longest the Lease went unrenewed %v (RetryPeriod %v, RenewDeadline %v); "+
		"the first leader's %d Lease writes took at most %v on the wire, %d refused",
		ch.rate(), loadFor, len(acqs), s.lease.maxRenewGap().Round(time.Millisecond), leader.DefaultRetryPeriod, leader.DefaultRenewDeadline,
		leaseWrites, slowest.Round(time.Millisecond), failed)
}
