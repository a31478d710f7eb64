package index_test

import (
	"slices"
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// Repeated searches may be answered from the result cache; every write must
// make them see the index as it is now, and the cache must never answer one
// request with another's result.
func TestRepeatedSearchesFollowWrites(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	weather := index.SearchRequest{Text: "weather forecast"}
	first, total := searchIDs(t, ix, weather)
	if len(first) == 0 {
		t.Fatal("fixture has no weather entry")
	}
	if again, again2 := searchIDs(t, ix, weather); !slices.Equal(again, first) || again2 != total {
		t.Fatalf("repeat = %v (%d), first %v (%d)", again, again2, first, total)
	}

	added := index.Doc{ID: "urn:air:new.example:weather", Name: "weather forecast weather forecast", Description: "weather forecast for every city", Type: "mcp"}
	mustPut(t, ix, []index.Doc{added})
	afterPut, totalPut := searchIDs(t, ix, weather)
	if !slices.Contains(afterPut, added.ID) || totalPut != total+1 {
		t.Fatalf("after put = %v (%d), want %s among %d", afterPut, totalPut, added.ID, total+1)
	}

	if err := ix.Delete([]string{added.ID}); err != nil {
		t.Fatal(err)
	}
	if afterDelete, n := searchIDs(t, ix, weather); slices.Contains(afterDelete, added.ID) || n != total {
		t.Fatalf("after delete = %v (%d)", afterDelete, n)
	}

	// Requests differing only in page, filter or viewer are different.
	page2, _ := searchIDs(t, ix, index.SearchRequest{Text: "weather forecast", From: 1, Size: 1})
	if len(first) > 1 && (len(page2) != 1 || page2[0] != first[1]) {
		t.Fatalf("page 2 = %v, ranking %v", page2, first)
	}
	if ids, _ := searchIDs(t, ix, index.SearchRequest{Text: "weather forecast", Filter: index.Filter{"type": {"no-such-type"}}}); len(ids) != 0 {
		t.Fatalf("filtered = %v, want none", ids)
	}
	private := index.Doc{ID: "urn:air:own.example:weather", Name: "weather forecast", Description: "weather forecast", Type: "mcp", Owner: "own.example"}
	mustPut(t, ix, []index.Doc{private})
	owner, _ := searchIDs(t, ix, index.SearchRequest{Text: "weather forecast", Viewers: []string{"own.example"}})
	anon, _ := searchIDs(t, ix, weather)
	if !slices.Contains(owner, private.ID) || slices.Contains(anon, private.ID) {
		t.Fatalf("owner sees %v, anonymous sees %v", owner, anon)
	}
	if anon2, _ := searchIDs(t, ix, weather); slices.Contains(anon2, private.ID) {
		t.Fatalf("repeated anonymous search sees the private entry: %v", anon2)
	}
}
