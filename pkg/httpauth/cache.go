package httpauth

import (
	"container/list"
	"sync"
	"time"
)

// cache remembers values for a time, and at most max of them: when full,
// the least recently used goes first. An expired value stays until it is
// evicted, replaced or deleted, so that get can tell a key seen before
// from one never seen. It is safe for concurrent use.
type cache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	items map[K]*list.Element // of *entry[K, V]
	lru   list.List           // most recently used at the front
}

type entry[K comparable, V any] struct {
	key     K
	val     V
	expires time.Time
}

func newCache[K comparable, V any](max int) *cache[K, V] {
	return &cache[K, V]{max: max, items: make(map[K]*list.Element)}
}

// get returns the value stored under k, whether it is still fresh (its
// ttl has not passed), and whether k is stored at all.
func (c *cache[K, V]) get(k K) (v V, fresh, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return v, false, false
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*entry[K, V])
	return e.val, time.Now().Before(e.expires), true
}

// put stores v under k for ttl, evicting the least recently used entry if
// the cache is full.
func (c *cache[K, V]) put(k K, v V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &entry[K, V]{key: k, val: v, expires: time.Now().Add(ttl)}
	if el, ok := c.items[k]; ok {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	if c.lru.Len() >= c.max {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.items, oldest.Value.(*entry[K, V]).key)
	}
	c.items[k] = c.lru.PushFront(e)
}

// delete forgets k.
func (c *cache[K, V]) delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.lru.Remove(el)
		delete(c.items, k)
	}
}
