// Package gencache owns the cache of values computed from one generation of
// a changing store (the index's term statistics and search results, the
// registry's rendered search responses): a value is served only for the
// generation it was computed from, so any write makes them all stale at
// once, without tracking what a write touched.
package gencache

import "sync"

// Cache holds at most limit values of the newest generation it was given,
// and starts afresh when full. Values are shared: callers copy what they
// may change. The zero Cache holds nothing; make one with New.
type Cache[V any] struct {
	limit int

	mu     sync.Mutex
	gen    uint64
	values map[string]V
}

// New returns a cache of at most limit values.
func New[V any](limit int) *Cache[V] { return &Cache[V]{limit: limit} }

// Get returns the value stored under key for generation gen.
func (c *Cache[V]) Get(gen uint64, key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		var zero V
		return zero, false
	}
	v, ok := c.values[key]
	return v, ok
}

// Put stores v under key for generation gen. A value of an older
// generation than the newest seen is dropped.
func (c *Cache[V]) Put(gen uint64, key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen < c.gen {
		return
	}
	if c.gen != gen || c.values == nil || len(c.values) >= c.limit {
		c.gen = gen
		c.values = make(map[string]V, min(c.limit, 256))
	}
	c.values[key] = v
}

// Len is the number of values held.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.values)
}
