package manager

import (
	"time"

	"github.com/ctrlkit/ctrlkit/pkg/informer"
)

// NewWithClients exposes newWithClients to the black-box tests, so they can
// run a Manager over fake clients without an API server. The Lease is
// written through c.Kube.
func NewWithClients(c informer.Clients, opts Options) (*Manager, error) {
	return newWithClients(c, opts, nil, nil)
}

// AbortTimeout exposes abortTimeout to the black-box tests.
func (m *Manager) AbortTimeout() time.Duration { return m.abortTimeout() }
