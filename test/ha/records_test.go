//go:build linux

package ha

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ctrlkit/ctrlkit/pkg/leader"
)

// interval is one Reconcile of key on replica, [start, end] in Unix ns.
type interval struct {
	replica, key string
	id           int64
	start, end   int64
	open         bool // no end was recorded: end is when the process died, or the analysis time
}

// reconcileID names one Reconcile: its start and end records share it.
type reconcileID struct {
	replica string
	n       int64
}

func (r record) reconcileID() reconcileID { return reconcileID{r.Replica, r.ID} }

// intervals pairs the start and end records of every Reconcile. A
// Reconcile with no end ran until its process died (diedAt, by replica)
// or, if it still runs, until now.
func intervals(recs []record, diedAt map[string]int64, now int64) []interval {
	ends := map[reconcileID]int64{}
	for _, r := range recs {
		if r.Kind == kindEnd {
			ends[r.reconcileID()] = r.Wall
		}
	}
	var out []interval
	for _, r := range recs {
		if r.Kind != kindStart {
			continue
		}
		iv := interval{replica: r.Replica, key: r.Key, id: r.ID, start: r.Wall}
		if e, ok := ends[r.reconcileID()]; ok {
			iv.end = e
		} else {
			iv.open = true
			iv.end = cmp.Or(diedAt[r.Replica], now)
		}
		out = append(out, iv)
	}
	return out
}

// overlap is two Reconciles of one key on two replicas at once.
type overlap struct {
	a, b interval
	// active is how long both were running, not counting any time either
	// process was stopped; 0 means they overlapped only while one of
	// them was stopped.
	active time.Duration
}

func (o overlap) String() string {
	ts := func(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000000") }
	return fmt.Sprintf("%s: %s #%d [%s, %s]%s and %s #%d [%s, %s]%s, active overlap %v", o.a.key,
		o.a.replica, o.a.id, ts(o.a.start), ts(o.a.end), openMark(o.a), o.b.replica, o.b.id, ts(o.b.start), ts(o.b.end), openMark(o.b), o.active)
}

func openMark(iv interval) string {
	if iv.open {
		return " (no end recorded)"
	}
	return ""
}

// overlaps finds every pair of Reconciles of one key by two replicas whose
// [start, end] intersect. pauses holds, by replica, when it was stopped.
func overlaps(ivs []interval, pauses map[string][]span) []overlap {
	byKey := map[string][]interval{}
	for _, iv := range ivs {
		byKey[iv.key] = append(byKey[iv.key], iv)
	}
	var out []overlap
	for _, list := range byKey {
		slices.SortFunc(list, func(a, b interval) int { return cmp.Compare(a.start, b.start) })
		for i, a := range list {
			for _, b := range list[i+1:] {
				if b.start >= a.end {
					break
				}
				if b.replica == a.replica {
					continue
				}
				lo, hi := b.start, min(a.end, b.end)
				if lo >= hi {
					continue
				}
				cut := slices.Concat(pauses[a.replica], pauses[b.replica])
				out = append(out, overlap{a: a, b: b, active: time.Duration(activeLength(lo, hi, cut))})
			}
		}
	}
	slices.SortFunc(out, func(x, y overlap) int { return cmp.Compare(x.b.start, y.b.start) })
	return out
}

// activeLength is how much of [lo, hi] no span in cut covers.
func activeLength(lo, hi int64, cut []span) int64 {
	segs := []span{{lo, hi}}
	for _, c := range cut {
		var next []span
		for _, s := range segs {
			if c.to <= s.from || c.from >= s.to {
				next = append(next, s)
				continue
			}
			if c.from > s.from {
				next = append(next, span{s.from, c.from})
			}
			if c.to < s.to {
				next = append(next, span{c.to, s.to})
			}
		}
		segs = next
	}
	var n int64
	for _, s := range segs {
		n += s.to - s.from
	}
	return n
}

// nonLeader lists the records of kind (kindWrite to ConfigMaps, or
// kindStart) whose time falls after another replica acquired the Lease,
// that is when acqs says someone else held it. A write whose ctx was done
// before it reached the transport was not sent and does not count.
func nonLeader(recs []record, acqs []acquisition, kind string) []record {
	var out []record
	for _, r := range recs {
		if r.Kind != kind || (kind == kindWrite && (r.Result != "configmaps" || r.Unsent)) {
			continue
		}
		if holderAt(acqs, r.Wall) != r.Replica {
			out = append(out, r)
		}
	}
	return out
}

// describeWrite is a write for a failure message.
func describeWrite(w record, acqs []acquisition) string {
	h := holderAt(acqs, w.Wall)
	return fmt.Sprintf("%s %s %s sent %s (lease held by %q), status %d %s", w.Replica, w.Verb, w.Key,
		time.Unix(0, w.Wall).Format("15:04:05.000000"), h, w.Code, w.Err)
}

// row is one scenario's line in the summary table.
type row struct {
	scenario       string
	takeover       time.Duration // fault → another replica's acquireTime; 0 when not measured
	bound          time.Duration
	lost           int
	overlapping    int // with active overlap
	frozen         int // overlapping only while one replica was stopped, or a Reconcile SIGSTOP froze in flight that ended within 1s of SIGCONT (resumedAfterPause)
	nonLeaderSent  int // ConfigMap writes sent while another replica held the Lease, by the replicas' records
	nonLeaderRecv  int // ConfigMap writes received while another replica held the Lease, by the audit log
	nonLeaderOK    int // of which the API server accepted
	nonLeaderStart int // Reconciles started while another replica held the Lease
	reconciles     int
	writes         int
	converged      time.Duration // churn stopped → every object converged
	notes          []string
	ran, done      bool // the scenario started; it got as far as its figures
}

func (r *row) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// table renders rows as a fixed-width table.
func table(rows []*row) string {
	var b strings.Builder
	header := []string{"scenario", "takeover", "bound", "lost", "overlapping", "non-leader writes (sent/received/accepted)", "non-leader starts", "reconciles", "writes", "converged"}
	cells := [][]string{header}
	rows = slices.DeleteFunc(slices.Clone(rows), func(r *row) bool { return !r.ran })
	for _, r := range rows {
		takeover, bound := "-", "-"
		if r.takeover > 0 {
			takeover = r.takeover.Round(time.Millisecond).String()
		}
		if r.bound > 0 {
			bound = r.bound.String()
		}
		name := r.scenario
		if !r.done {
			name += " (incomplete)"
		}
		cells = append(cells, []string{name, takeover, bound, fmt.Sprint(r.lost), fmt.Sprintf("%d (+%d frozen)", r.overlapping, r.frozen),
			fmt.Sprintf("%d/%d/%d", r.nonLeaderSent, r.nonLeaderRecv, r.nonLeaderOK), fmt.Sprint(r.nonLeaderStart), fmt.Sprint(r.reconciles), fmt.Sprint(r.writes),
			r.converged.Round(time.Millisecond).String()})
	}
	widths := make([]int, len(header))
	for _, c := range cells {
		for i, s := range c {
			widths[i] = max(widths[i], len(s))
		}
	}
	for n, c := range cells {
		for i, s := range c {
			fmt.Fprintf(&b, "| %-*s ", widths[i], s)
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

// resultFenced is the Result of a start record whose Reconcile began with
// leader.CheckLeading already failing. A correct replica starts one only
// if a worker passed its last check of the lease and was then frozen
// (SIGSTOP, or starved of CPU) before its call to Reconcile: package
// leader documents that window, at most one per worker. Such a Reconcile
// is judged by what it writes (every write judge keeps it), not by its
// start.
const resultFenced = "fenced"

// startResult is the Result of a Reconcile's start record: resultFenced
// if ctx's term of leadership (or membership) was already over.
func startResult(ctx context.Context) string {
	if leader.CheckLeading(ctx) != nil {
		return resultFenced
	}
	return ""
}

// fencedRunLimit bounds how long a Reconcile that began fenced may run:
// its ctx is cancelled as soon as its process runs its timers.
const fencedRunLimit = time.Second

// setFencedApart returns recs without the start and end records of the
// Reconciles that began fenced, and the breaches found in those: one
// that ran longer than fencedRunLimit (its ctx was not cancelled), or a
// replica with more of them than workers, so more than its workers could
// have been frozen between their check and their call (it checks too
// early or not at all). fenced counts them.
func setFencedApart(recs []record, workers int) (rest []record, fenced int, breaches []string) {
	apart, per := map[reconcileID]int64{}, map[string]int{} // start times
	for _, r := range recs {
		if r.Kind == kindStart && r.Result == resultFenced {
			apart[r.reconcileID()] = r.Wall
			per[r.Replica]++
		}
	}
	for _, r := range recs {
		start, ok := apart[r.reconcileID()]
		if ok && r.Kind == kindEnd {
			if ran := time.Duration(r.Wall - start); ran > fencedRunLimit {
				breaches = append(breaches, fmt.Sprintf("replica %s's Reconcile of %s began with its fence closed and ran %v, over %v: its ctx was not cancelled",
					r.Replica, r.Key, ran.Round(time.Millisecond), fencedRunLimit))
			}
		}
		if ok && (r.Kind == kindStart || r.Kind == kindEnd) {
			continue
		}
		rest = append(rest, r)
	}
	for _, name := range slices.Sorted(maps.Keys(per)) {
		if per[name] > workers {
			breaches = append(breaches, fmt.Sprintf("replica %s started %d Reconciles with its fence already closed, more than its %d workers could have been frozen between their last check and their call: it checks the lease too early or not at all",
				name, per[name], workers))
		}
	}
	return rest, len(apart), breaches
}

// fencedNote is the scenario note on n Reconciles set apart by
// setFencedApart.
func fencedNote(n int) string {
	return fmt.Sprintf("%d Reconciles began with their fence already closed (a worker frozen between its check and its call); their writes are judged with the rest", n)
}
