package index

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// resultCacheSize bounds the search results kept for one generation.
const resultCacheSize = 4096

// resultCache remembers search results for one index generation: any Put
// or Delete makes them all stale. Agents ask a registry the same questions
// over and over ("weather forecast"), and a repeated query then costs a map
// lookup instead of scoring every doc that matches its terms.
type resultCache struct {
	mu      sync.Mutex
	gen     uint64
	results map[string]SearchResult
}

func (c *resultCache) get(gen uint64, key string) (SearchResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return SearchResult{}, false
	}
	r, ok := c.results[key]
	if !ok {
		return SearchResult{}, false
	}
	return SearchResult{Total: r.Total, Hits: slices.Clone(r.Hits)}, true
}

func (c *resultCache) put(gen uint64, key string, r SearchResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.results == nil || len(c.results) >= resultCacheSize {
		c.gen = gen
		c.results = make(map[string]SearchResult, 256)
	}
	c.results[key] = SearchResult{Total: r.Total, Hits: slices.Clone(r.Hits)}
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
