package index_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// twoIntentDocs is a registry where one intent of a request (flights) has
// a dozen near-duplicate entries that each match many of its words, and
// the other (currency conversion) one entry that matches a few.
func twoIntentDocs() []index.Doc {
	var docs []index.Doc
	for i := range 12 {
		docs = append(docs, index.Doc{
			ID: fmt.Sprintf("urn:ai:air%d.example:search-flights", i), Name: "search-flights",
			DisplayName: fmt.Sprintf("Air%d: search flights", i),
			Description: "Search cheap airline flights and return tickets between airports by travel dates, cabin class, baggage and passengers." +
				strings.Repeat(" Operated by a partner.", i),
			Tags: []string{"travel"}, Publisher: fmt.Sprintf("air%d.example", i),
		})
	}
	docs = append(docs, index.Doc{
		ID: "urn:ai:fx.example:quote", Name: "quote", DisplayName: "FX: convert currency",
		Description: "Converts an amount at the current exchange rate.",
		Tags:        []string{"finance"}, Publisher: "fx.example",
	})
	// Each word of the conversion is common: the entry that has them all
	// scores less than a flight entry that has twice as many of the
	// request's words.
	for i, w := range []string{"convert", "amount", "current", "exchange", "rate", "currencies"} {
		for j := range 8 {
			docs = append(docs, index.Doc{
				ID: fmt.Sprintf("urn:ai:misc%d-%d.example:op", i, j), Name: "op", DisplayName: fmt.Sprintf("Misc%d-%d: op", i, j),
				Description: fmt.Sprintf("Tool %d of kind %d that mentions %s once.", j, i, w), Tags: []string{"misc"}, Publisher: fmt.Sprintf("misc%d-%d.example", i, j),
			})
		}
	}
	return docs
}

func rankOf(hits []index.Hit, id string) int {
	return slices.IndexFunc(hits, func(h index.Hit) bool { return h.ID == id })
}

func TestSearchRequestOfSeveralIntents(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, twoIntentDocs())
	const (
		flights  = "Search cheap airline flights between airports for my travel dates, cabin class, baggage and two passengers with a return ticket"
		currency = "convert the currency at the exchange rate"
		fx       = "urn:ai:fx.example:quote"
	)
	search := func(t *testing.T, req index.SearchRequest) index.SearchResult {
		t.Helper()
		res, err := ix.Search(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(res.Hits); i++ {
			if res.Hits[i].Raw > res.Hits[i-1].Raw || res.Hits[i].Score > res.Hits[i-1].Score {
				t.Fatalf("%q: hits out of score order at %d: %+v", req.Text, i, res.Hits)
			}
		}
		return res
	}
	// The precondition: as one clause (the same terms), the conversion
	// falls off page one.
	one := search(t, index.SearchRequest{Text: strings.NewReplacer(",", "", " and ", " ").Replace(flights) + " " + currency, Size: 10, Count: true})
	if r := rankOf(one.Hits, fx); r >= 0 {
		t.Fatalf("one clause: %s at rank %d, the test needs it off page one", fx, r)
	}

	tests := []struct {
		name    string
		text    string
		wantTop int // fx within the first wantTop hits (just below the flight entries within partWeight of the best); -1: not on page one
	}{
		{"two sentences", flights + ". " + currency + ".", 5},
		{"question and request", flights + "? Also, " + currency + ".", 5},
		{"semicolon", flights + "; " + currency, 5},
		{"line break", flights + "\n" + currency, 5},
		{"second sentence too short to be a part", flights + ". Exchange rate.", -1},
		{"one sentence, the second intent after and", flights + " and " + currency, 5},
		{"one sentence, the second intent after a comma", flights + ", " + currency, 5},
		{"second clause too short to be a part", flights + " and exchange rate", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := search(t, index.SearchRequest{Text: tc.text, Size: 10, Count: true})
			r := rankOf(res.Hits, fx)
			switch {
			case tc.wantTop < 0 && r >= 0:
				t.Errorf("%s at rank %d, want it off page one", fx, r)
			case tc.wantTop >= 0 && (r < 0 || r >= tc.wantTop):
				t.Errorf("%s at rank %d, want it within the first %d", fx, r, tc.wantTop)
			}
			// The match set is the whole request's: the same Total as
			// the same words in one sentence.
			if tc.wantTop >= 0 && res.Total != one.Total {
				t.Errorf("Total %d, want %d (the one-sentence request's)", res.Total, one.Total)
			}
		})
	}

	t.Run("single intent unchanged", func(t *testing.T) {
		a := search(t, index.SearchRequest{Text: flights, Size: 20})
		b := search(t, index.SearchRequest{Text: flights + ". Thanks!", Size: 20})
		if !slices.Equal(a.Hits, b.Hits) {
			t.Errorf("a closing word changed the ranking:\n%+v\n%+v", a.Hits, b.Hits)
		}
	})

	t.Run("filters hold", func(t *testing.T) {
		res := search(t, index.SearchRequest{Text: flights + ". " + currency + ".", Size: 20, Filter: index.Filter{"tags": {"travel"}}})
		if r := rankOf(res.Hits, fx); r >= 0 {
			t.Errorf("%s (tag finance) at rank %d under a travel filter", fx, r)
		}
		if len(res.Hits) != 12 {
			t.Errorf("%d hits, want the 12 travel entries", len(res.Hits))
		}
	})

	t.Run("pages", func(t *testing.T) {
		text := flights + ". " + currency + "."
		all := search(t, index.SearchRequest{Text: text, Size: 100}) // every match
		var paged []index.Hit
		for from := 0; ; from += 4 {
			res := search(t, index.SearchRequest{Text: text, From: from, Size: 4})
			paged = append(paged, res.Hits...)
			if want := from+4 < len(all.Hits); res.More != want {
				t.Fatalf("From %d: More %v, want %v", from, res.More, want)
			}
			if !res.More {
				break
			}
		}
		if !slices.Equal(paged, all.Hits) {
			t.Errorf("pages of 4:\n%+v\nwant\n%+v", paged, all.Hits)
		}
		again := search(t, index.SearchRequest{Text: text, Size: 100})
		if !slices.Equal(again.Hits, all.Hits) {
			t.Errorf("not deterministic:\n%+v\n%+v", again.Hits, all.Hits)
		}
	})
}

// TestClauseCandidatesKeepFiltersAndPrivacy: a clause part looks for its
// answers among its terms' best docs, not only among the request's
// ranking; those must pass the search's filters and stay private to their
// owner as every hit does.
func TestClauseCandidatesKeepFiltersAndPrivacy(t *testing.T) {
	ix := mustOpenMemory(t)
	const (
		secret = "urn:ai:secret.example:fx"
		fx     = "urn:ai:fx.example:quote"
		text   = "Search cheap airline flights between airports for my travel dates, cabin class, baggage and two passengers with a return ticket and convert the currency at the exchange rate"
	)
	mustPut(t, ix, append(twoIntentDocs(), index.Doc{
		ID: secret, Name: "fx", DisplayName: "Secret: convert currency exchange rate",
		Description: "Converts currency at the exchange rate.", Tags: []string{"finance"},
		Publisher: "secret.example", Owner: "secret.example",
	}))
	search := func(req index.SearchRequest) []index.Hit {
		t.Helper()
		req.Text, req.Size = text, 50
		res, err := ix.Search(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res.Hits
	}
	// The precondition: to its owner, unfiltered, the private answer of
	// the second clause is on page one.
	if r := rankOf(search(index.SearchRequest{Viewers: []string{"secret.example"}}), secret); r < 0 || r >= 10 {
		t.Fatalf("to its owner: %s at rank %d, want page one", secret, r)
	}
	if r := rankOf(search(index.SearchRequest{}), secret); r >= 0 {
		t.Errorf("another caller sees the private %s at rank %d", secret, r)
	}
	if r := rankOf(search(index.SearchRequest{Viewers: []string{"other.example"}}), secret); r >= 0 {
		t.Errorf("other.example sees the private %s at rank %d", secret, r)
	}
	travel := search(index.SearchRequest{Filter: index.Filter{"tags": {"travel"}}, Viewers: []string{"secret.example"}})
	for _, id := range []string{fx, secret} {
		if r := rankOf(travel, id); r >= 0 {
			t.Errorf("%s (tag finance) at rank %d under a travel filter", id, r)
		}
	}
}

// TestLongRequestKeepsEveryIntent: a request of ten sentences, one intent
// each, eighty distinct words in all; the first five intents are asked at
// length (twelve words), the last five in four words. Every intent's entry
// must rank above most of the first intent's near-duplicates, which match
// more of the request than a short intent's entry does. A request once
// kept its first 64 terms (the last intents' words were never looked up)
// and its first four sentences as parts (the rest one part, whose best,
// a long intent's entry, left the short ones at half its score).
func TestLongRequestKeepsEveryIntent(t *testing.T) {
	intents := [][]string{
		strings.Fields("weather forecast rain wind humidity storm snow cloud thunder drizzle sunshine fog"),
		strings.Fields("currency exchange euro dollar yen convert bank quote remittance forex peso rupee"),
		strings.Fields("flight airline airport ticket cabin baggage boarding gate layover runway pilot jet"),
		strings.Fields("hotel room booking suite checkin guest lobby breakfast concierge housekeeping resort motel"),
		strings.Fields("translate language french german spanish grammar dictionary phrase idiom vocabulary accent dialect"),
		strings.Fields("stock ticker dividend portfolio"),
		strings.Fields("recipe ingredient oven vegetarian"),
		strings.Fields("headline journalist editorial newspaper"),
		strings.Fields("cinema trailer showtime director"),
		strings.Fields("parcel courier tracking freight"),
	}
	id := func(i int) string { return fmt.Sprintf("urn:ai:intent%d.example:op", i) }
	var docs []index.Doc
	for i, w := range intents {
		docs = append(docs, index.Doc{
			ID: id(i), Name: "op", DisplayName: fmt.Sprintf("Intent%d: %s %s", i, w[0], w[1]),
			Description: strings.Join(w, " ") + ".", Tags: []string{"tools"}, Publisher: fmt.Sprintf("intent%d.example", i),
		})
	}
	// The first intent's near-duplicates, each a little longer (so
	// weaker) than the last.
	const dups = 12
	for i := range dups {
		docs = append(docs, index.Doc{
			ID: fmt.Sprintf("urn:ai:dup%d.example:op", i), Name: "op", DisplayName: fmt.Sprintf("Dup%d: weather forecast", i),
			Description: strings.Join(intents[0], " ") + "." + strings.Repeat(" Operated by a partner.", i+1),
			Tags:        []string{"tools"}, Publisher: fmt.Sprintf("dup%d.example", i),
		})
	}
	ix := mustOpenMemory(t)
	mustPut(t, ix, docs)
	var req []string
	for _, w := range intents {
		req = append(req, "Please help with "+strings.Join(w, " ")+".")
	}
	res, err := ix.Search(t.Context(), index.SearchRequest{Text: strings.Join(req, " "), Size: len(intents) + dups/2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range intents {
		if rankOf(res.Hits, id(i)) < 0 {
			t.Errorf("intent %d's entry is not among the first %d: %+v", i, len(res.Hits), res.Hits)
		}
	}
}
