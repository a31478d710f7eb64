package index_test

import (
	"math"
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// TestWordPairsLiftAdjacentWords: two entries hold the same words, one
// with the request's two words next to each other; that one ranks first,
// by the factor its pair earns (0.2 in a name, 0.1 in a description), and
// without the pair the two tie.
func TestWordPairsLiftAdjacentWords(t *testing.T) {
	ix := mustOpenMemory(t)
	// Listed first, so a tie would put the scattered entries first.
	mustPut(t, ix, []index.Doc{
		{ID: "urn:ai:a.example:scattered-name", Name: "op", DisplayName: "FX: rate of exchange", Description: "Quotes."},
		{ID: "urn:ai:a.example:scattered-text", Name: "quote", DisplayName: "Quote", Description: "Returns a rate of exchange."},
		{ID: "urn:ai:b.example:adjacent-name", Name: "op", DisplayName: "FX: exchange rate", Description: "Quotes."},
		{ID: "urn:ai:b.example:adjacent-text", Name: "quote", DisplayName: "Quote", Description: "Returns an exchange rate."},
	})
	raw := func(text string) map[string]float64 {
		t.Helper()
		res, err := ix.Search(t.Context(), index.SearchRequest{Text: text, Size: 10})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for i, h := range res.Hits {
			if i > 0 && h.Raw > res.Hits[i-1].Raw {
				t.Fatalf("%q: hits out of order: %+v", text, res.Hits)
			}
			out[h.ID] = h.Raw
		}
		return out
	}
	for _, tc := range []struct {
		text             string
		adjacent, spread string
		factor           float64
	}{
		{"exchange rate", "urn:ai:b.example:adjacent-name", "urn:ai:a.example:scattered-name", 1.2},
		{"exchange rate", "urn:ai:b.example:adjacent-text", "urn:ai:a.example:scattered-text", 1.1},
		// No pair in the request: the entries tie.
		{"rate for currency exchange", "urn:ai:b.example:adjacent-name", "urn:ai:a.example:scattered-name", 1},
	} {
		got := raw(tc.text)
		a, s := got[tc.adjacent], got[tc.spread]
		if a == 0 || s == 0 {
			t.Fatalf("%q: %s or %s missing: %v", tc.text, tc.adjacent, tc.spread, got)
		}
		if math.Abs(a/s-tc.factor) > 1e-9 {
			t.Errorf("%q: %s scores %v, %s %v: factor %v, want %v", tc.text, tc.adjacent, a, tc.spread, s, a/s, tc.factor)
		}
	}
}

// TestSearchAnEmptyIndex: no segments, so no term dictionaries; a search
// finds nothing and fails nothing (it once indexed past the dictionaries).
func TestSearchAnEmptyIndex(t *testing.T) {
	ix := mustOpenMemory(t)
	res, err := ix.Search(t.Context(), index.SearchRequest{Text: "send an email now", Count: true})
	if err != nil || len(res.Hits) != 0 || res.Total != 0 {
		t.Fatalf("empty index: %+v, %v", res, err)
	}
}
