package index_test

import (
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// categoryDocs is a registry where two entries match a request's one
// searchable word alike, and only one of them is in the category whose
// entries hold the request's other word ("song").
func categoryDocs() []index.Doc {
	entry := func(id, display, desc, tag string) index.Doc {
		return index.Doc{ID: "urn:ai:" + id + ".example:" + id, Name: id, DisplayName: display, Description: desc,
			Tags: []string{tag}, Publisher: id + ".example", Type: "mcp-tool"}
	}
	return []index.Doc{
		// The music entry's description is a little longer: by words
		// alone, the shopping entry comes first.
		entry("mall", "Mall: search", "Search the catalogue by title.", "shopping"),
		entry("tunes", "Tunes: search", "Search the catalogue by title or by artist.", "music"),
		entry("lyrics", "Lyrics: song lyrics", "The lyrics of a song.", "music"),
		entry("charts", "Charts: top songs", "This week's top songs.", "music"),
		entry("shoes", "Shoes: sizes", "Shoe sizes by country.", "shopping"),
		entry("coupons", "Coupons: deals", "Discount codes for stores.", "shopping"),
	}
}

// TestCategoriesWeighIn checks that an entry whose category holds a
// request's words outranks one that matches the request alike but whose
// category does not, and that categories weigh in only when every entry
// has one.
func TestCategoriesWeighIn(t *testing.T) {
	const music, shopping = "urn:ai:tunes.example:tunes", "urn:ai:mall.example:mall"
	ix := mustOpenMemory(t)
	mustPut(t, ix, categoryDocs())
	res, err := ix.Search(t.Context(), index.SearchRequest{Text: "search songs", Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	m, s := rankOf(res.Hits, music), rankOf(res.Hits, shopping)
	if m < 0 || s < 0 || m > s {
		t.Fatalf("music entry at %d, shopping entry at %d: want the music entry first (%v)", m, s, res.Hits)
	}
	if res.Hits[m].Raw <= res.Hits[s].Raw {
		t.Fatalf("music entry scores %v, shopping entry %v", res.Hits[m].Raw, res.Hits[s].Raw)
	}

	// One entry without a category: no category weighs in, and the
	// shopping entry comes first again.
	mustPut(t, ix, []index.Doc{{ID: "urn:ai:misc.example:misc", Name: "misc", DisplayName: "Misc: tools",
		Description: "Odd tools.", Publisher: "misc.example", Type: "mcp-tool"}})
	res, err = ix.Search(t.Context(), index.SearchRequest{Text: "search songs", Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	m, s = rankOf(res.Hits, music), rankOf(res.Hits, shopping)
	if m < 0 || s < 0 || s > m {
		t.Fatalf("with an untagged entry: music entry at %d, shopping entry at %d: want the shopping entry first", m, s)
	}

	// Tagged again (an update): categories weigh in again.
	mustPut(t, ix, []index.Doc{{ID: "urn:ai:misc.example:misc", Name: "misc", DisplayName: "Misc: tools",
		Description: "Odd tools.", Tags: []string{"misc"}, Publisher: "misc.example", Type: "mcp-tool"}})
	res, err = ix.Search(t.Context(), index.SearchRequest{Text: "search songs", Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	if m, s = rankOf(res.Hits, music), rankOf(res.Hits, shopping); m > s {
		t.Fatalf("after tagging: music entry at %d, shopping entry at %d", m, s)
	}
}
