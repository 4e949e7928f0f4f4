// Package leaks is the goroutine check of the test suites that share a
// control plane with goroutines of their own (test/e2e, test/ha).
package leaks

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// None fails t unless, once closeConns has closed the test's idle
// connections, no goroutine beyond baseline is left within timeout.
func None(t testing.TB, closeConns func(), baseline goleak.Option, timeout time.Duration) {
	t.Helper()
	closeConns()
	deadline := time.Now().Add(timeout)
	for {
		err := goleak.Find(baseline)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Error(err)
			return
		}
	}
}
