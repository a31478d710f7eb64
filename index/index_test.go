package index_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture is a small registry: three publishers, MCP servers, A2A agents and
// API operations, with tags, capabilities, metadata and trust manifests.
func fixture() []index.Doc {
	return []index.Doc{
		{
			ID: "urn:ai:weather.example:forecast", Name: "forecast", DisplayName: "Weather Forecast",
			Description:  "Hourly and daily weather forecasts for any city, with rain and wind.",
			Capabilities: []string{"Tools", "resources"}, Tags: []string{"Weather", "forecast"},
			Queries:   []string{"will it rain tomorrow"},
			Publisher: "weather.example", Type: "MCP", Version: "1.2.0",
			Metadata:         map[string]string{"region": "eu", "tier": "free"},
			AttestationTypes: []string{"SOC2", "ISO27001"}, IdentityType: "did:web",
			CreatedAt: t0, UpdatedAt: t0.Add(5 * time.Hour),
		},
		{
			ID: "urn:ai:weather.example:alerts", Name: "alerts", DisplayName: "Storm Alerts",
			Description: "Severe storm and flood alerts pushed as they are issued.",
			Tags:        []string{"weather", "alerts"}, Capabilities: []string{"tools"},
			Publisher: "weather.example", Type: "a2a", Version: "2.0.0",
			Metadata: map[string]string{"region": "us"}, IdentityType: "x509",
			CreatedAt: t0.Add(1 * time.Hour), UpdatedAt: t0.Add(1 * time.Hour),
		},
		{
			ID: "urn:ai:pay.example:createInvoice", Name: "createInvoice", DisplayName: "Create invoice",
			Description: "Creates an invoice for a customer and emails it.",
			Tags:        []string{"billing"}, Capabilities: []string{"tools"},
			Text:      []string{"POST /v1/invoices", "create_invoice"},
			Publisher: "pay.example", Type: "api-operation", Version: "1.2.0",
			AttestationTypes: []string{"SOC2"},
			CreatedAt:        t0.Add(2 * time.Hour), UpdatedAt: t0.Add(2 * time.Hour),
		},
		{
			ID: "urn:ai:pay.example:listInvoices", Name: "listInvoices", DisplayName: "List invoices",
			Description: "Lists the invoices of a customer, newest first.",
			Tags:        []string{"billing", "reporting"}, Capabilities: []string{"tools"},
			Text:      []string{"GET /v1/invoices"},
			Publisher: "pay.example", Type: "api-operation", Version: "1.3.0",
			CreatedAt: t0.Add(3 * time.Hour), UpdatedAt: t0.Add(3 * time.Hour),
		},
		{
			ID: "urn:ai:maps.example:geocode", Name: "geocode", DisplayName: "Geocoder",
			Description: "Turns street addresses into coordinates.",
			Tags:        []string{"maps"}, Capabilities: []string{"prompts"},
			Publisher: "maps.example", Type: "mcp", Version: "0.9.0",
			CreatedAt: t0.Add(4 * time.Hour), UpdatedAt: t0.Add(4 * time.Hour),
		},
		{
			ID: "urn:ai:acme.internal:weather-cache", Name: "weather-cache", DisplayName: "Internal weather cache",
			Description: "Private mirror of weather forecasts for acme staff.",
			Tags:        []string{"weather"}, Publisher: "acme.internal", Type: "mcp", Version: "1.0.0",
			Owner:     "acme.internal",
			CreatedAt: t0.Add(6 * time.Hour), UpdatedAt: t0.Add(6 * time.Hour),
		},
	}
}

// searchIDs returns the hits of req and the total count of its matches.
func searchIDs(t *testing.T, ix *index.Index, req index.SearchRequest) ([]string, uint64) {
	t.Helper()
	req.Count = true
	res, err := ix.Search(t.Context(), req)
	if err != nil {
		t.Fatalf("search %+v: %v", req, err)
	}
	ids := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		ids[i] = h.ID
	}
	return ids, res.Total
}

func sorted(ids []string) []string {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

func TestPutCountDelete(t *testing.T) {
	ix := mustOpenMemory(t)
	docs := fixture()
	mustPut(t, ix, docs)
	mustPut(t, ix, docs[:2]) // replacing keeps the count
	if n, err := ix.Count(); err != nil || n != uint64(len(docs)) {
		t.Fatalf("Count = %d, %v; want %d", n, err, len(docs))
	}
	if err := ix.Delete([]string{docs[0].ID, "urn:ai:nobody:nothing"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := ix.Count(); n != uint64(len(docs)-1) {
		t.Fatalf("Count after delete = %d, want %d", n, len(docs)-1)
	}
	if ids, _ := searchIDs(t, ix, index.SearchRequest{Text: "hourly forecasts"}); slices.Contains(ids, docs[0].ID) {
		t.Fatalf("deleted doc still found: %v", ids)
	}
	if err := ix.Put([]index.Doc{{Name: "no id"}}); err == nil {
		t.Fatal("Put of a doc without ID succeeded")
	}
}

func TestPutReplacesContent(t *testing.T) {
	ix := mustOpenMemory(t)
	d := index.Doc{ID: "urn:ai:x.example:a", Name: "a", Description: "converts currencies", Type: "mcp"}
	mustPut(t, ix, []index.Doc{d})
	d.Description = "translates languages"
	mustPut(t, ix, []index.Doc{d})
	if ids, _ := searchIDs(t, ix, index.SearchRequest{Text: "currencies"}); len(ids) != 0 {
		t.Fatalf("old text still matches: %v", ids)
	}
	if ids, _ := searchIDs(t, ix, index.SearchRequest{Text: "translate"}); len(ids) != 1 {
		t.Fatalf("new text does not match: %v", ids)
	}
}

func TestSearchText(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	tests := []struct {
		name  string
		text  string
		first string   // expected top hit
		want  []string // expected match set, when given
	}{
		{name: "name beats description", text: "alerts", first: "urn:ai:weather.example:alerts"},
		{name: "stemming", text: "invoicing customers", first: "urn:ai:pay.example:createInvoice"},
		{name: "camel case split", text: "create invoice", first: "urn:ai:pay.example:createInvoice"},
		{name: "camel case whole", text: "listInvoices", first: "urn:ai:pay.example:listInvoices"},
		{name: "snake case in text", text: "create_invoice", first: "urn:ai:pay.example:createInvoice"},
		{name: "representative query", text: "rain tomorrow", first: "urn:ai:weather.example:forecast"},
		{name: "tag as text", text: "reporting", first: "urn:ai:pay.example:listInvoices", want: []string{"urn:ai:pay.example:listInvoices"}},
		{name: "publisher as text", text: "maps.example", first: "urn:ai:maps.example:geocode"},
		{name: "stop words only", text: "the of and", want: []string{}},
		{name: "unknown word", text: "zzzqqq", want: []string{}},
		{name: "unknown word does not block known", text: "zzzqqq geocoder", first: "urn:ai:maps.example:geocode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ids, total := searchIDs(t, ix, index.SearchRequest{Text: tc.text})
			if uint64(len(ids)) != total {
				t.Errorf("Total %d, %d hits", total, len(ids))
			}
			if tc.first != "" && (len(ids) == 0 || ids[0] != tc.first) {
				t.Errorf("hits %v, want %s first", ids, tc.first)
			}
			if tc.want != nil && !slices.Equal(sorted(ids), sorted(tc.want)) {
				t.Errorf("hits %v, want %v", ids, tc.want)
			}
		})
	}
}

func TestSearchFilters(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	const (
		forecast = "urn:ai:weather.example:forecast"
		alerts   = "urn:ai:weather.example:alerts"
		create   = "urn:ai:pay.example:createInvoice"
		list     = "urn:ai:pay.example:listInvoices"
		geocode  = "urn:ai:maps.example:geocode"
	)
	tests := []struct {
		name    string
		text    string
		filter  index.Filter
		want    []string
		wantErr error
	}{
		{name: "type", filter: index.Filter{"type": {"mcp"}}, want: []string{forecast, geocode}},
		{name: "type case-insensitive", filter: index.Filter{"type": {"MCP"}}, want: []string{forecast, geocode}},
		{name: "type OR", filter: index.Filter{"type": {"a2a", "api-operation"}}, want: []string{alerts, create, list}},
		{name: "tags array element", filter: index.Filter{"tags": {"reporting"}}, want: []string{list}},
		{name: "tags normalised", filter: index.Filter{"tags": {" WEATHER "}}, want: []string{forecast, alerts}},
		{name: "capabilities", filter: index.Filter{"capabilities": {"Resources"}}, want: []string{forecast}},
		{name: "publisher", filter: index.Filter{"publisher": {"Pay.Example"}}, want: []string{create, list}},
		{name: "version exact", filter: index.Filter{"version": {"1.2.0"}}, want: []string{forecast, create}},
		{name: "metadata", filter: index.Filter{"metadata.region": {"eu", "us"}}, want: []string{forecast, alerts}},
		{name: "metadata other key", filter: index.Filter{"metadata.tier": {"free"}}, want: []string{forecast}},
		{name: "attestation type", filter: index.Filter{"trustManifest.attestations.type": {"SOC2"}}, want: []string{forecast, create}},
		{name: "identity type", filter: index.Filter{"trustManifest.identityType": {"x509"}}, want: []string{alerts}},
		{name: "AND across keys", filter: index.Filter{"tags": {"weather"}, "type": {"mcp"}}, want: []string{forecast}},
		{name: "AND with no overlap", filter: index.Filter{"publisher": {"maps.example"}, "tags": {"billing"}}, want: []string{}},
		{name: "empty values constrain nothing", filter: index.Filter{"type": {}, "tags": {""}}, want: []string{forecast, alerts, create, list, geocode}},
		{name: "filter with text", text: "invoices", filter: index.Filter{"version": {"1.3.0"}}, want: []string{list}},
		{name: "unknown key", filter: index.Filter{"colour": {"red"}}, wantErr: index.ErrUnknownFilterKey},
		{name: "bare metadata prefix", filter: index.Filter{"metadata.": {"x"}}, wantErr: index.ErrUnknownFilterKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := ix.Search(t.Context(), index.SearchRequest{Text: tc.text, Filter: tc.filter, Size: 100, Count: true})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, h := range res.Hits {
				ids = append(ids, h.ID)
			}
			if !slices.Equal(sorted(ids), sorted(tc.want)) || res.Total != uint64(len(tc.want)) {
				t.Errorf("hits %v (total %d), want %v", ids, res.Total, tc.want)
			}
		})
	}
}

func TestUnknownKeyErrorNamesKey(t *testing.T) {
	ix := mustOpenMemory(t)
	_, err := ix.Search(t.Context(), index.SearchRequest{Text: "x", Filter: index.Filter{"colour": {"red"}}})
	if err == nil || !errors.Is(err, index.ErrUnknownFilterKey) || !strings.Contains(err.Error(), `"colour"`) {
		t.Fatalf("err = %v; want ErrUnknownFilterKey naming \"colour\"", err)
	}
}

func TestFiltersDoNotChangeScores(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	plain, err := ix.Search(t.Context(), index.SearchRequest{Text: "weather forecasts"})
	if err != nil {
		t.Fatal(err)
	}
	filtered, err := ix.Search(t.Context(), index.SearchRequest{Text: "weather forecasts", Filter: index.Filter{"type": {"mcp"}}})
	if err != nil {
		t.Fatal(err)
	}
	raw := map[string]float64{}
	for _, h := range plain.Hits {
		raw[h.ID] = h.Raw
	}
	if len(filtered.Hits) == 0 {
		t.Fatal("no filtered hits")
	}
	for _, h := range filtered.Hits {
		if raw[h.ID] != h.Raw {
			t.Errorf("%s: raw %v filtered, %v unfiltered", h.ID, h.Raw, raw[h.ID])
		}
	}
}

func TestPrivateVisibility(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	const private = "urn:ai:acme.internal:weather-cache"
	tests := []struct {
		viewer []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"other.example"}, false},
		{[]string{"acme.internal"}, true},
		{[]string{"ACME.internal"}, true},
		{[]string{"a.example", "acme.internal", "other.example"}, true},
		{[]string{"a.example", "acme.internal.example", "other.example"}, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("viewers=%q", tc.viewer), func(t *testing.T) {
			ids, _ := searchIDs(t, ix, index.SearchRequest{Text: "weather", Viewers: tc.viewer, Size: 50})
			if got := slices.Contains(ids, private); got != tc.want {
				t.Errorf("search: private visible = %v, want %v (%v)", got, tc.want, ids)
			}
			if !slices.Contains(ids, "urn:ai:weather.example:forecast") {
				t.Errorf("search: public doc missing for viewer %q", tc.viewer)
			}
			lr, err := ix.List(t.Context(), index.ListRequest{Viewers: tc.viewer, Size: 50})
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(lr.IDs, private); got != tc.want {
				t.Errorf("list: private visible = %v, want %v", got, tc.want)
			}
			fs, err := ix.Facets(t.Context(), "", nil, tc.viewer, []index.FacetRequest{{Field: "publisher"}})
			if err != nil {
				t.Fatal(err)
			}
			gotPub := slices.ContainsFunc(fs["publisher"].Buckets, func(b index.Bucket) bool { return b.Value == "acme.internal" })
			if gotPub != tc.want {
				t.Errorf("facets: private publisher counted = %v, want %v", gotPub, tc.want)
			}
		})
	}
}

func TestScoreRangeAndMonotonicity(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	for _, text := range []string{"weather", "weather forecast rain", "invoice", "storm flood alerts weather"} {
		res, err := ix.Search(t.Context(), index.SearchRequest{Text: text, Size: 50})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) == 0 {
			t.Fatalf("%q: no hits", text)
		}
		for i, h := range res.Hits {
			if h.Score < 0 || h.Score > 100 {
				t.Errorf("%q: score %d out of range", text, h.Score)
			}
			if h.Raw <= 0 {
				t.Errorf("%q: raw %v not positive", text, h.Raw)
			}
			if i > 0 {
				prev := res.Hits[i-1]
				if prev.Raw < h.Raw {
					t.Errorf("%q: hits not ranked by raw score", text)
				}
				if prev.Score < h.Score {
					t.Errorf("%q: score not monotone: %d (raw %v) before %d (raw %v)", text, prev.Score, prev.Raw, h.Score, h.Raw)
				}
			}
		}
	}
	// Comparable across queries: the same raw score maps to the same score,
	// and a strong full match outscores a weak partial one.
	strong, _ := ix.Search(t.Context(), index.SearchRequest{Text: "storm alerts"})
	weak, _ := ix.Search(t.Context(), index.SearchRequest{Text: "issued"})
	if strong.Hits[0].Score <= weak.Hits[0].Score {
		t.Errorf("strong match score %d <= weak match score %d", strong.Hits[0].Score, weak.Hits[0].Score)
	}
	if weak.Hits[0].Score >= 100 {
		t.Errorf("top hit of a weak query scores %d: scale is per query, not per index", weak.Hits[0].Score)
	}
}

func TestSearchPaging(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	all, total := searchIDs(t, ix, index.SearchRequest{Text: "weather invoices storm geocoder", Size: 100})
	var paged []string
	for from := 0; from < len(all); from += 2 {
		ids, tot := searchIDs(t, ix, index.SearchRequest{Text: "weather invoices storm geocoder", From: from, Size: 2})
		if tot != total {
			t.Fatalf("Total changed between pages: %d vs %d", tot, total)
		}
		paged = append(paged, ids...)
	}
	if !slices.Equal(paged, all) {
		t.Fatalf("pages %v, whole %v", paged, all)
	}
}

func TestEmptyTextSearchMatchesAllVisible(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	ids, total := searchIDs(t, ix, index.SearchRequest{Filter: index.Filter{"tags": {"billing"}}})
	if total != 2 || !slices.IsSorted(ids) || len(ids) != 2 {
		t.Fatalf("ids %v total %d; want 2 billing docs in identifier order", ids, total)
	}
}

// TestRelevanceCutoff checks that docs sharing only a common word with the
// query are excluded from hits, Total and facets, while a query made only of
// common words still matches.
func TestRelevanceCutoff(t *testing.T) {
	ix := mustOpenMemory(t)
	var docs []index.Doc
	for i := range 1200 { // the cutoff applies from 1,000 docs on
		d := index.Doc{ID: fmt.Sprintf("urn:ai:p%04d.example:svc", i), Name: "svc", Type: "mcp",
			Description: fmt.Sprintf("A hosted service number %d for teams.", i)}
		if i < 3 {
			d.Description = "A hosted geocoding service for teams."
			d.Type = "a2a"
		}
		docs = append(docs, d)
	}
	mustPut(t, ix, docs)
	ids, total := searchIDs(t, ix, index.SearchRequest{Text: "geocoding service", Size: 100})
	if total != 3 || len(ids) != 3 {
		t.Fatalf("geocoding service: %d hits, total %d; want the 3 geocoding docs only", len(ids), total)
	}
	fs, err := ix.Facets(t.Context(), "geocoding service", nil, nil, []index.FacetRequest{{Field: "type"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fs["type"].Buckets; len(got) != 1 || got[0] != (index.Bucket{Value: "a2a", Count: 3}) {
		t.Fatalf("facets under cutoff = %v; want a2a:3", got)
	}
	if _, total := searchIDs(t, ix, index.SearchRequest{Text: "hosted service"}); total != 1200 {
		t.Fatalf("common-words-only query: total %d, want 1200", total)
	}
}

// TestPrivateArrivesLater covers the public-only fast path: searches leave
// out the private docs' exclusion while the index holds none, and must
// restore it as soon as a private doc is put, and after reopening an index
// that holds one.
func TestPrivateArrivesLater(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	ix, _, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var public, private []index.Doc
	for _, d := range fixture() {
		if d.Owner == "" {
			public = append(public, d)
		} else {
			private = append(private, d)
		}
	}
	if len(private) == 0 {
		t.Fatal("fixture has no private doc")
	}
	mustPut(t, ix, public)
	visible := func(ix *index.Index, viewer string) bool {
		t.Helper()
		ids, _ := searchIDs(t, ix, index.SearchRequest{Text: "weather", Viewers: []string{viewer}, Size: 50})
		fs, err := ix.Facets(t.Context(), "", nil, []string{viewer}, []index.FacetRequest{{Field: "publisher"}})
		if err != nil {
			t.Fatal(err)
		}
		inFacets := slices.ContainsFunc(fs["publisher"].Buckets, func(b index.Bucket) bool { return b.Value == private[0].Publisher })
		inSearch := slices.Contains(ids, private[0].ID)
		if inFacets != inSearch {
			t.Errorf("viewer %q: private doc in search %v, in facets %v", viewer, inSearch, inFacets)
		}
		return inSearch
	}
	if visible(ix, "") {
		t.Fatal("private doc visible before it was put")
	}
	mustPut(t, ix, private)
	owner := private[0].Owner
	for _, tc := range []struct {
		viewer string
		want   bool
	}{{"", false}, {"other.example", false}, {owner, true}} {
		if got := visible(ix, tc.viewer); got != tc.want {
			t.Errorf("after put, viewer %q: private visible %v, want %v", tc.viewer, got, tc.want)
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, rebuild, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if rebuild {
		t.Fatal("reopen asked for a rebuild")
	}
	if visible(ix, "") {
		t.Error("after reopen, private doc visible to an anonymous viewer")
	}
	if !visible(ix, owner) {
		t.Error("after reopen, private doc hidden from its owner")
	}
}

// TestRepeatedSearchMatchesFresh: a search repeated while the index is
// quiet (from its third time on, answered from the result cache) returns
// what it returned the first time, hits, scores and all, however a caller
// changed an earlier answer; after a write it answers the new state.
func TestRepeatedSearchMatchesFresh(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, fixture())
	req := index.SearchRequest{Text: "weather forecast", Size: 3}
	check := func(stage string) index.SearchResult {
		t.Helper()
		first, err := ix.Search(t.Context(), req)
		if err != nil || len(first.Hits) == 0 {
			t.Fatalf("%s: search = %+v, %v", stage, first, err)
		}
		want := slices.Clone(first.Hits)
		for range 3 {
			first.Hits[0].ID, first.Hits[0].Score = "changed by the caller", -1
			got, err := ix.Search(t.Context(), req)
			if err != nil || !slices.Equal(got.Hits, want) || got.More != first.More {
				t.Fatalf("%s: repeated search = %+v, %v; want %+v", stage, got, err, want)
			}
			first = got
		}
		return first
	}
	check("before the write")
	mustPut(t, ix, []index.Doc{{ID: "urn:ai:sky.example:radar", Name: "weather-forecast", DisplayName: "Weather forecast radar",
		Description: "Weather forecast from radar.", Publisher: "sky.example", Type: "mcp", CreatedAt: t0, UpdatedAt: t0}})
	after := check("after the write")
	if !slices.ContainsFunc(after.Hits, func(h index.Hit) bool { return h.ID == "urn:ai:sky.example:radar" }) {
		t.Fatalf("after the write the hits %+v miss the new doc", after.Hits)
	}
}

// TestRankingIgnoresSegmentLayout indexes one corpus in one batch and in
// twenty, in memory and on disk, and asks each the same requests: a
// ranking must not depend on how the docs happen to be split into
// segments. Bleve's field cardinality, which an average field length was
// once taken from, counts each segment's distinct terms, and gave the
// layouts different scores. Every doc's text has a length of its own, so
// no two docs tie and the order of ties (doc numbers, which differ between
// layouts) never decides which docs the word pairs and categories re-score.
func TestRankingIgnoresSegmentLayout(t *testing.T) {
	vocab := make([]string, 300)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%cx%c", 'a'+i%26, 'a'+i/26)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	var docs []index.Doc
	for i := range 800 {
		var desc []string
		for range 12 {
			desc = append(desc, vocab[rnd.IntN(len(vocab))])
		}
		docs = append(docs, index.Doc{
			ID:          fmt.Sprintf("urn:air:p%d.example:tool-%d", i%40, i),
			Name:        fmt.Sprintf("tool-%d", i),
			DisplayName: fmt.Sprintf("Tool %d", i),
			Description: strings.Join(desc, " ") + strings.Repeat(" padding", i),
			Tags:        []string{fmt.Sprintf("cat%d", i%10)},
			Publisher:   fmt.Sprintf("p%d.example", i%40),
			Type:        "mcp-tool",
		})
	}
	one := mustOpenMemory(t)
	mustPut(t, one, docs)
	many := mustOpenMemory(t)
	for s := 0; s < len(docs); s += 40 {
		mustPut(t, many, docs[s:s+40])
	}
	disk, _, err := index.OpenWith(filepath.Join(t.TempDir(), "index"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	for s := 0; s < len(docs); s += 40 {
		mustPut(t, disk, docs[s:s+40])
	}
	if err := disk.Settle(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
	for q := range 40 {
		var words []string
		for k := range 2 + q%6 {
			words = append(words, vocab[(q*17+k*29)%len(vocab)])
		}
		text := strings.Join(words, " ")
		if q%3 == 0 { // a request of two sentences: ranked in parts too
			text += ". I also need " + strings.Join([]string{vocab[q], vocab[q+100], vocab[q+200]}, " ")
		}
		want, err := one.Search(t.Context(), index.SearchRequest{Text: text, Size: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Hits) == 0 {
			t.Fatalf("%q: no hits", text)
		}
		for name, ix := range map[string]*index.Index{"twenty batches": many, "on disk": disk} {
			got, err := ix.Search(t.Context(), index.SearchRequest{Text: text, Size: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Hits) != len(want.Hits) {
				t.Fatalf("%q, %s: %d hits, one batch %d", text, name, len(got.Hits), len(want.Hits))
			}
			for i := range want.Hits {
				if g, w := got.Hits[i], want.Hits[i]; g.ID != w.ID || math.Abs(g.Raw-w.Raw) > 1e-12*w.Raw {
					t.Fatalf("%q, %s: hit %d is %s (%v), one batch %s (%v)", text, name, i, g.ID, g.Raw, w.ID, w.Raw)
				}
			}
		}
	}
}
