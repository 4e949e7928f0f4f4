package leader

import (
	"time"
)

// AgeRenewal moves e's last renewal d into the past, as a pause of the
// whole process for d would: time passes and no goroutine runs.
func AgeRenewal(e *Elector, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.renewedAt = e.renewedAt.Add(-d)
}

// LeaseConfig exposes leaseConfig to the black-box tests.
var LeaseConfig = leaseConfig

// Access is e.access: what every read and write of the Lease records.
func Access(e *Elector, err error) { e.access(err) }
