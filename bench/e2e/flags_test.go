package main

import (
	"testing"
	"time"
)

// TestParseOnly: "all" selects every section, names select theirs, and an
// unknown name is an error.
func TestParseOnly(t *testing.T) {
	all, err := parseOnly("all")
	if err != nil || len(all) != len(allSections) {
		t.Fatalf("parseOnly(all) = %v, %v; want every section", all, err)
	}
	some, err := parseOnly("storm, pods")
	if err != nil || len(some) != 2 || !some[secStorm] || !some[secPods] {
		t.Fatalf("parseOnly(storm, pods) = %v, %v", some, err)
	}
	if c := (config{only: some}); !c.partial() || c.runs(secChurn) {
		t.Errorf("-only storm,pods: partial %v, runs churn %v", c.partial(), c.runs(secChurn))
	}
	if w, err := parseOnly("writes"); err != nil || !w[secWrites] || len(w) != 1 {
		t.Errorf("parseOnly(writes) = %v, %v", w, err)
	}
	if c, err := parseOnly("crd"); err != nil || !c[secCRD] || len(c) != 1 {
		t.Errorf("parseOnly(crd) = %v, %v", c, err)
	}
	if all := (config{only: all}); !all.runs(secCRD) {
		t.Error("-only all does not run the crd section")
	}
	if _, err := parseOnly("storm,heap"); err == nil {
		t.Error("parseOnly(storm,heap): no error for an unknown section")
	}
}

// TestStormSpan: a short drain keeps -storm-updates at -storm-rate; a long
// one gets updates at the same rate across all of it.
func TestStormSpan(t *testing.T) {
	s := stormConfig{updates: 200, rate: 50}
	if got := s.span(10000, time.Millisecond); got != 4*time.Second {
		t.Errorf("1ms: span %v, want 4s (200 updates at 50/s; the drain is 2.5s)", got)
	}
	got := s.span(10000, 10*time.Millisecond)
	if want := 30 * time.Second; got != want { // 1.2 × 10,000 × 10ms ÷ 4
		t.Errorf("10ms: span %v, want %v", got, want)
	}
	if n := s.count(got); n != 1500 {
		t.Errorf("10ms: %d updates, want 1500", n)
	}
}

// TestWriteOrder: the writes section rotates its clients, so that over as
// many rounds as there are clients each takes each place once.
func TestWriteOrder(t *testing.T) {
	places := make([]map[int]bool, len(writeModes))
	for i := range places {
		places[i] = make(map[int]bool)
	}
	for round := range len(writeModes) {
		order := writeOrder(round)
		seen := make(map[int]bool)
		for place, m := range order {
			seen[m] = true
			places[m][place] = true
		}
		if len(seen) != len(writeModes) {
			t.Fatalf("round %d: order %v does not run every client once", round, order)
		}
	}
	for m, p := range places {
		if len(p) != len(writeModes) {
			t.Errorf("%s took places %v, want each of %d", writeModes[m].name, p, len(writeModes))
		}
	}
}

// TestWriteCases: quiet cases first, then loaded, each with every -write-conc.
func TestWriteCases(t *testing.T) {
	got := writeCases(config{writes: writeConfig{conc: []int{1, 8}}})
	want := []writeCase{{false, 1}, {false, 8}, {true, 1}, {true, 8}}
	if len(got) != len(want) {
		t.Fatalf("writeCases = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("writeCases[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}
