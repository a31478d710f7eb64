package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/registry"
)

func TestSearchRejectsBadInputAndRecordsNothing(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantField  string // a member the 422 must name
	}{
		{"not JSON", `{"query":`, http.StatusBadRequest, ""},
		{"not JSON at all", `weather`, http.StatusBadRequest, ""},
		{"JSON but not an object", `["weather"]`, http.StatusUnprocessableEntity, ""},
		{"empty body", ``, http.StatusUnprocessableEntity, "query"},
		{"empty object", `{}`, http.StatusUnprocessableEntity, "query"},
		{"query not an object", `{"query":"weather"}`, http.StatusUnprocessableEntity, "query"},
		{"missing text", `{"query":{}}`, http.StatusUnprocessableEntity, "query.text"},
		{"empty text", `{"query":{"text":"  "}}`, http.StatusUnprocessableEntity, "query.text"},
		{"text not a string", `{"query":{"text":42}}`, http.StatusUnprocessableEntity, "query.text"},
		{"text too long", `{"query":{"text":"` + strings.Repeat("a", 2000) + `"}}`, http.StatusUnprocessableEntity, "query.text"},
		{"unknown query member", `{"query":{"text":"w","txt":"w"}}`, http.StatusUnprocessableEntity, "query.txt"},
		{"unknown root member", `{"query":{"text":"w"},"limt":5}`, http.StatusUnprocessableEntity, "limt"},
		{"limit zero", `{"query":{"text":"w"},"limit":0}`, http.StatusUnprocessableEntity, "limit"},
		{"limit too big", `{"query":{"text":"w"},"limit":101}`, http.StatusUnprocessableEntity, "limit"},
		{"limit not integer", `{"query":{"text":"w"},"limit":2.5}`, http.StatusUnprocessableEntity, "limit"},
		{"limit a string", `{"query":{"text":"w"},"limit":"5"}`, http.StatusUnprocessableEntity, "limit"},
		{"pageSize negative", `{"query":{"text":"w"},"pageSize":-1}`, http.StatusUnprocessableEntity, "pageSize"},
		{"limit and pageSize differ", `{"query":{"text":"w"},"limit":5,"pageSize":6}`, http.StatusUnprocessableEntity, "pageSize"},
		{"bad federation", `{"query":{"text":"w"},"federation":"all"}`, http.StatusUnprocessableEntity, "federation"},
		{"federation not a string", `{"query":{"text":"w"},"federation":true}`, http.StatusUnprocessableEntity, "federation"},
		{"filter not an object", `{"query":{"text":"w","filter":["type"]}}`, http.StatusUnprocessableEntity, "query.filter"},
		{"unknown filter key", `{"query":{"text":"w","filter":{"colour":"red"}}}`, http.StatusUnprocessableEntity, "query.filter.colour"},
		{"filter value a number", `{"query":{"text":"w","filter":{"type":5}}}`, http.StatusUnprocessableEntity, "query.filter.type"},
		{"filter array of numbers", `{"query":{"text":"w","filter":{"tags":[1,2]}}}`, http.StatusUnprocessableEntity, "query.filter.tags"},
		{"filter empty array", `{"query":{"text":"w","filter":{"tags":[]}}}`, http.StatusUnprocessableEntity, "query.filter.tags"},
		{"pay:protocol unknown", `{"query":{"text":"w","filter":{"pay:protocol":"bitcoin"}}}`, http.StatusUnprocessableEntity, "query.filter.pay:protocol"},
		{"pay:price not an object", `{"query":{"text":"w","filter":{"pay:price":0.01}}}`, http.StatusUnprocessableEntity, "query.filter.pay:price"},
		{"pay:price unknown operator", `{"query":{"text":"w","filter":{"pay:price":{"below":0.01}}}}`, http.StatusUnprocessableEntity, "query.filter.pay:price.below"},
		{"pay:price negative", `{"query":{"text":"w","filter":{"pay:price":{"lte":-1}}}}`, http.StatusUnprocessableEntity, "query.filter.pay:price.lte"},
		{"pay:price empty", `{"query":{"text":"w","filter":{"pay:price":{}}}}`, http.StatusUnprocessableEntity, "query.filter.pay:price"},
		{"pay:network odd", `{"query":{"text":"w","filter":{"pay:network":"base net"}}}`, http.StatusUnprocessableEntity, "query.filter.pay:network"},
		{"pay:verified not live", `{"query":{"text":"w","filter":{"pay:verified":"yes"}}}`, http.StatusUnprocessableEntity, "query.filter.pay:verified"},
		{"maxPricePerCall not a number", `{"query":{"text":"w","filter":{"maxPricePerCall":"cheap"}}}`, http.StatusUnprocessableEntity, "query.filter.maxPricePerCall"},
		{"maxPricePerCall a float literal with exponent sign", `{"query":{"text":"w","filter":{"maxPricePerCall":true}}}`, http.StatusUnprocessableEntity, "query.filter.maxPricePerCall"},
		{"page token garbage", `{"query":{"text":"w"},"pageToken":"!!!"}`, http.StatusUnprocessableEntity, "pageToken"},
		{"page token not a string", `{"query":{"text":"w"},"pageToken":7}`, http.StatusUnprocessableEntity, "pageToken"},
		{"too large", `{"query":{"text":"w"},"pad":"` + strings.Repeat("x", 1<<20) + `"}`, http.StatusRequestEntityTooLarge, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, http.MethodPost, "/search", tc.body)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tc.wantStatus, body)
			}
			p := decodeProblem(t, body)
			if p.Status != tc.wantStatus || p.Title == "" || p.Detail == "" {
				t.Fatalf("incomplete problem: %s", body)
			}
			if tc.wantStatus == http.StatusUnprocessableEntity {
				if p.Type != publicURL+"/developers#unprocessable-content" {
					t.Fatalf("type %q", p.Type)
				}
				if len(p.Errors) == 0 || (tc.wantField != "" && !p.hasField(tc.wantField)) {
					t.Fatalf("errors do not name %q: %s", tc.wantField, body)
				}
			}
		})
	}
	if recs := f.records(t); len(recs) != 0 {
		t.Fatalf("rejected searches left %d demand records: %+v", len(recs), recs)
	}
	// The same server does record a good search, so the check above can fail.
	f.search(t, `{"query":{"text":"weather"},"federation":"none"}`)
	if recs := f.records(t); len(recs) != 1 {
		t.Fatalf("a good search left %d records, want 1", len(recs))
	}
}

// TestConformanceProbes sends the exact requests of the ARD conformance
// tool (reference §1.7) and checks what it checks.
func TestConformanceProbes(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)

	status, body := f.do(t, http.MethodGet, "/agents", "")
	var page map[string]json.RawMessage
	if status != http.StatusOK || json.Unmarshal(body, &page) != nil || page["items"] == nil || page["items"][0] != '[' {
		t.Fatalf("GET /agents: %d %s", status, body)
	}

	status, body = f.do(t, http.MethodPost, "/search",
		`{"query":{"text":"weather forecast tools","filter":{"type":["application/mcp-server-card+json"]}},"federation":"none","pageSize":2}`)
	if status != http.StatusOK {
		t.Fatalf("POST /search: %d %s", status, body)
	}
	var sr struct {
		Results []map[string]json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(body, &sr); err != nil {
		t.Fatal(err)
	}
	if len(sr.Results) != 2 {
		t.Fatalf("want 2 results, got %d: %s", len(sr.Results), body)
	}
	for _, r := range sr.Results {
		var score json.Number
		if err := json.Unmarshal(r["score"], &score); err != nil {
			t.Fatalf("score %s", r["score"])
		}
		n, err := score.Int64()
		if err != nil || n < 0 || n > 100 {
			t.Fatalf("score %s is not an integer 0-100", score)
		}
		for _, k := range []string{"source", "identifier", "displayName", "type"} {
			var s string
			if json.Unmarshal(r[k], &s) != nil || s == "" {
				t.Fatalf("result lacks string %s: %v", k, r)
			}
		}
		if (r["url"] == nil) == (r["data"] == nil) {
			t.Fatalf("result must have exactly one of url, data: %v", r)
		}
		var typ string
		_ = json.Unmarshal(r["type"], &typ)
		if typ != mcpType {
			t.Fatalf("type filter not applied: %s", typ)
		}
	}

	status, body = f.do(t, http.MethodPost, "/explore", `{"resultType":{"facets":[{"field":"type"}]}}`)
	var ex struct {
		ResultType string                     `json:"resultType"`
		Facets     map[string]json.RawMessage `json:"facets"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &ex) != nil || ex.ResultType != "facets" || ex.Facets == nil {
		t.Fatalf("POST /explore: %d %s", status, body)
	}
}

func TestSearchResultShape(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	resp := f.search(t, `{"query":{"text":"weather forecast"},"federation":"none"}`)
	if len(resp.Results) < 3 {
		t.Fatalf("too few results: %v", ids(resp.Results))
	}
	prev := math.Inf(1)
	for _, r := range resp.Results {
		if r["source"] != publicURL || r["visibility"] != "public" {
			t.Fatalf("source/visibility: %v", r)
		}
		if _, ok := r["representativeQueries"]; ok {
			t.Fatalf("representativeQueries returned: %v", r)
		}
		score, _ := r["score"].(float64)
		if score != math.Trunc(score) || score < 0 || score > 100 || score > prev {
			t.Fatalf("scores not integer, in range and descending: %v", resp.Results)
		}
		prev = score
	}
	// The stored body travels intact: nested members survive.
	first := f.search(t, `{"query":{"text":"hourly daily forecasts city"},"federation":"none","limit":1}`)
	if got := ids(first.Results); len(got) != 1 || got[0] != "urn:air:weather.test:forecast" {
		t.Fatalf("got %v", got)
	}
	if md, _ := first.Results[0]["metadata"].(map[string]any); md["region"] != "eu" {
		t.Fatalf("metadata lost: %v", first.Results[0])
	}
}

func TestSearchFilters(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	tests := []struct {
		name   string
		filter string
		want   []string // exact set, any order
	}{
		{"type", `{"type":"application/a2a-agent-card+json"}`, []string{"urn:air:sky.test:agent"}},
		{"tags OR within key", `{"tags":["radar","alerts"]}`, []string{"urn:air:rain.test:radar", "urn:air:storm.test:alerts"}},
		{"AND across keys", `{"tags":["weather"],"metadata.region":"us"}`, []string{"urn:air:meteo.test:now"}},
		{"publisher", `{"publisher":"storm.test"}`, []string{"urn:air:storm.test:alerts"}},
		{"nothing matches", `{"type":"application/agent-skills+zip"}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.search(t, `{"query":{"text":"weather","filter":`+tc.filter+`},"federation":"none","limit":100}`)
			got := ids(resp.Results)
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestSearchPagination(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	all := ids(f.search(t, `{"query":{"text":"weather"},"federation":"none","limit":100}`).Results)
	if len(all) < 5 {
		t.Fatalf("corpus too small to page: %v", all)
	}
	var paged []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > len(all) {
			t.Fatal("pagination does not end")
		}
		body := `{"query":{"text":"weather"},"federation":"none","pageSize":2`
		if token != "" {
			body += `,"pageToken":"` + token + `"`
		}
		resp := f.search(t, body+`}`)
		paged = append(paged, ids(resp.Results)...)
		if resp.PageToken == "" {
			break
		}
		if len(resp.Results) != 2 {
			t.Fatalf("a non-final page has %d results", len(resp.Results))
		}
		token = resp.PageToken
	}
	if !slices.Equal(paged, all) {
		t.Fatalf("pages %v\nwant   %v (no gaps, no duplicates, same order)", paged, all)
	}

	// A token only works for the query that produced it.
	resp := f.search(t, `{"query":{"text":"weather"},"federation":"none","pageSize":2}`)
	tok := resp.PageToken
	for name, body := range map[string]string{
		"other text":       `{"query":{"text":"maps"},"federation":"none","pageToken":"` + tok + `"}`,
		"other filter":     `{"query":{"text":"weather","filter":{"tags":"weather"}},"federation":"none","pageToken":"` + tok + `"}`,
		"other federation": `{"query":{"text":"weather"},"federation":"referrals","pageToken":"` + tok + `"}`,
		"tampered":         `{"query":{"text":"weather"},"federation":"none","pageToken":"` + tamper(tok) + `"}`,
	} {
		status, out := f.do(t, http.MethodPost, "/search", body)
		if status != http.StatusUnprocessableEntity || !decodeProblem(t, out).hasField("pageToken") {
			t.Errorf("%s: status %d %s", name, status, out)
		}
	}
	// limit and pageSize may both be given when equal; the page size can
	// change between pages.
	next := f.search(t, `{"query":{"text":"weather"},"federation":"none","limit":3,"pageSize":3,"pageToken":"`+tok+`"}`)
	if got := ids(next.Results); !slices.Equal(got, all[2:5]) {
		t.Fatalf("page after token with limit 3 = %v, want %v", got, all[2:5])
	}
}

// tamper changes one character in the middle of a token.
func tamper(tok string) string {
	b := []byte(tok)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestSearchRecordsDemandWithoutCaller(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/search",
		strings.NewReader(`{"query":{"text":"weather","filter":{"tags":["weather"]}},"federation":"none","limit":2}`))
	req.Header.Set("User-Agent", "secret-agent/1.0")
	_, key, err := f.svc.Access().CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sr searchResponse
	_ = json.NewDecoder(resp.Body).Decode(&sr)
	resp.Body.Close()
	f.search(t, `{"query":{"text":"zzzqqq nothing"},"federation":"none"}`)

	recs := f.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(recs), recs)
	}
	first := recs[0]
	if first.Text != "weather" || first.Federation != "none" || !slices.Equal(first.Filter["tags"], []string{"weather"}) {
		t.Fatalf("first record %+v", first)
	}
	if len(first.Results) != 2 || first.Results[0].Rank != 1 || first.Results[1].Rank != 2 ||
		first.Results[0].ID != sr.Results[0]["identifier"] || first.Results[0].Source != "" {
		t.Fatalf("results and ranks %+v vs %v", first.Results, ids(sr.Results))
	}
	last := recs[len(recs)-1]
	if last.Text != "zzzqqq nothing" || len(last.Results) != 0 {
		t.Fatalf("zero-result search not recorded as such: %+v", last)
	}
	raw, _ := json.Marshal(recs)
	for _, secret := range []string{"secret-agent", key, key[5:21], "acct_", "127.0.0.1"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("demand log holds caller data %q: %s", secret, raw)
		}
	}
}

func TestSearchSecondPageRecordsRanks(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	first := f.search(t, `{"query":{"text":"weather"},"federation":"none","limit":2}`)
	second := f.search(t, `{"query":{"text":"weather"},"federation":"none","limit":2,"pageToken":"`+first.PageToken+`"}`)
	recs := f.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	got := recs[1]
	if got.Offset != 2 || len(got.Results) != 2 || got.Results[0].Rank != 3 || got.Results[0].ID != second.Results[0]["identifier"] {
		t.Fatalf("second page record %+v", got)
	}
}

// TestDemandLogRetention: search records older than the retention are
// deleted when a service starts (and hourly); younger ones stay, and so do
// the daily counts /stats reads.
func TestDemandLogRetention(t *testing.T) {
	then := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	f := newTestServer(t, registry.Config{Now: func() time.Time { return then }}, nil)
	f.search(t, `{"query":{"text":"weather"},"federation":"none"}`)
	records := func() int { return len(f.records(t)) }
	restart := func(now time.Time, retention time.Duration) {
		t.Helper()
		svc, err := registry.New(registry.Config{PublicURL: publicURL, Now: func() time.Time { return now }, DemandRetention: retention}, f.db, f.ix)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := svc.Flush(ctx); err != nil { // pruning runs before the first flush is served
			t.Fatal(err)
		}
		if err := svc.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if records() != 1 {
		t.Fatalf("%d records before pruning, want 1", records())
	}
	restart(then.Add(89*24*time.Hour), 0)
	if records() != 1 {
		t.Fatal("a record younger than the default 90 days was pruned")
	}
	restart(then.Add(2*time.Hour), time.Hour)
	if records() != 0 {
		t.Fatal("a record older than the configured retention survived")
	}
	days, err := f.db.DemandDays(then, then)
	if err != nil {
		t.Fatal(err)
	}
	if len(days) != 1 || days[0].Searches != 1 {
		t.Fatalf("daily counts after pruning: %+v, want 1 search", days)
	}
}

// TestRepeatedSearchFollowsWrites: a repeated local search is answered
// from the response cache from its third time on (the cache keeps a
// response on its second sighting): same bytes, still recorded in the
// demand log; and a write to the index makes it compute afresh; so does
// the cache of the entries results show.
func TestRepeatedSearchFollowsWrites(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	body := `{"query":{"text":"rain radar"},"federation":"none","pageSize":1}`
	_, first := f.do(t, http.MethodPost, "/search", body)
	var second []byte
	// Page tokens carry the second they were issued, so two fresh answers
	// may differ there; everything else must be the same.
	withoutToken := func(b []byte) string {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("search answer is not JSON: %v: %s", err, b)
		}
		delete(m, "pageToken")
		out, _ := json.Marshal(m)
		return string(out)
	}
	for range 2 {
		if _, second = f.do(t, http.MethodPost, "/search", body); withoutToken(first) != withoutToken(second) {
			t.Fatalf("repeated search differs:\n%s\n%s", first, second)
		}
	}
	if recs := f.records(t); len(recs) != 3 || len(recs[2].Results) != 1 || recs[2].Results[0].ID != "urn:air:rain.test:radar" {
		t.Fatalf("demand records %+v, want three, the last with the radar", recs)
	}
	// Its page token works like a fresh one.
	var page struct {
		PageToken string `json:"pageToken"`
	}
	if err := json.Unmarshal(second, &page); err != nil || page.PageToken == "" {
		t.Fatalf("no page token in %s", second)
	}
	f.search(t, `{"query":{"text":"rain radar"},"federation":"none","pageSize":1,"pageToken":"`+page.PageToken+`"}`)
	if _, other := f.do(t, http.MethodPost, "/search", `{"query":{"text":"radar images"},"federation":"none","pageSize":1}`); !bytes.Contains(other, []byte("Rain radar images")) {
		t.Fatalf("another search does not show the radar: %s", other)
	}

	// Rewrite the radar's description: the next search shows it.
	loadEntries(t, f.db, f.ix, "fixtures", []string{
		`{"identifier":"urn:air:rain.test:radar","displayName":"Rain Radar","type":"application/mcp-server-card+json","url":"https://rain.test/card.json","description":"Rain radar, now with hail alerts.","tags":["weather","radar"],"representativeQueries":["rain radar","precipitation forecast"]}`,
	})
	for range 4 { // fresh, kept, then from the cache
		if _, after := f.do(t, http.MethodPost, "/search", body); !bytes.Contains(after, []byte("hail alerts")) {
			t.Fatalf("search after the write still answers the old entry: %s", after)
		}
	}
	// A search never made before, whose entries were read before the write.
	if _, other := f.do(t, http.MethodPost, "/search", `{"query":{"text":"images of radar"},"federation":"none","pageSize":1}`); !bytes.Contains(other, []byte("hail alerts")) {
		t.Fatalf("a new search after the write answers the old entry: %s", other)
	}
}
