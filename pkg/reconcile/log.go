package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
)

// run is what ctrlkit gives one Reconcile: its reconcileID, and the
// LogSink of the logger it finds in its context, the controller's logger
// with the Reconcile's namespace, name and reconcileID.
//
// Both are made when first used, not before every Reconcile: logr sinks
// (funcr, zapr) format values in WithValues, about ten small allocations
// per Reconcile that most Reconciles, which log nothing at the enabled
// levels, would throw away, and the ID is formatted only for a line or an
// IDFromContext. What a line says, and the caller it names, are the same
// either way. One allocation per Reconcile holds it all, and it is the
// context's value for reconcileIDKey as is.
type run struct {
	parent *parentSinks // nil when the controller's logger discards
	ns     string
	name   string
	raw    [16]byte // a random (version 4) UUID

	idOnce sync.Once
	id     types.UID

	once  sync.Once
	built logr.LogSink // parent.deep with the values; set by once
}

// newRun returns the run of a Reconcile of req.
func newRun(parent *parentSinks, req Request) *run {
	r := &run{parent: parent, ns: req.Namespace, name: req.Name}
	_, _ = rand.Read(r.raw[:]) // crypto/rand.Read never returns an error
	r.raw[6] = r.raw[6]&0x0f | 0x40
	r.raw[8] = r.raw[8]&0x3f | 0x80
	return r
}

// ID returns the reconcileID: the UUID in its 36-character form.
func (r *run) ID() types.UID {
	r.idOnce.Do(func() {
		var b [36]byte
		hex.Encode(b[0:8], r.raw[0:4])
		b[8] = '-'
		hex.Encode(b[9:13], r.raw[4:6])
		b[13] = '-'
		hex.Encode(b[14:18], r.raw[6:8])
		b[18] = '-'
		hex.Encode(b[19:23], r.raw[8:10])
		b[23] = '-'
		hex.Encode(b[24:], r.raw[10:])
		r.id = types.UID(b[:])
	})
	return r.id
}

// context returns ctx with the run's reconcileID and logger, log (from
// r.logger).
func (r *run) context(ctx context.Context, log logr.Logger) context.Context {
	return context.WithValue(logr.NewContext(ctx, log), reconcileIDKey{}, r)
}

// logger returns the run's logger at level, or discard when the
// controller's logger discards.
func (r *run) logger(discard logr.Logger, level int) logr.Logger {
	if r.parent == nil {
		return discard
	}
	return logr.New(r).V(level)
}

// parentSinks is a controller's sink, as is and one call depth deeper
// for the frame run adds between a logr.Logger and the sink.
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

func (r *run) values() []any {
	return []any{"namespace", r.ns, "name", r.name, "reconcileID", r.ID()}
}

func (r *run) sink() logr.LogSink {
	r.once.Do(func() { r.built = r.parent.deep.WithValues(r.values()...) })
	return r.built
}

// derived is the controller's sink with the values, for a logger derived
// from this one: logr calls it directly, with no frame of run's.
func (r *run) derived() logr.LogSink {
	return r.parent.base.WithValues(r.values()...)
}

// Init is a no-op: the controller's sink was initialized with its logger.
func (*run) Init(logr.RuntimeInfo) {}

// Enabled asks the controller's sink; values do not change the answer.
func (r *run) Enabled(level int) bool { return r.parent.base.Enabled(level) }

// Info writes through the controller's sink with the values.
func (r *run) Info(level int, msg string, kv ...any) {
	if r.parent.helper != nil {
		r.parent.helper()
	}
	r.sink().Info(level, msg, kv...)
}

// Error writes through the controller's sink with the values.
func (r *run) Error(err error, msg string, kv ...any) {
	if r.parent.helper != nil {
		r.parent.helper()
	}
	r.sink().Error(err, msg, kv...)
}

// WithValues returns the controller's sink with these values and kv.
func (r *run) WithValues(kv ...any) logr.LogSink { return r.derived().WithValues(kv...) }

// WithName returns the controller's sink with the values, named.
func (r *run) WithName(name string) logr.LogSink { return r.derived().WithName(name) }

// WithCallDepth returns the controller's sink with the values, depth
// frames deeper.
func (r *run) WithCallDepth(depth int) logr.LogSink {
	d := r.derived()
	if c, ok := d.(logr.CallDepthLogSink); ok {
		return c.WithCallDepth(depth)
	}
	return d
}

// GetCallStackHelper returns the controller's sink's helper, so that
// testr, say, reports the Reconcile's line, not this file's.
func (r *run) GetCallStackHelper() func() {
	if r.parent.helper != nil {
		return r.parent.helper
	}
	return func() {}
}
