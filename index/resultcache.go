package index

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Result cache bounds: how many results one generation keeps, and which
// results are worth keeping. A hostile caller's long query texts or deep
// pages must not turn the cache into memory: a key is at most 1 KiB and a
// result at most 100 hits, so the cache stays under ~45 MB.
const (
	resultCacheSize    = 4096
	maxCachedKeyBytes  = 1024
	maxCachedHitsCount = 100
)

// cacheable reports whether a result may be kept under key.
func cacheable(key string, r SearchResult) bool {
	return len(key) <= maxCachedKeyBytes && len(r.Hits) <= maxCachedHitsCount
}

// genCache remembers values computed from one index generation: any Put or
// Delete makes them all stale. It holds at most limit values and starts
// afresh when full. It backs the term statistics (dfs) and, since agents ask
// a registry the same questions over and over ("weather forecast"), whole
// search results, so a repeated query costs a map lookup instead of scoring
// every doc that matches its terms. Values are shared: callers copy what
// they may change.
type genCache[V any] struct {
	limit int

	mu     sync.Mutex
	gen    uint64
	values map[string]V
}

func (c *genCache[V]) get(gen uint64, key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		var zero V
		return zero, false
	}
	v, ok := c.values[key]
	return v, ok
}

func (c *genCache[V]) put(gen uint64, key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen < c.gen {
		return // computed before the newest generation seen: stale
	}
	if c.gen != gen || c.values == nil || len(c.values) >= c.limit {
		c.gen = gen
		c.values = make(map[string]V, 256)
	}
	c.values[key] = v
}

// resultKey identifies a search: text, filter (keys sorted), viewer and the
// page window.
func resultKey(req SearchRequest, from, size int) string {
	var b strings.Builder
	b.WriteString(req.Text)
	b.WriteByte(0)
	b.WriteString(req.Viewer)
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(from))
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(size))
	if req.Count {
		b.WriteString("+count")
	}
	keys := make([]string, 0, len(req.Filter))
	for k := range req.Filter {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		for _, v := range req.Filter[k] {
			b.WriteByte(1)
			b.WriteString(v)
		}
	}
	return b.String()
}
