package leader

import "time"

// AgeRenewal moves e's last renewal d into the past, as a pause of the
// whole process for d would: time passes and no goroutine runs.
func AgeRenewal(e *Elector, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.renewedAt = e.renewedAt.Add(-d)
}

// LeaseConfig exposes leaseConfig to the black-box tests.
var LeaseConfig = leaseConfig
