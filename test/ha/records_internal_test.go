//go:build linux

package ha

import (
	"slices"
	"testing"
	"time"
)

// The judges of the scenarios, on made-up records: a check that cannot
// fail proves nothing.
func TestJudges(t *testing.T) {
	at := func(s float64) int64 {
		return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))).UnixNano()
	}
	recs := []record{
		{Kind: kindStart, Replica: "a", ID: 1, Key: "k", Wall: at(0)},
		{Kind: kindEnd, Replica: "a", ID: 1, Key: "k", Wall: at(10)}, // spans a's pause [1, 9]
		{Kind: kindStart, Replica: "b", ID: 1, Key: "k", Wall: at(2)},
		{Kind: kindEnd, Replica: "b", ID: 1, Key: "k", Wall: at(3)}, // during a's pause: frozen
		{Kind: kindStart, Replica: "b", ID: 2, Key: "k", Wall: at(9.5)},
		{Kind: kindEnd, Replica: "b", ID: 2, Key: "k", Wall: at(11)},      // after a woke: active 0.5s
		{Kind: kindStart, Replica: "c", ID: 1, Key: "other", Wall: at(4)}, // never ended: c died at 5
		{Kind: kindStart, Replica: "b", ID: 3, Key: "other", Wall: at(5)},
		{Kind: kindEnd, Replica: "b", ID: 3, Key: "other", Wall: at(6)},
		{Kind: kindWrite, Replica: "a", Result: "configmaps", Key: "k", Wall: at(0.5), Code: 200},
		{Kind: kindWrite, Replica: "a", Result: "configmaps", Key: "k", Wall: at(9.6), Code: 409},
		{Kind: kindWrite, Replica: "a", Result: "leases", Wall: at(9.7), Code: 200},
		{Kind: kindWrite, Replica: "b", Result: "configmaps", Key: "k", Wall: at(9.8), Code: 200},
	}
	ovs := overlaps(intervals(recs, map[string]int64{"c": at(5)}, at(100)), map[string][]span{"a": {{at(1), at(9)}}})
	if len(ovs) != 2 {
		t.Fatalf("overlaps = %v, want 2", ovs)
	}
	if ovs[0].active != 0 || ovs[1].active != 500*time.Millisecond {
		t.Errorf("active overlaps = %v, %v, want 0 (while a was stopped) and 500ms", ovs[0].active, ovs[1].active)
	}
	acqs := []acquisition{{"a", time.Unix(0, at(-1))}, {"b", time.Unix(0, at(1.5))}}
	writes := nonLeader(recs, acqs, kindWrite)
	if len(writes) != 1 || writes[0].Wall != at(9.6) || writes[0].Code != 409 {
		t.Errorf("non-leader writes = %v, want a's refused write at 9.6s alone", writes)
	}
	if starts := nonLeader(recs, acqs, kindStart); len(starts) != 1 || starts[0].Replica != "c" {
		t.Errorf("non-leader starts = %v, want c's alone", starts)
	}
	if h := holderAt(acqs, at(-2)); h != "" {
		t.Errorf("holder before the first acquisition = %q, want none", h)
	}
}

// TestFencedApart: Reconciles that began fenced are taken out of the
// start judges with their ends, their writes are kept, and more of them
// on one replica than it has workers, or one that ran over
// fencedRunLimit, is a breach.
func TestFencedApart(t *testing.T) {
	recs := []record{
		{Kind: kindStart, Replica: "a", ID: 1, Key: "k", Result: resultFenced},
		{Kind: kindEnd, Replica: "a", ID: 1, Key: "k"},
		{Kind: kindWrite, Replica: "a", Key: "k", Result: "configmaps"},
		{Kind: kindStart, Replica: "a", ID: 2, Key: "j", Result: resultFenced}, // never ended
		{Kind: kindStart, Replica: "a", ID: 3, Key: "k"},
		{Kind: kindEnd, Replica: "a", ID: 3, Key: "k"},
		{Kind: kindStart, Replica: "b", ID: 1, Key: "k"}, // b's ID 1 is not a's
		{Kind: kindEnd, Replica: "b", ID: 1, Key: "k"},
	}
	rest, fenced, bad := setFencedApart(recs, 2)
	if fenced != 2 || len(bad) != 0 {
		t.Errorf("with 2 workers: %d fenced, breaches %q; want 2 and none", fenced, bad)
	}
	var kept []string
	for _, r := range rest {
		kept = append(kept, r.Kind+"/"+r.Replica)
	}
	want := []string{kindWrite + "/a", kindStart + "/a", kindEnd + "/a", kindStart + "/b", kindEnd + "/b"}
	if !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if _, _, bad := setFencedApart(recs, 1); len(bad) != 1 {
		t.Errorf("with 1 worker: breaches %q, want one for replica a", bad)
	}
	recs[1].Wall = recs[0].Wall + int64(fencedRunLimit) + 1 // a's fenced Reconcile of k ran on
	if _, _, bad := setFencedApart(recs, 2); len(bad) != 1 {
		t.Errorf("a fenced Reconcile that ran over %v: breaches %q, want one", fencedRunLimit, bad)
	}
}
