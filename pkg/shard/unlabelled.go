package shard

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlkit/ctrlkit/internal/kube"
)

// unlabelled is the store a reflector fills with the objects of one slot
// that carry no shard label: new objects, and those their last owner
// acknowledged. The sharder labels each soon after it arrives, so the
// store is small once the ring is settled; but the first start over
// objects never labelled, or a mass creation, fills it with thousands.
// An informer would keep what such a burst made it grow (its store's
// and its queue's maps, its handlers' buffers) for the life of the
// process. This store is the only copy, kept as what the sharder reads
// of each object (a snap), and gives its map back once it is empty.
//
// It is the reflector's store, called from one goroutine; the sharder's
// workers read it (get) concurrently.
type unlabelled struct {
	snap  func(*metav1.PartialObjectMetadata) snap
	added func(cache.ObjectName, snap) // told of each object stored

	mu     sync.Mutex
	objs   map[cache.ObjectName]snap // nil when empty
	synced bool                      // a first list was stored
}

var _ cache.ReflectorStore = (*unlabelled)(nil)

// run lists and watches rc's objects that selector selects, until ctx
// ends.
// It lists rather than use client-go's WatchList stream, which would hold
// every object, whole, in a store of its own until its Replace.
func (u *unlabelled) run(ctx context.Context, name, selector string, rc metadata.ResourceInterface) {
	lw := kube.ListWatch(func(o *metav1.ListOptions) { o.LabelSelector = selector }, rc.List, rc.Watch)
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, kube.NoWatchList{}),
		&metav1.PartialObjectMetadata{}, u, cache.ReflectorOptions{Name: name})
	r.RunWithContext(ctx)
}

// hasSynced reports whether a first list was stored.
func (u *unlabelled) hasSynced() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.synced
}

// put stores what the sharder reads of obj; false for an object that is
// not metadata.
func (u *unlabelled) put(obj any) (cache.ObjectName, snap, bool) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return cache.ObjectName{}, snap{}, false
	}
	key, sn := cache.MetaObjectToName(m), u.snap(m)
	if u.objs == nil {
		u.objs = map[cache.ObjectName]snap{}
	}
	u.objs[key] = sn
	return key, sn, true
}

// Add stores obj and tells the sharder.
func (u *unlabelled) Add(obj any) error {
	u.mu.Lock()
	key, sn, ok := u.put(obj)
	u.mu.Unlock()
	if ok {
		u.added(key, sn)
	}
	return nil
}

// Update stores obj and tells the sharder.
func (u *unlabelled) Update(obj any) error { return u.Add(obj) }

// Delete forgets obj: labelled, or deleted.
func (u *unlabelled) Delete(obj any) error {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.objs, cache.MetaObjectToName(m))
	if len(u.objs) == 0 {
		u.objs = nil // a Go map keeps its buckets when emptied: give them back
	}
	return nil
}

// get returns what is stored of the object namespace/name; false when
// nothing is.
func (u *unlabelled) get(namespace, name string) (snap, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	sn, ok := u.objs[cache.NewObjectName(namespace, name)]
	return sn, ok
}

// Replace stores exactly list (a relist), and tells the sharder of each.
func (u *unlabelled) Replace(list []any, _ string) error {
	type stored struct {
		key cache.ObjectName
		sn  snap
	}
	u.mu.Lock()
	u.objs = nil
	all := make([]stored, 0, len(list))
	for _, obj := range list {
		if key, sn, ok := u.put(obj); ok {
			all = append(all, stored{key, sn})
		}
	}
	u.synced = true
	u.mu.Unlock()
	for _, st := range all {
		u.added(st.key, st.sn)
	}
	return nil
}

// Resync does nothing: nothing is periodically resynced.
func (u *unlabelled) Resync() error { return nil }
