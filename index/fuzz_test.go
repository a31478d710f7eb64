package index_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// FuzzSearch feeds network-shaped input (query text, a filter key and
// value, a facet field) through Search, Facets and List: no panic, no error
// other than an unknown key, scores in range.
func FuzzSearch(f *testing.F) {
	ix := mustOpenMemory(f)
	index.SetBlockDocs(ix, 4) // many blocks: the ranker prunes
	index.SetSplit(ix, 3)     // and splits a ranking into up to 3 ranges
	mustPut(f, ix, fixture())
	f.Add("weather forecast", "type", "mcp", "tags")
	f.Add("getTinyImage_foo.bar:baz", "metadata.region", "EU", "metadata.x")
	f.Add("\x00\xff(*[", "colour", "", "")
	f.Add(strings.Repeat("invoice ", 100), "trustManifest.identityType", "did:web", "type")
	f.Fuzz(func(t *testing.T, text, key, value, facet string) {
		filter := index.Filter{key: {value}}
		res, err := ix.Search(t.Context(), index.SearchRequest{Text: text, Filter: filter, Size: 20, Count: true})
		if err != nil {
			if !errors.Is(err, index.ErrUnknownFilterKey) || index.FilterKey(key) {
				t.Fatalf("search %q %v: %v", text, filter, err)
			}
			return
		}
		if uint64(len(res.Hits)) > res.Total {
			t.Fatalf("%d hits > total %d", len(res.Hits), res.Total)
		}
		// Ranking with pruning (no count) returns the same page.
		pruned, err := ix.Search(t.Context(), index.SearchRequest{Text: text, Filter: filter, Size: 20})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pruned.Hits, res.Hits) || pruned.More != (uint64(len(res.Hits)) < res.Total) {
			t.Fatalf("pruned %v (more %v), counted %v (total %d)", pruned.Hits, pruned.More, res.Hits, res.Total)
		}
		for i := 1; i < len(res.Hits); i++ {
			if res.Hits[i].Raw > res.Hits[i-1].Raw {
				t.Fatalf("hits out of order: %v", res.Hits)
			}
		}
		for _, h := range res.Hits {
			if h.Score < 0 || h.Score > 100 {
				t.Fatalf("score %d", h.Score)
			}
		}
		if _, err := ix.Facets(t.Context(), text, filter, []string{value}, []index.FacetRequest{{Field: facet}}); err != nil && (!errors.Is(err, index.ErrUnknownFilterKey) || index.FilterKey(facet)) {
			t.Fatalf("facets %q: %v", facet, err)
		}
		if _, err := ix.List(t.Context(), index.ListRequest{DisplayName: []string{text}, Types: []string{value}, Size: 5}); err != nil {
			t.Fatalf("list %q: %v", text, err)
		}
	})
}
