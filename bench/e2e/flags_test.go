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
