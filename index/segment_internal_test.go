package index

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestSpans checks where a request is cut into sentences, and sentences
// into clauses.
func TestSpans(t *testing.T) {
	type split struct {
		name string
		text string
		want []string
	}
	for _, by := range []struct {
		name  string
		spans func(string) [][2]int
		tests []split
	}{
		{"sentences", sentenceSpans, []split{
			{"one sentence", "find flights to Tokyo", []string{"find flights to Tokyo"}},
			{"full stops", "I'm going to Japan. Give me the USD to JPY rate. Also list sights in Tokyo.",
				[]string{"I'm going to Japan.", " Give me the USD to JPY rate.", " Also list sights in Tokyo."}},
			{"question and exclamation", "Is it raining in Oslo? Book a taxi! Thanks", []string{"Is it raining in Oslo?", " Book a taxi!", " Thanks"}},
			{"semicolon", "convert 10 USD to EUR; then email the result", []string{"convert 10 USD to EUR;", " then email the result"}},
			{"line break", "weather in Paris\nflights to Rome", []string{"weather in Paris", "flights to Rome"}},
			{"closing quote", `search "cats." then dogs`, []string{`search "cats."`, " then dogs"}},
			{"no split inside a token", "version 3.5 of api.example.com costs $1.50", []string{"version 3.5 of api.example.com costs $1.50"}},
			{"repeated marks", "really?! yes", []string{"really?!", " yes"}},
			{"empty", "", nil},
			{"trailing space", "one. ", []string{"one."}},
		}},
		{"clauses", clauseSpans, []split{
			{"one clause", "find flights to Tokyo", []string{"find flights to Tokyo"}},
			{"commas and and", "get the forecast for Paris, book a table and call a taxi",
				[]string{"get the forecast for Paris,", " book a table", " and call a taxi"}},
			{"within sentences", "Find flights. Book a hotel and a car", []string{"Find flights.", " Book a hotel", " and a car"}},
			{"not inside a word", "a brand new android app for sandals", []string{"a brand new android app for sandals"}},
			{"not inside a number", "notify 1,000 users", []string{"notify 1,000 users"}},
			{"empty", "", nil},
		}},
	} {
		for _, tc := range by.tests {
			t.Run(by.name+"/"+tc.name, func(t *testing.T) {
				var got []string
				for _, sp := range by.spans(tc.text) {
					got = append(got, tc.text[sp[0]:sp[1]])
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s of %q = %q, want %q", by.name, tc.text, got, tc.want)
				}
			})
		}
	}
}

// TestFusedPagesAgree checks that a request of several parts ranks the
// same pages whatever the page size: a page of n hits ranks its sentence
// parts only above the whole request's n-th score (a floor), and clause
// parts score candidates (the whole request's best and their terms' best
// docs) that are the same for every page; either must agree with a
// ranking of every match, where there is no floor, and a second page must
// go on where the first stopped.
func TestFusedPagesAgree(t *testing.T) {
	ix, rng, vocab, zipf := zipfIndex(t, false, 21, 4)
	sentence := func() string {
		var w []string
		for range 3 + rng.IntN(5) {
			w = append(w, vocab[zipf.Uint64()])
		}
		return strings.Join(w, " ")
	}
	same := func(a, b Hit) bool { return a.ID == b.ID && a.Raw == b.Raw }
	for _, kind := range []string{"sentences", "clauses"} {
		t.Run(kind, func(t *testing.T) {
			split := 0
			for q := range 100 {
				text := sentence() + ". " + sentence() + "? " + sentence()
				if q%3 == 0 {
					text += "; " + sentence()
				}
				if kind == "clauses" {
					text = sentence() + " " + sentence() + ", " + sentence() + " and " + sentence()
				}
				deep, err := ix.search(t.Context(), SearchRequest{Text: text, Size: maxSearchSize}, 0, maxSearchSize)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]bool{}
				for _, h := range deep.Hits {
					if seen[h.ID] {
						t.Fatalf("%q: %s twice in one ranking", text, h.ID)
					}
					seen[h.ID] = true
				}
				if deep.More && kind == "sentences" {
					continue // more matches than one ranking holds: it has a floor too
				}
				for _, pg := range []struct{ from, size int }{{0, 1}, {0, 5}, {0, 10}, {5, 5}, {10, 10}, {15, 10}} {
					page, err := ix.search(t.Context(), SearchRequest{Text: text, Size: pg.size}, pg.from, pg.size)
					if err != nil {
						t.Fatal(err)
					}
					want := deep.Hits[min(pg.from, len(deep.Hits)):min(pg.from+pg.size, len(deep.Hits))]
					if !slices.EqualFunc(page.Hits, want, same) {
						t.Fatalf("%q from %d size %d:\n%+v\nthe same of every match:\n%+v", text, pg.from, pg.size, page.Hits, want)
					}
				}
				// With cores to spare (split 3) the parts are ranked (clauses
				// scored) at once; with none (split 1) one after the other,
				// unsplit: the same page.
				ix.split = 1
				lone, err := ix.search(t.Context(), SearchRequest{Text: text, Size: 10}, 0, 10)
				ix.split = 3
				if err != nil {
					t.Fatal(err)
				}
				if want := deep.Hits[:min(10, len(deep.Hits))]; !slices.EqualFunc(lone.Hits, want, same) {
					t.Fatalf("%q: parts ranked in turn:\n%+v\nat once:\n%+v", text, lone.Hits, want)
				}
				r, gen, err := ix.snapshot()
				if err != nil {
					t.Fatal(err)
				}
				m, err := ix.matchQuery(t.Context(), r, gen, text, nil, nil)
				_ = r.Close()
				if err != nil {
					t.Fatal(err)
				}
				if m.text == nil {
					continue
				}
				if parts, clauses := ix.parts(m.text, text); parts != nil && clauses == (kind == "clauses") {
					split++
				}
			}
			if split < 50 {
				t.Fatalf("only %d of 100 requests were compared split into %s", split, kind)
			}
		})
	}
}

// TestSpawnTurnsPanicsIntoErrors: a ranking's goroutine that panics fails
// its search with an error rather than ending the process.
func TestSpawnTurnsPanicsIntoErrors(t *testing.T) {
	var wg sync.WaitGroup
	errs := make([]error, 3)
	want := errors.New("plain")
	spawn(&wg, &errs[0], "ranking a part", func() error { panic("boom") })
	spawn(&wg, &errs[1], "ranking a range", func() error { return want })
	spawn(&wg, &errs[2], "ranking a range", func() error { return nil })
	wg.Wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "ranking a part: boom") {
		t.Errorf("a panic gave %v", errs[0])
	}
	if errs[1] != want || errs[2] != nil {
		t.Errorf("errors %v %v", errs[1], errs[2])
	}
}
