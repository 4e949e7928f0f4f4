package manager

import (
	"time"
)

// AbortTimeout exposes abortTimeout to the black-box tests.
func (m *Manager) AbortTimeout() time.Duration { return m.abortTimeout() }
