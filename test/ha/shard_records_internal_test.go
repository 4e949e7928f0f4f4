//go:build linux

package ha

import (
	"cmp"
	"slices"
	"testing"
	"time"
)

// The ownership judges of the sharding scenarios, on made-up histories:
// a check that cannot fail proves nothing.
func TestShardJudges(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	ns := func(s float64) int64 { return at(s).UnixNano() }
	events := []labelEvent{
		// k: assigned to ma, drained, acknowledged by ma, assigned to mb.
		{name: "k", rv: 10, owner: "ma", received: at(1)},
		{name: "k", rv: 20, owner: "ma", draining: true, received: at(5)},
		{name: "k", rv: 30, owner: "", received: at(6)},
		{name: "k", rv: 40, owner: "mb", received: at(7)},
		// j: assigned to ma, then directly to mb (ma died).
		{name: "j", rv: 11, owner: "ma", received: at(1)},
		{name: "j", rv: 50, owner: "mb", received: at(10)},
	}
	slices.SortFunc(events, func(a, b labelEvent) int { return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.rv, b.rv)) })
	members := map[string]string{"a": "ma", "b": "mb"}
	recs := []record{
		{Kind: kindStart, Replica: "a", Key: "k", Wall: ns(2)},                                                   // owned
		{Kind: kindStart, Replica: "a", Key: "k", Wall: ns(6.5)},                                                 // after its acknowledgement
		{Kind: kindStart, Replica: "b", Key: "k", Wall: ns(6.9)},                                                 // before its assignment
		{Kind: kindStart, Replica: "b", Key: "k", Wall: ns(7.1)},                                                 // owned
		{Kind: kindStart, Replica: "a", Key: "j", Wall: ns(9)},                                                   // owned, until it died
		{Kind: kindStart, Replica: "b", Key: "j", Wall: ns(11)},                                                  // owned
		{Kind: kindWrite, Replica: "a", Result: "configmaps", Verb: "PUT", Key: "k", Wall: ns(5.5), Code: 409},   // draining: still a's
		{Kind: kindWrite, Replica: "a", Result: "configmaps", Verb: "PUT", Key: "k", Wall: ns(6.2), Code: 409},   // after the acknowledgement
		{Kind: kindWrite, Replica: "a", Result: "configmaps", Verb: "PATCH", Key: "j", Wall: ns(6.2), Code: 200}, // a label write: not the probe's
		{Kind: kindWrite, Replica: "a", Result: "configmaps", Verb: "PUT", Key: "k", Wall: ns(8), Unsent: true},  // never sent
		{Kind: kindWrite, Replica: "a", Result: "leases", Verb: "PUT", Key: "k", Wall: ns(8), Code: 200},         // not a ConfigMap
	}
	ten := tenures(events)
	starts := notOwned(recs, members, ten, kindStart)
	if len(starts) != 2 || starts[0].Wall != ns(6.5) || starts[1].Wall != ns(6.9) {
		t.Errorf("non-owner starts = %v, want a's at 6.5s and b's at 6.9s", starts)
	}
	writes := notOwned(recs, members, ten, kindWrite)
	if len(writes) != 1 || writes[0].Wall != ns(6.2) || writes[0].Verb != "PUT" {
		t.Errorf("non-owner writes = %v, want a's PUT at 6.2s alone", writes)
	}

	m := countMoves(events)
	if m.assigned != 3 || m.drains != 1 || m.acks != 1 || m.handed != 1 || m.direct != 1 {
		t.Errorf("moves = %+v, want 3 assigned, 1 drain, 1 acknowledgement, 1 handed over and 1 direct", m)
	}
	if len(m.handover) != 1 || m.handover[0] != 2*time.Second {
		t.Errorf("handover times = %v, want [2s] (drain at 5s, assignment at 7s)", m.handover)
	}
	if d := m.directFrom["ma"]; len(d) != 1 || !d[0].Equal(at(10)) {
		t.Errorf("direct moves from ma = %v, want one at 10s", d)
	}

	hist := map[string][]labelObs{
		"k": {{rv: 10, owner: "ma"}, {rv: 15, owner: "ma"}, {rv: 20, owner: "ma", draining: true}, {rv: 40, owner: "mb"}},
		"j": {{rv: 11, owner: "ma"}, {rv: 45, owner: "mc"}}, // a change no write in the audit log explains
	}
	if u := unexplained(hist, events); len(u) != 1 {
		t.Errorf("unexplained label changes = %v, want j's at 45 alone", u)
	}
	if q := quantile([]time.Duration{3, 1, 2}, 0.5); q != 2 {
		t.Errorf("median of 1, 2, 3 = %v", q)
	}
}
