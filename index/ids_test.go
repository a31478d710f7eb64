package index_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// TestIdentifiersFollowTheDocsAcrossWrites: a page's identifiers come
// from its docs as they are now, though the doc numbers a page showed
// before a write now number other docs (the search keeps the identifiers
// it has read for each index snapshot). Each doc names itself in its
// text, so a hit whose identifier belongs to another doc is seen.
func TestIdentifiersFollowTheDocsAcrossWrites(t *testing.T) {
	ix, _, err := index.OpenWith(filepath.Join(t.TempDir(), "index"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	doc := func(i int) index.Doc {
		return index.Doc{ID: fmt.Sprintf("urn:air:ids.test:d%02d", i), Name: fmt.Sprintf("d%02d", i),
			Description: strings.Repeat("alpha ", 1+i%7) + fmt.Sprintf("self%02d", i), Type: "mcp"}
	}
	var docs []index.Doc
	for i := range 40 {
		docs = append(docs, doc(i))
	}
	check := func(step string, want int) {
		t.Helper()
		for range 2 { // the second from the kept identifiers
			res, err := ix.Search(t.Context(), index.SearchRequest{Text: "alpha", Size: 40})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Hits) != want {
				t.Fatalf("%s: %d hits, want %d", step, len(res.Hits), want)
			}
			for _, h := range res.Hits {
				self := "self" + h.ID[len(h.ID)-2:]
				own, err := ix.Search(t.Context(), index.SearchRequest{Text: self, Size: 1})
				if err != nil {
					t.Fatal(err)
				}
				if len(own.Hits) != 1 || own.Hits[0].ID != h.ID {
					t.Fatalf("%s: a hit named %s, but %q finds %v", step, h.ID, self, own.Hits)
				}
			}
		}
	}
	if err := ix.Put(docs); err != nil {
		t.Fatal(err)
	}
	check("first", 40)
	var gone []string
	for i := 0; i < 40; i += 3 {
		gone = append(gone, docs[i].ID)
	}
	if err := ix.Delete(gone); err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(t.Context()); err != nil { // numbers the docs anew
		t.Fatal(err)
	}
	check("after deletes and a merge", 40-len(gone))
	var more []index.Doc
	for i := 40; i < 50; i++ {
		more = append(more, doc(i))
	}
	if err := ix.Put(more); err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	check("after adds and a merge", 50-len(gone))
	res, err := ix.Search(t.Context(), index.SearchRequest{Text: "alpha", Size: 50})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		if slices.Contains(gone, h.ID) {
			t.Fatalf("a deleted doc's identifier %s", h.ID)
		}
	}
}
