package index_test

import (
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// TestWordsAsWrittenBreakStemTies: two entries alike by their stems, one
// holding the request's word as written. The stems tie them (index order
// would put the other first); the word as written decides, whatever the
// order they were indexed in.
func TestWordsAsWrittenBreakStemTies(t *testing.T) {
	interests := index.Doc{ID: "urn:ai:aa.example:interests", Name: "interests", DisplayName: "Aa: list interests",
		Description: "Lists interests.", Publisher: "aa.example", Tags: []string{"people"}}
	interested := index.Doc{ID: "urn:ai:bb.example:interested", Name: "interested", DisplayName: "Bb: list interested",
		Description: "Lists interested.", Publisher: "bb.example", Tags: []string{"people"}}
	for _, order := range [][]index.Doc{{interests, interested}, {interested, interests}} {
		ix := mustOpenMemory(t)
		mustPut(t, ix, order)
		for _, tc := range []struct{ text, first string }{
			{"list who is interested", interested.ID},
			{"list my interests", interests.ID},
		} {
			res, err := ix.Search(t.Context(), index.SearchRequest{Text: tc.text, Size: 2})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Hits) != 2 || res.Hits[0].ID != tc.first || res.Hits[0].Raw <= res.Hits[1].Raw {
				t.Fatalf("%q (indexed %s first): %+v, want %s first and above", tc.text, order[0].ID, res.Hits, tc.first)
			}
		}
	}
}
