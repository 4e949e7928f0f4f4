package manager

import (
	"sync"

	"github.com/go-logr/logr"
)

// gatedSink passes log lines to its sink until closed, and drops them
// after: client-go's event broadcaster writes from a goroutine that its
// Shutdown does not join (an event write in flight when Run returns fails
// and is logged), and a manager's logger must not be written to once Run
// has returned. close waits for a line being written.
type gatedSink struct {
	logr.LogSink
	g *logGate
}

type logGate struct {
	mu     sync.RWMutex
	closed bool
}

// close drops every later line, once any line being written is done.
func (g *logGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// gated returns log, whose lines g drops once closed.
func gated(log logr.Logger, g *logGate) logr.Logger {
	if log.GetSink() == nil {
		return log
	}
	return log.WithSink(gatedSink{LogSink: log.GetSink(), g: g})
}

func (s gatedSink) Info(level int, msg string, kv ...any) {
	s.g.mu.RLock()
	defer s.g.mu.RUnlock()
	if !s.g.closed {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s gatedSink) Error(err error, msg string, kv ...any) {
	s.g.mu.RLock()
	defer s.g.mu.RUnlock()
	if !s.g.closed {
		s.LogSink.Error(err, msg, kv...)
	}
}

func (s gatedSink) WithValues(kv ...any) logr.LogSink {
	return gatedSink{LogSink: s.LogSink.WithValues(kv...), g: s.g}
}

func (s gatedSink) WithName(name string) logr.LogSink {
	return gatedSink{LogSink: s.LogSink.WithName(name), g: s.g}
}
