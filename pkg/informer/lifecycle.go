package informer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// DefaultDiscoveryInterval is how often an informer whose API is not
// served asks the API server's discovery whether it is, unless
// Options.DiscoveryInterval says otherwise.
const DefaultDiscoveryInterval = 2 * time.Second

// Use marks src as used until release is called, and returns release. An
// informer that has been used is reference-counted: when the release of
// its last use is called, it stops, its objects are freed once no reader
// holds them, the decode-error series of ctrlkit_cache_decode_errors_total
// goes, and the Cache forgets it: For declares a new one; its Lister,
// AddIndex and AddEventHandler fail with ErrRemoved. An informer that was
// never used lives as long as the Cache. A manager uses the sources of
// each controller's watches and reads, and releases them when the
// controller is removed.
//
// Use fails if src does not belong to c or was removed. release blocks
// until the informer's goroutines have returned when it was the last use,
// and is safe to call more than once (only the first call counts).
func (c *Cache) Use(src Source) (release func(), err error) {
	if src == nil {
		return nil, errors.New("informer: Cache.Use(nil): pass an informer from informer.For")
	}
	e := src.source()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.c != c || c.entries[e.key] != e {
		if e.c == c && e.isRemoved() {
			return nil, fmt.Errorf("informer: Cache.Use(%s): %w", e.name, ErrRemoved)
		}
		return nil, fmt.Errorf("informer: Cache.Use(%s): the informer was not declared on this cache", e.name)
	}
	e.mu.Lock()
	e.uses++
	e.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { c.release(e) }) }, nil
}

func (e *entry) isRemoved() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.removed
}

// release drops one use of e and removes e when it was the last.
func (c *Cache) release(e *entry) {
	c.mu.Lock()
	e.mu.Lock()
	e.uses--
	last := e.uses == 0
	if last {
		e.removed = true
		delete(c.entries, e.key)
		c.order = slices.DeleteFunc(c.order, func(x *entry) bool { return x == e })
		c.publish()
		c.typed.errs.forget(e.name)
		e.key.scope.remove(e)
	}
	stop, done := e.stop, e.done
	e.mu.Unlock()
	c.mu.Unlock()
	if !last {
		return
	}
	if stop != nil {
		stop()
		<-done
	}
	// Free the objects: readers of the Informer value the user still
	// holds find no parts and get ErrRemoved.
	e.takeParts()
}

// launch starts e: its parts at once when its API is known to be served,
// so that AwaitWrite and Listers find them as soon as Start or the
// declaration returns, and its supervisor. Called under c.mu, once the
// Cache has started.
func (c *Cache) launch(ctx context.Context, e *entry) {
	ctx, cancel := context.WithCancel(ctx)
	e.mu.Lock()
	e.stop, e.done = cancel, make(chan struct{})
	done := e.done
	e.mu.Unlock()
	log := logr.FromContextOrDiscard(ctx).WithValues("informer", e.name)
	var first *running
	if e.served.Load() {
		first = e.startParts(ctx, log, false)
	}
	c.runners.Go(func() {
		defer close(done)
		e.run(ctx, log, first)
	})
}

// running is a set of started parts: stop ends them and returns once
// their goroutines have; err is why they could not start (nothing runs).
type running struct {
	stop  func()
	err   error
	parts []*part
}

// run is e's supervisor: it waits until e's API is served, runs the parts
// (first, when launch started them), and when a list or watch finds the
// resource gone and discovery agrees, stops them, tells the handlers that
// the objects left are gone, and waits for the API again. It returns when
// ctx ends, leaving the last parts' objects readable (a stopped Cache
// still answers Listers).
func (e *entry) run(ctx context.Context, log logr.Logger, first *running) {
	for {
		r := first
		first = nil
		if r == nil {
			if !e.awaitServed(ctx, log) {
				return
			}
			r = e.startParts(ctx, log, false)
		}
		if r.err != nil {
			r.stop()
			log.Error(r.err, "Could not start the informer; asking discovery again", "every", e.c.discoveryInterval())
			e.served.Store(false)
			if !sleep(ctx, e.c.discoveryInterval()) {
				return
			}
			continue
		}
		gone := e.awaitGone(ctx, log, &r)
		r.stop()
		if !gone {
			return
		}
		e.served.Store(false)
		n := e.dropParts()
		log.Info("The API server no longer serves the informer's resource (its CRD was deleted?): informer stopped until it is served again",
			"resource", gvrString(e.resource()), "objectsGone", n)
	}
}

// awaitServed polls discovery until e's API is served (true) or ctx ends
// (false). It logs once that it waits.
func (e *entry) awaitServed(ctx context.Context, log logr.Logger) bool {
	logged := false
	for {
		ok, err := e.c.serves(e)
		switch {
		case ok:
			e.c.mu.Lock()
			e.c.publish()
			e.c.mu.Unlock()
			log.Info("The API server serves the informer's resource: starting the informer", "resource", gvrString(e.resource()))
			return true
		case err != nil:
			log.V(4).Info("Asking discovery whether the informer's resource is served failed", "err", err.Error())
		case !logged:
			log.Info("Waiting for the API server to serve the informer's resource (is its CRD installed?)",
				"kind", e.plan.gvk.String(), "every", e.c.discoveryInterval())
			logged = true
		}
		if !sleep(ctx, e.c.discoveryInterval()) {
			return false
		}
	}
}

// awaitGone blocks until ctx ends (false) or a part found the resource
// gone and discovery confirms it (true). A 404 that discovery contradicts
// is logged, and the reflector retries as it always does. When the
// entry's Scope changes meanwhile, it switches *r to parts of the new
// scope (rescope).
func (e *entry) awaitGone(ctx context.Context, log logr.Logger, r **running) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-e.rescoped:
			*r = e.rescope(ctx, log, *r)
			continue
		case <-e.lost:
		}
		ok, err := e.c.serves(e)
		if err == nil && !ok {
			return true
		}
		log.Info("The informer's list or watch found its resource missing, but discovery still serves it: retrying", "resource", gvrString(e.resource()))
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// rescope starts parts of the entry's new scope beside cur, the running
// ones, and once they have synced switches to them and stops cur. It
// keeps cur if ctx ends first, if the new parts cannot start, or if a
// list finds the resource gone (signalled again for awaitGone).
func (e *entry) rescope(ctx context.Context, log logr.Logger, cur *running) *running {
	next := e.startParts(ctx, log, true)
	keep := func() *running {
		next.stop()
		e.mu.Lock()
		for _, r := range e.handlers {
			for _, p := range e.pending {
				delete(r.regs, p)
			}
		}
		e.pending = nil
		e.mu.Unlock()
		return cur
	}
	if next.err != nil {
		log.Error(next.err, "Could not start the informer in its new scope; it keeps its old one")
		return keep()
	}
	// Synced, and every handler handed the initial list (which it drops):
	// else the list's adds would reach the handlers after the switch.
	var synced []<-chan struct{}
	e.mu.Lock()
	for _, p := range next.parts {
		synced = append(synced, p.inf.HasSyncedChecker().Done())
		for _, r := range e.handlers {
			if reg, ok := r.regs[p]; ok {
				synced = append(synced, reg.HasSyncedChecker().Done())
			}
		}
	}
	e.mu.Unlock()
	for _, done := range synced {
		select {
		case <-done:
		case <-ctx.Done():
			return keep()
		case <-e.lost:
			e.lost <- struct{}{}
			return keep()
		}
	}
	old := e.switchTo(next.parts)
	cur.stop()
	log.V(1).Info("Informer switched to its new scope", "parts", len(next.parts), "replacedParts", len(old))
	return next
}

// startParts builds one part per namespace, gives each the entry's
// transform, indexes and handlers, and runs them with a child of ctx. It
// publishes them, unless gated: parts of a new scope are published by
// switchTo.
func (e *entry) startParts(ctx context.Context, log logr.Logger, gated bool) *running {
	ctx, cancel := context.WithCancel(logr.NewContext(ctx, log)) // client-go's logs name the informer
	var wg sync.WaitGroup
	r := &running{stop: func() { cancel(); wg.Wait() }}
	parts, err := e.buildParts(gated)
	if err != nil {
		r.err = err
		return r
	}
	r.parts = parts
	for _, p := range parts {
		wg.Go(func() { p.inf.RunWithContext(ctx) })
	}
	log.V(4).Info("Informer started", "parts", len(parts))
	return r
}

// buildParts builds e's parts, not started, and publishes them; gated,
// it keeps them pending instead.
func (e *entry) buildParts(gated bool) ([]*part, error) {
	gvr := e.resource()
	nss, tweak, err := e.c.scopeFor(e.goType, e.plan.namespaced)
	if err != nil {
		return nil, err
	}
	// The parts take the scope as it is now: a change signalled before
	// this is in them (a later one signals again).
	select {
	case <-e.rescoped:
	default:
	}
	tweak = e.key.scope.tweak(tweak)
	var share *sharer
	if e.c.opts.ShareMetadata {
		share = newSharer()
	}
	transform := composeTransforms(e.plan.convert, e.c.opts.KeepManagedFields, share)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed {
		return nil, fmt.Errorf("informer: %s: %w", e.name, ErrRemoved)
	}
	parts := make([]*part, 0, len(nss))
	for _, ns := range nss {
		inf, err := e.plan.newInformer(gvr, ns, consistentList(tweak), share)
		if err != nil {
			return nil, err
		}
		if transform != nil {
			if err := inf.SetTransform(transform); err != nil {
				return nil, fmt.Errorf("setting the transform: %w", err)
			}
		}
		if len(e.indexers) > 0 {
			if err := inf.AddIndexers(maps.Clone(e.indexers)); err != nil {
				return nil, fmt.Errorf("adding the indexes: %w", err)
			}
		}
		if err := inf.SetWatchErrorHandlerWithContext(e.watchErrorHandler); err != nil {
			return nil, fmt.Errorf("setting the watch error handler: %w", err)
		}
		p := &part{inf: inf, alone: []cache.Indexer{inf.GetIndexer()}, scope: newScope(ns, tweak), closed: make(chan struct{}), gated: gated}
		p.writes.waiters = make(map[chan struct{}]struct{})
		parts = append(parts, p)
	}
	for _, p := range parts {
		for _, r := range e.handlers {
			reg, err := p.inf.AddEventHandler(p.handler(r.h))
			if err != nil {
				return nil, fmt.Errorf("adding an event handler: %w", err)
			}
			r.regs[p] = reg
		}
	}
	if gated {
		e.pending = parts
		return parts, nil
	}
	e.parts.Store(&parts)
	e.served.Store(true)
	return parts, nil
}

// watchErrorHandler reports a 404 from a list or watch to run, which asks
// discovery whether the resource went away; other errors are logged as
// client-go logs them.
func (e *entry) watchErrorHandler(ctx context.Context, r *cache.Reflector, err error) {
	if ctx.Err() != nil {
		return // the part is being stopped (a new scope, a removal): not an error
	}
	if apierrors.IsNotFound(err) {
		select {
		case e.lost <- struct{}{}:
		default:
		}
		return
	}
	cache.DefaultWatchErrorHandler(ctx, r, err)
}

// dropParts takes the stopped parts out of e and gives every handler a
// delete for each object they still held, since the resource is gone.
// It returns how many objects there were.
func (e *entry) dropParts() int {
	parts := e.takeParts()
	e.mu.Lock()
	handlers := make([]cache.ResourceEventHandler, len(e.handlers))
	for i, r := range e.handlers {
		handlers[i] = r.h
	}
	e.mu.Unlock()
	n := 0
	for _, p := range parts {
		for _, key := range p.inf.GetStore().ListKeys() {
			obj, ok, _ := p.inf.GetStore().GetByKey(key)
			if !ok {
				continue
			}
			n++
			for _, h := range handlers {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: obj})
			}
		}
	}
	return n
}

// takeParts unpublishes e's parts, closes them for AwaitWrite and forgets
// their handler registrations, and returns them.
func (e *entry) takeParts() []*part {
	ps := e.parts.Swap(nil)
	if ps == nil {
		return nil
	}
	e.mu.Lock()
	for _, r := range e.handlers {
		for _, p := range *ps {
			delete(r.regs, p)
		}
	}
	e.mu.Unlock()
	for _, p := range *ps {
		close(p.closed)
	}
	return *ps
}

// serves asks discovery whether e's resource is served, resolving it
// first when it was not known, and records it in e.
func (c *Cache) serves(e *entry) (bool, error) {
	if g := e.gvr.Load(); g != nil {
		return c.servesResource(*g)
	}
	if r, ok := c.clients.Mapper.(meta.ResettableRESTMapper); ok {
		r.Reset() // it may have cached the kind's absence
	}
	mapping, err := c.clients.Mapper.RESTMapping(e.plan.gvk.GroupKind(), e.plan.gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	namespaced := mapping.Scope.Name() != meta.RESTScopeNameRoot
	if !namespaced {
		if _, _, err := c.scopeFor(e.goType, namespaced); err != nil {
			return false, err
		}
	}
	gvr := mapping.Resource
	e.plan.namespaced = namespaced
	e.gvr.Store(&gvr)
	return true, nil
}

// servesResource asks discovery whether the API server serves gvr.
func (c *Cache) servesResource(gvr schema.GroupVersionResource) (bool, error) {
	list, err := c.built.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

func (c *Cache) discoveryInterval() time.Duration {
	if c.opts.DiscoveryInterval > 0 {
		return c.opts.DiscoveryInterval
	}
	return DefaultDiscoveryInterval
}
