package informer

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
)

// Write describes one write the API server accepted, as AwaitWrite needs it.
type Write struct {
	// Resource is the resource written. Only informers whose
	// GroupVersionResource equals it are awaited: a write through another
	// version of the resource is not.
	Resource schema.GroupVersionResource
	// Namespace and Name identify the object; Namespace is empty for
	// cluster-scoped objects.
	Namespace, Name string
	// UID is the UID of the object written, or of the object deleted.
	UID types.UID
	// ResourceVersion is the resourceVersion of the object the server
	// returned; empty when it returned none (a deletion answered with a
	// Status).
	ResourceVersion string
	// Labels are the object's labels after the write; nil when Deleted.
	Labels map[string]string
	// Deleted says the object is gone from the server, not merely marked
	// for deletion (a delete that only sets deletionTimestamp is an update).
	Deleted bool
}

// AwaitWrite blocks until every started informer of w.Resource in c
// reflects w, or ctx ends. It is meant to be called after each write the
// API server accepted, so that a Lister read afterwards sees the written
// object at w's version or later, or does not hold it when w deleted it or
// it is outside the informer's scope. An informer reflects w when:
//
//   - w.Deleted: it has synced and holds no object at w's key with UID
//     w.UID (absent, or recreated under another UID);
//   - otherwise: it holds an object at w's key at w.ResourceVersion or
//     later; or it has synced, does not hold w's object at an older
//     version, and has handled an event at w.ResourceVersion or later
//     (events come in resourceVersion order, so it has seen w and anything
//     before it: another client deleted the object); or it has synced,
//     holds nothing at w's key, and w.Namespace, w.Labels or w.Name fall
//     outside its namespace, label selector or a metadata.name /
//     metadata.namespace field selector.
//
// A field selector on any other field cannot be evaluated from a Write: an
// informer narrowed by one waits, for an object outside its scope, until it
// handles an event at w.ResourceVersion or later, or until ctx ends.
//
// AwaitWrite returns nil at once when c has no informer of w.Resource, when
// c has not started (its informers' initial lists come after the write),
// and when w is not Deleted and w.ResourceVersion is not well formed (a
// positive decimal integer, see resourceversion.CompareResourceVersion):
// it cannot be compared. It awaits w's object only; other objects in the
// cache may still lag behind the server, and writes by other processes are
// not awaited. After Start's ctx has ended the informers no longer change,
// and AwaitWrite waits until its own ctx ends. When ctx ends first it
// returns an error that wraps ctx.Err() and names the informer, the key and
// the resourceVersion awaited.
//
// AwaitWrite is safe for concurrent use, also with Start. It registers with
// the informers it waits for only. The first AwaitWrite on an informer adds
// an event handler to it, and waits while the handler is handed every
// object already cached; from then on, while no write is awaited, that
// handler parses each event's resourceVersion and does a few atomic
// operations. An informer no write is awaited on has no such handler.
func (c *Cache) AwaitWrite(ctx context.Context, w Write) error {
	if !w.Deleted {
		if _, err := resourceversion.CompareResourceVersion(w.ResourceVersion, w.ResourceVersion); err != nil {
			return nil
		}
	}
	byResource := c.byResource.Load()
	if byResource == nil {
		return nil // not started
	}
	entries := (*byResource)[w.Resource]
	key := w.Name
	if w.Namespace != "" {
		key = w.Namespace + "/" + w.Name
	}
	for _, e := range entries {
		for _, p := range e.current() {
			if err := p.await(ctx, e.name, w, key); err != nil {
				return err
			}
		}
	}
	return nil
}

// scope is what an informer lists and watches.
type scope struct {
	namespace string          // empty: all namespaces
	labels    labels.Selector // nil: unknown
	fields    fields.Selector // nil: unknown
}

// newScope returns the scope of an informer of namespace whose list options
// tweak edits. It calls tweak once, on empty options.
func newScope(namespace string, tweak func(*metav1.ListOptions)) scope {
	var opts metav1.ListOptions
	if tweak != nil {
		tweak(&opts)
	}
	s := scope{namespace: namespace}
	if sel, err := labels.Parse(opts.LabelSelector); err == nil {
		s.labels = sel
	}
	if sel, err := fields.ParseSelector(opts.FieldSelector); err == nil {
		s.fields = sel
	}
	return s
}

// excludes reports whether the object that w wrote is certainly outside s.
func (s scope) excludes(w Write) bool {
	if s.namespace != "" && w.Namespace != s.namespace {
		return true
	}
	if s.labels != nil && !s.labels.Matches(labels.Set(w.Labels)) {
		return true
	}
	if s.fields == nil {
		return false
	}
	for _, r := range s.fields.Requirements() {
		var v string
		switch r.Field {
		case "metadata.name":
			v = w.Name
		case "metadata.namespace":
			v = w.Namespace
		default:
			continue // not known from a Write
		}
		if (v == r.Value) == (r.Operator == selection.NotEquals) {
			return true
		}
	}
	return false
}

// writeTracker is what AwaitWrite needs of one informer: the highest
// resourceVersion its handler has seen, and the waiters to wake. Its event
// handler is added by the first AwaitWrite on the informer, not when the
// informer is built: a client-go handler costs every event two goroutine
// hand-offs and a buffer slot, and an informer has synced only once every
// handler has been handed its initial list (in bench/e2e, a quarter of
// the time to sync 10,000 ConfigMaps), so an informer nothing writes to
// pays for none.
type writeTracker struct {
	regOnce sync.Once
	reg     cache.ResourceEventHandlerRegistration // nil until the first AwaitWrite, or if adding it failed
	regErr  error
	mark    atomic.Uint64 // highest resourceVersion of an event handled
	waiting atomic.Int32  // len(waiters), read without mu by observe

	mu      sync.Mutex
	waiters map[chan struct{}]struct{}
}

// trackWrites adds, once, the event handler that AwaitWrite relies on, and
// returns its registration. client-go calls it after the informer's store
// has applied the event. Added to a running informer, the handler is first
// handed every object the store holds, in no order: the store has applied
// every event up to the highest resourceVersion among them, so the mark
// they raise is a safe one, and the registration has synced once they are
// all handed over.
func (p *part) trackWrites() (cache.ResourceEventHandlerRegistration, error) {
	t := &p.writes
	t.regOnce.Do(func() {
		t.reg, t.regErr = p.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    p.observe,
			UpdateFunc: func(_, obj any) { p.observe(obj) },
			DeleteFunc: p.observe,
		})
		if t.regErr != nil {
			t.regErr = fmt.Errorf("adding the write tracker: %w", t.regErr)
		}
	})
	return t.reg, t.regErr
}

// observe raises the mark to obj's resourceVersion and wakes the waiters.
func (p *part) observe(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		if rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64); err == nil {
			for old := p.writes.mark.Load(); rv > old; old = p.writes.mark.Load() {
				if p.writes.mark.CompareAndSwap(old, rv) {
					break
				}
			}
		}
	}
	if p.writes.waiting.Load() == 0 {
		return
	}
	p.writes.mu.Lock()
	defer p.writes.mu.Unlock()
	for ch := range p.writes.waiters {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
}

// await blocks until p reflects w, whose object is at key, or ctx ends,
// or p is taken out of its entry (the API went away, or the informer was
// removed: it will not hold the object). name names the informer.
func (p *part) await(ctx context.Context, name string, w Write, key string) error {
	t := &p.writes
	wake := make(chan struct{}, 1)
	t.mu.Lock()
	t.waiters[wake] = struct{}{}
	t.waiting.Add(1)
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.waiters, wake)
		t.waiting.Add(-1)
		t.mu.Unlock()
	}()
	reg, err := p.trackWrites()
	if err != nil {
		// The informer has stopped (the Cache's ctx ended): it will not
		// change any more.
		select {
		case <-p.closed:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("informer: %s: %w: %w", name, err, ctx.Err())
		}
	}
	// Registered before the first check: every event handled from here on
	// wakes us. synced becomes nil once the handler has seen the initial
	// list, or, added to a running informer, every object stored.
	synced := reg.HasSyncedChecker().Done()
	for {
		select {
		case <-synced:
			synced = nil
		default:
		}
		if p.reflects(w, key, synced == nil) {
			return nil
		}
		select {
		case <-wake:
		case <-synced:
		case <-p.closed:
			return nil
		case <-ctx.Done():
			if w.Deleted {
				return fmt.Errorf("informer: %s: cache did not reflect the deletion of %s (uid %s): %w", name, key, w.UID, ctx.Err())
			}
			return fmt.Errorf("informer: %s: cache did not reflect the write of %s at resourceVersion %s: %w", name, key, w.ResourceVersion, ctx.Err())
		}
	}
}

// reflects reports whether e's store reflects w. Until the handler has seen
// the initial list (synced), only finding the object at w's version or
// later counts: list events arrive in no particular order, and a missing
// object may just not be listed yet.
func (p *part) reflects(w Write, key string, synced bool) bool {
	var m metav1.Object
	if obj, ok, err := p.inf.GetIndexer().GetByKey(key); err == nil && ok {
		m, _ = meta.Accessor(obj)
	}
	if w.Deleted {
		return synced && (m == nil || m.GetUID() != w.UID)
	}
	if m != nil {
		if cmp, err := resourceversion.CompareResourceVersion(m.GetResourceVersion(), w.ResourceVersion); err == nil && cmp >= 0 {
			return true
		}
	}
	if !synced {
		return false
	}
	// Events arrive in resourceVersion order, so having handled one at
	// w.ResourceVersion or later means every change up to it is stored,
	// unless the store holds the written object at an older version.
	stale := m != nil && m.GetUID() == w.UID
	if rv, err := strconv.ParseUint(w.ResourceVersion, 10, 64); err == nil && !stale && p.writes.mark.Load() >= rv {
		return true
	}
	// Out of scope: the informer will never hold it. If it still holds the
	// key, an event removing that object is on its way.
	return m == nil && p.scope.excludes(w)
}
