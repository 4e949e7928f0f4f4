package shard

import (
	"testing"
)

func TestDecide(t *testing.T) {
	alive := func(m string) bool { return m == "a" || m == "b" }
	for _, tc := range []struct {
		name             string
		current, desired string
		draining         bool
		want             Action
	}{
		{"no members", "a", "", false, Keep},
		{"unlabelled", "", "a", false, Assign},
		{"acknowledged after a drain", "", "b", false, Assign},
		{"in place", "a", "a", false, Keep},
		{"live owner, moves", "a", "b", false, Drain},
		{"live owner, draining", "a", "b", true, Wait},
		{"draining, ring changed back", "a", "a", true, Wait},
		{"dead owner", "c", "a", false, Assign},
		{"dead owner, draining", "c", "a", true, Assign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideAction(tc.current, tc.draining, tc.desired, alive); got != tc.want {
				t.Errorf("Decide(%q, draining %v, desired %q) = %v, want %v", tc.current, tc.draining, tc.desired, got, tc.want)
			}
		})
	}
}
