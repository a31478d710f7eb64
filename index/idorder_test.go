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
// index, in memory and on disk (and after reopening it), page after page
// (the first page's factors lift its first 11 alike). Scorch numbers a batch's docs in
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
	page := func(t *testing.T, ix *index.Index) []string {
		t.Helper()
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
		return got
	}
	put := func(t *testing.T, ix *index.Index) {
		t.Helper()
		shuffled := slices.Clone(docs)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		mustPut(t, ix, shuffled)
	}
	t.Run("memory", func(t *testing.T) {
		for build := range 3 {
			ix := mustOpenMemory(t)
			put(t, ix)
			if got := page(t, ix); !slices.Equal(got, want) {
				t.Fatalf("build %d: tied entries in the order\n%v\nwant identifier order\n%v", build, got, want)
			}
		}
	})
	// On disk, and again after a restart: the segment's files open
	// through the same plugin, numbered as written.
	t.Run("disk", func(t *testing.T) {
		for build := range 3 {
			dir := filepath.Join(t.TempDir(), "index")
			ix, _, err := index.OpenWith(dir, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			put(t, ix)
			got := page(t, ix)
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("build %d: tied entries in the order\n%v\nwant identifier order\n%v", build, got, want)
			}
			ix, rebuild, err := index.OpenWith(dir, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rebuild {
				t.Fatalf("build %d: reopened index asks for a rebuild", build)
			}
			got = page(t, ix)
			_ = ix.Close()
			if !slices.Equal(got, want) {
				t.Fatalf("build %d, reopened: tied entries in the order\n%v\nwant identifier order\n%v", build, got, want)
			}
		}
	})
}
