package informer

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// A Scope narrows the informers declared in it, and can be changed while
// they run. An informer declared with a Scope (the last argument of For,
// ForMetadata or ForResource) is an informer of its own, apart from the
// one the same call declares without it: a controller that reads the
// scoped informer sees only what the Scope selects, and every other
// reader of the type still sees every object. Each such informer caches
// its objects once more.
//
// Set changes what the Scope selects. Each running informer of the Scope
// then lists and watches anew with the new selectors, while its Lister
// and handlers go on with what it held. Once the new lists are in, the
// informer switches to them in one step, and its handlers get a delete
// (a cache.DeletedFinalStateUnknown) for each object that left, an add for
// each that entered, and an update for each that changed meanwhile. An
// event of the new watch that arrives during the switch may reach the
// handlers twice, and an AwaitWrite waiting on the old informer returns
// when it is switched out, whether or not the new one holds the write.
//
// A Scope is safe for concurrent use. NewScope names it; the zero value
// is a Scope without a name that selects everything until Set.
type Scope struct {
	name string

	mu      sync.Mutex
	label   string // a label selector, added to the informers' own
	shard   string // the API server's shardSelector
	entries map[*entry]struct{}
}

// NewScope returns a Scope that selects everything until Set. name appears
// in the names of its informers, in logs and metrics.
func NewScope(name string) *Scope {
	return &Scope{name: name, entries: make(map[*entry]struct{})}
}

// Set makes the Scope select the objects that labelSelector (kubectl's -l
// syntax, added with a comma to the informer's own) and shardSelector (the
// API server's list option of that name, KEP-5866; empty means none)
// select. It returns an error, and changes nothing, if labelSelector does
// not parse. Setting what is already set does nothing.
func (s *Scope) Set(labelSelector, shardSelector string) error {
	if _, err := labels.Parse(labelSelector); err != nil {
		return fmt.Errorf("informer: Scope %q: label selector %q: %w", s.name, labelSelector, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.label == labelSelector && s.shard == shardSelector {
		return nil
	}
	s.label, s.shard = labelSelector, shardSelector
	for e := range s.entries {
		select {
		case e.rescoped <- struct{}{}:
		default: // a change is already pending; it reads the latest
		}
	}
	return nil
}

// tweak returns list options tweak with the Scope's selectors added; a
// nil Scope returns tweak.
func (s *Scope) tweak(tweak func(*metav1.ListOptions)) func(*metav1.ListOptions) {
	if s == nil {
		return tweak
	}
	s.mu.Lock()
	label, shard := s.label, s.shard
	s.mu.Unlock()
	return func(o *metav1.ListOptions) {
		if tweak != nil {
			tweak(o)
		}
		o.LabelSelector = joinSelectors(o.LabelSelector, label)
		if shard != "" {
			o.ShardSelector = shard
		}
	}
}

func (s *Scope) add(e *entry) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = make(map[*entry]struct{})
	}
	s.entries[e] = struct{}{}
}

func (s *Scope) remove(e *entry) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, e)
}

// oneScope returns the optional Scope argument of a declaration.
func oneScope(where string, in []*Scope) (*Scope, error) {
	switch len(in) {
	case 0:
		return nil, nil
	case 1:
		return in[0], nil
	}
	return nil, fmt.Errorf("%s: %d Scopes given: an informer is declared in one Scope at most", where, len(in))
}

// gated passes events to h once its part is switched to (part.open); a
// part built for a new scope drops them until then, since the switch
// hands the handlers the difference instead.
type gated struct {
	p *part
	h cache.ResourceEventHandler
}

func (g gated) OnAdd(obj any, initial bool) {
	if g.p.open.Load() {
		g.h.OnAdd(obj, initial)
	}
}

func (g gated) OnUpdate(old, obj any) {
	if g.p.open.Load() {
		g.h.OnUpdate(old, obj)
	}
}

func (g gated) OnDelete(obj any) {
	if g.p.open.Load() {
		g.h.OnDelete(obj)
	}
}

// handler is what p's informer is given for h.
func (p *part) handler(h cache.ResourceEventHandler) cache.ResourceEventHandler {
	if p.gated {
		return gated{p: p, h: h}
	}
	return h
}

// switchTo makes next, started and synced, e's parts in place of the
// running ones, then tells the handlers what changed between the two.
// The caller stops the old parts' informers.
func (e *entry) switchTo(next []*part) (old []*part) {
	e.mu.Lock()
	old = e.current()
	e.parts.Store(&next)
	e.pending = nil
	handlers := make([]cache.ResourceEventHandler, len(e.handlers))
	for i, r := range e.handlers {
		handlers[i] = r.h
		for _, p := range old {
			delete(r.regs, p)
		}
	}
	// Open before reading the new stores: an event applied after the
	// read is then passed on, not lost (one applied before may come twice).
	for _, p := range next {
		p.open.Store(true)
	}
	e.mu.Unlock()
	for _, p := range old {
		close(p.closed)
	}
	was, is := objectsOf(old), objectsOf(next)
	for key, o := range was {
		n, ok := is[key]
		switch {
		case !ok:
			for _, h := range handlers {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: o})
			}
		case resourceVersion(o) != resourceVersion(n):
			for _, h := range handlers {
				h.OnUpdate(o, n)
			}
		}
	}
	for key, n := range is {
		if _, ok := was[key]; !ok {
			for _, h := range handlers {
				h.OnAdd(n, false)
			}
		}
	}
	return old
}

func objectsOf(parts []*part) map[string]any {
	out := make(map[string]any)
	for _, p := range parts {
		for _, key := range p.inf.GetStore().ListKeys() {
			if obj, ok, _ := p.inf.GetStore().GetByKey(key); ok {
				out[key] = obj
			}
		}
	}
	return out
}

func resourceVersion(obj any) string {
	if m := metaOf(obj); m != nil {
		return m.GetResourceVersion()
	}
	return ""
}
