package index_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// TestTiesFallInIdentifierOrder: entries alike but for their identifiers,
// written in one Put, are ranked in identifier order on every build of the
// index, in memory and on disk, page after page (the first page's factors
// lift its first 11 alike). Scorch numbers a batch's docs in
// the order its analysis finishes them, which differs from build to
// build; without the identifier-ordered segments this fails (the chance
// that 60 analyses finish in identifier order is nil).
func TestTiesFallInIdentifierOrder(t *testing.T) {
	const n = 60
	var docs []index.Doc
	for i := range n {
		docs = append(docs, index.Doc{
			ID:          fmt.Sprintf("urn:ai:p%03d.example:forecast", i),
			Name:        "forecast",
			DisplayName: "Weather forecast",
			Description: "Hourly weather forecast for a city.",
			Tags:        []string{"weather"},
		})
	}
	want := make([]string, n)
	for i, d := range docs {
		want[i] = d.ID
	}
	open := map[string]func(t testing.TB) *index.Index{
		"memory": mustOpenMemory,
		"disk": func(t testing.TB) *index.Index {
			ix, _, err := index.OpenWith(filepath.Join(t.TempDir(), "index"), index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ix.Close() })
			return ix
		},
	}
	for name, open := range open {
		t.Run(name, func(t *testing.T) {
			for build := range 3 {
				ix := open(t)
				shuffled := slices.Clone(docs)
				rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				mustPut(t, ix, shuffled)
				var got []string
				for from := 0; from < n; from += 25 {
					res, err := ix.Search(t.Context(), index.SearchRequest{Text: "weather forecast for my city", From: from, Size: 25})
					if err != nil {
						t.Fatal(err)
					}
					for _, h := range res.Hits {
						got = append(got, h.ID)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("build %d: tied entries in the order\n%v\nwant identifier order\n%v", build, got, want)
				}
			}
		})
	}
}
