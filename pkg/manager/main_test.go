package manager_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if its tests leave a goroutine behind; tests
// that stop a manager also check at that point (goleak.VerifyNone).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
