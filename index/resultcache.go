package index

import (
	"slices"
	"strconv"
	"strings"
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

// resultKey identifies a search: text, filter (keys sorted), viewer and the
// page window.
func resultKey(req SearchRequest, from, size int) string {
	var b strings.Builder
	b.WriteString(req.Text)
	b.WriteByte(0)
	for _, v := range req.Viewers {
		b.WriteString(v)
		b.WriteByte(1)
	}
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
