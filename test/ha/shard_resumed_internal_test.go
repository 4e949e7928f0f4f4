//go:build linux

package ha

import (
	"testing"
	"time"
)

// TestResumedAfterPause: the judge excuses the moment a Reconcile frozen
// in flight by SIGSTOP runs on after SIGCONT, and nothing else: not one
// that started after SIGCONT, nor one that ran on for long.
func TestResumedAfterPause(t *testing.T) {
	ms := int64(time.Millisecond)
	pauses := map[string][]span{"r2": {{from: 1000 * ms, to: 13000 * ms}}}
	other := interval{replica: "r1", key: "k", start: 13000 * ms, end: 13040 * ms}
	for _, c := range []struct {
		name   string
		paused interval
		want   bool
	}{
		{"frozen in flight, 2ms after SIGCONT", interval{replica: "r2", key: "k", start: 900 * ms, end: 13002 * ms}, true},
		{"started after SIGCONT", interval{replica: "r2", key: "k", start: 13001 * ms, end: 13003 * ms}, false},
		{"frozen in flight, ran on 2s", interval{replica: "r2", key: "k", start: 900 * ms, end: 15000 * ms}, false},
	} {
		if got := resumedAfterPause(overlap{a: c.paused, b: other}, pauses); got != c.want {
			t.Errorf("%s: excused = %v, want %v", c.name, got, c.want)
		}
	}
}
