package reconcile

import (
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
)

// reconcileSink is the LogSink of the logger a Reconcile finds in its
// context: the controller's logger with the Reconcile's namespace, name and
// reconcileID. It adds them to the controller's sink only when the
// Reconcile writes a line or derives a logger, not before each Reconcile:
// logr sinks (funcr, zapr) format values in WithValues, about ten small
// allocations per Reconcile that most Reconciles, which log nothing at the
// enabled levels, would throw away. What a line says, and the caller it
// names, are the same either way.
type reconcileSink struct {
	parent *parentSinks
	ns     string
	name   string
	id     types.UID

	once  sync.Once
	built logr.LogSink // parent.deep with the values; set by once
}

// parentSinks is a controller's sink, as is and one call depth deeper
// for the frame reconcileSink adds between a logr.Logger and the sink.
type parentSinks struct {
	base, deep logr.LogSink
	helper     func() // the base sink's call stack helper, or nil
}

func newParentSinks(log logr.Logger) *parentSinks {
	base := log.GetSink()
	p := &parentSinks{base: base, deep: base}
	if d, ok := base.(logr.CallDepthLogSink); ok {
		p.deep = d.WithCallDepth(1)
	}
	if h, ok := base.(logr.CallStackHelperLogSink); ok {
		p.helper = h.GetCallStackHelper()
	}
	return p
}

// logger returns the logger of one Reconcile.
func (p *parentSinks) logger(level int, ns, name string, id types.UID) logr.Logger {
	return logr.New(&reconcileSink{parent: p, ns: ns, name: name, id: id}).V(level)
}

func (s *reconcileSink) values() []any {
	return []any{"namespace", s.ns, "name", s.name, "reconcileID", s.id}
}

func (s *reconcileSink) sink() logr.LogSink {
	s.once.Do(func() { s.built = s.parent.deep.WithValues(s.values()...) })
	return s.built
}

// derived is the controller's sink with the values, for a logger derived
// from this one: logr calls it directly, with no frame of reconcileSink's.
func (s *reconcileSink) derived() logr.LogSink {
	return s.parent.base.WithValues(s.values()...)
}

// Init is a no-op: the controller's sink was initialized with its logger.
func (*reconcileSink) Init(logr.RuntimeInfo) {}

// Enabled asks the controller's sink; values do not change the answer.
func (s *reconcileSink) Enabled(level int) bool { return s.parent.base.Enabled(level) }

// Info writes through the controller's sink with the values.
func (s *reconcileSink) Info(level int, msg string, kv ...any) {
	if s.parent.helper != nil {
		s.parent.helper()
	}
	s.sink().Info(level, msg, kv...)
}

// Error writes through the controller's sink with the values.
func (s *reconcileSink) Error(err error, msg string, kv ...any) {
	if s.parent.helper != nil {
		s.parent.helper()
	}
	s.sink().Error(err, msg, kv...)
}

// WithValues returns the controller's sink with these values and kv.
func (s *reconcileSink) WithValues(kv ...any) logr.LogSink { return s.derived().WithValues(kv...) }

// WithName returns the controller's sink with the values, named.
func (s *reconcileSink) WithName(name string) logr.LogSink { return s.derived().WithName(name) }

// WithCallDepth returns the controller's sink with the values, depth
// frames deeper.
func (s *reconcileSink) WithCallDepth(depth int) logr.LogSink {
	d := s.derived()
	if c, ok := d.(logr.CallDepthLogSink); ok {
		return c.WithCallDepth(depth)
	}
	return d
}

// GetCallStackHelper returns the controller's sink's helper, so that
// testr, say, reports the Reconcile's line, not this file's.
func (s *reconcileSink) GetCallStackHelper() func() {
	if s.parent.helper != nil {
		return s.parent.helper
	}
	return func() {}
}
