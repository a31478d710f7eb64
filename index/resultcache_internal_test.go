package index

import (
	"strings"
	"testing"
)

// The caches must stay small whatever callers send.
func TestCacheBounds(t *testing.T) {
	ten := SearchResult{Hits: make([]Hit, 10)}
	tests := []struct {
		name string
		key  string
		r    SearchResult
		want bool
	}{
		{"ordinary search", resultKey(SearchRequest{Text: "weather forecast"}, 0, 10), ten, true},
		{"long text", resultKey(SearchRequest{Text: strings.Repeat("w", 2000)}, 0, 10), ten, false},
		{"deep page", "k", SearchResult{Hits: make([]Hit, maxCachedHitsCount+1)}, false},
	}
	for _, tc := range tests {
		if got := cacheable(tc.key, tc.r); got != tc.want {
			t.Errorf("%s: cacheable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
