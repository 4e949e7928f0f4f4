package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if its tests leave a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
