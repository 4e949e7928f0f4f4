package shard_test

import (
	"testing"

	"github.com/ctrlkit/ctrlkit/pkg/shard"
)

func TestDecide(t *testing.T) {
	alive := func(m string) bool { return m == "a" || m == "b" }
	for _, tc := range []struct {
		name             string
		current, desired string
		draining         bool
		want             shard.Action
	}{
		{"no members", "a", "", false, shard.Keep},
		{"unlabelled", "", "a", false, shard.Assign},
		{"acknowledged after a drain", "", "b", false, shard.Assign},
		{"in place", "a", "a", false, shard.Keep},
		{"live owner, moves", "a", "b", false, shard.Drain},
		{"live owner, draining", "a", "b", true, shard.Wait},
		{"draining, ring changed back", "a", "a", true, shard.Wait},
		{"dead owner", "c", "a", false, shard.Assign},
		{"dead owner, draining", "c", "a", true, shard.Assign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shard.Decide(tc.current, tc.draining, tc.desired, alive); got != tc.want {
				t.Errorf("Decide(%q, draining %v, desired %q) = %v, want %v", tc.current, tc.draining, tc.desired, got, tc.want)
			}
		})
	}
}
