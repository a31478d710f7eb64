// Package gencache owns the cache of values computed from one generation of
// a changing store (the index's term statistics and search results, the
// registry's rendered search responses): a value is served only for the
// generation it was computed from, so any write makes them all stale at
// once, without tracking what a write touched.
package gencache

import (
	"hash/maphash"
	"iter"
	"slices"
	"sync"
)

// Cache holds at most limit values of the newest generation it was given;
// when full, it drops about the quarter asked for longest ago (evict).
// Values are shared: callers copy what they may change. The zero Cache
// holds nothing; make one with New.
type Cache[V any] struct {
	limit int

	mu     sync.Mutex
	gen    uint64
	values map[string]*entry[V]
	clock  uint64 // counts gets and puts: when a value was last asked for

	seed  maphash.Seed
	doors []uint64 // Admit's sightings: key hashes, by hash modulo length
}

// New returns a cache of at most limit values.
func New[V any](limit int) *Cache[V] {
	return &Cache[V]{limit: limit, seed: maphash.MakeSeed()}
}

// Admit records a sighting of key and reports whether it was seen before,
// recently. A caller whose keys are often asked for once only (a search's
// text is often unique) stores a value on its key's second sighting, so
// one-off values neither cost a copy nor push out values asked for again.
// Sightings are kept as hashes in a table of twice the cache's size, newer
// ones overwriting older ones in their slot; a hash collision can admit a
// first sighting, which only costs a store.
func (c *Cache[V]) Admit(key string) bool {
	h := maphash.String(c.seed, key) | 1 // never 0, the empty slot
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.doors == nil {
		c.doors = make([]uint64, max(2*c.limit, 1))
	}
	slot := &c.doors[h%uint64(len(c.doors))]
	if *slot == h {
		return true
	}
	*slot = h
	return false
}

// entry is a value and when it was last asked for (the cache's clock).
type entry[V any] struct {
	v    V
	used uint64
}

// Get returns the value stored under key for generation gen.
func (c *Cache[V]) Get(gen uint64, key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.values[key]
	if c.gen != gen || e == nil {
		var zero V
		return zero, false
	}
	c.clock++
	e.used = c.clock
	return e.v, true
}

// Put stores v under key for generation gen. A value of an older
// generation than the newest seen is dropped.
func (c *Cache[V]) Put(gen uint64, key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen < c.gen || c.limit <= 0 {
		return
	}
	if c.gen != gen || c.values == nil {
		c.gen = gen
		c.values = make(map[string]*entry[V], min(c.limit, 256))
	}
	c.clock++
	if e := c.values[key]; e != nil {
		e.v, e.used = v, c.clock
		return
	}
	if len(c.values) >= c.limit {
		c.evict()
	}
	c.values[key] = &entry[V]{v: v, used: c.clock}
}

// evict drops about the quarter of the values asked for longest ago (at
// least one): values asked for again are the ones worth keeping, and a
// cache that empties whole makes the requests after it miss on every
// value at once. c.mu is held.
func (c *Cache[V]) evict() {
	bound := OldestQuarter(func(yield func(uint64) bool) {
		for _, e := range c.values {
			if !yield(e.used) {
				return
			}
		}
	})
	for k, e := range c.values {
		if e.used <= bound {
			delete(c.values, k)
		}
	}
}

// ageSample is how many ages OldestQuarter reads.
const ageSample = 64

// OldestQuarter is the age (a clock's reading when a value was last asked
// for) at or under which about the oldest quarter of a cache's values
// lie, judged from the first ageSample of ages, which a map's order makes
// a sample; at least the oldest of them lies under it. One pass over part
// of a cache, no sort of it: a cache evicting under its lock holds up
// every search meanwhile.
func OldestQuarter(ages iter.Seq[uint64]) uint64 {
	sample := make([]uint64, 0, ageSample)
	for a := range ages {
		if sample = append(sample, a); len(sample) == ageSample {
			break
		}
	}
	if len(sample) == 0 {
		return 0
	}
	slices.Sort(sample)
	return sample[len(sample)/4]
}

// Len is the number of values held.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.values)
}
