// Package machine tells the benchmark programs about the machine they
// run on, for their reports.
package machine

import (
	"os"
	"strings"
)

// LoadAverage is the machine's 1, 5 and 15 minute load averages, as
// /proc/loadavg says, or "?".
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
