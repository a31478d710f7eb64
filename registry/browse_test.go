package registry_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
)

type exploreResp struct {
	ResultType string `json:"resultType"`
	Facets     map[string]struct {
		Buckets []struct {
			Value string `json:"value"`
			Count int    `json:"count"`
		} `json:"buckets"`
		OtherCount *int `json:"otherCount"`
	} `json:"facets"`
}

func TestExplore(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	all := index.FacetFields()
	tests := []struct {
		name       string
		body       string
		wantFacets []string
		check      func(t *testing.T, r exploreResp)
	}{
		{"no body", "", all, nil},
		{"empty object", `{}`, all, nil},
		{"no resultType.facets", `{"query":{"text":"weather"}}`, all, nil},
		{"empty resultType", `{"resultType":{}}`, all, nil},
		{"resultType spelled as in the response", `{"resultType":"facets"}`, all, nil},
		{"one facet by object", `{"resultType":{"facets":[{"field":"type"}]}}`, []string{"type"}, func(t *testing.T, r exploreResp) {
			counts := map[string]int{}
			for _, b := range r.Facets["type"].Buckets {
				counts[b.Value] = b.Count
			}
			if counts[mcpType] != 7 || counts["application/ai-registry+json"] != 1 {
				t.Fatalf("type counts %v", counts)
			}
		}},
		{"facet by name, limit and text", `{"query":{"text":"weather"},"resultType":{"facets":["publisher",{"field":"type","limit":1}]}}`, []string{"publisher", "type"}, func(t *testing.T, r exploreResp) {
			ty := r.Facets["type"]
			if len(ty.Buckets) != 1 || ty.Buckets[0].Value != mcpType || *ty.OtherCount < 1 {
				t.Fatalf("limited type facet %+v", ty)
			}
			for _, b := range r.Facets["publisher"].Buckets {
				if b.Value == "mail.test" || b.Value == "skills.test" {
					t.Fatalf("text did not narrow the counts: %+v", r.Facets["publisher"])
				}
			}
		}},
		{"filter narrows", `{"query":{"filter":{"tags":"radar"}},"resultType":{"facets":["publisher"]}}`, []string{"publisher"}, func(t *testing.T, r exploreResp) {
			b := r.Facets["publisher"].Buckets
			if len(b) != 1 || b[0].Value != "rain.test" || b[0].Count != 1 {
				t.Fatalf("filtered publisher facet %+v", b)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, http.MethodPost, "/explore", tc.body)
			if status != http.StatusOK {
				t.Fatalf("status %d %s", status, body)
			}
			var r exploreResp
			if err := json.Unmarshal(body, &r); err != nil || r.ResultType != "facets" {
				t.Fatalf("body %s", body)
			}
			var got []string
			for k, v := range r.Facets {
				got = append(got, k)
				if v.Buckets == nil || v.OtherCount == nil {
					t.Fatalf("facet %s lacks buckets or otherCount: %s", k, body)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.wantFacets))
			if !slices.Equal(got, want) {
				t.Fatalf("facets %v, want %v", got, want)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestExploreRejectsBadInput(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	tests := []struct {
		name, body, field string
		status            int
	}{
		{"not JSON", `{`, "", http.StatusBadRequest},
		{"unsupported facet", `{"resultType":{"facets":["colour"]}}`, "resultType.facets[0]", 422},
		{"facet object without field", `{"resultType":{"facets":[{"limit":3}]}}`, "resultType.facets[0].field", 422},
		{"facet limit zero", `{"resultType":{"facets":[{"field":"type","limit":0}]}}`, "resultType.facets[0].limit", 422},
		{"negative minCount", `{"resultType":{"facets":[{"field":"type","minCount":-1}]}}`, "resultType.facets[0].minCount", 422},
		{"facet twice", `{"resultType":{"facets":["type","type"]}}`, "resultType.facets[1]", 422},
		{"facets not an array", `{"resultType":{"facets":"type"}}`, "resultType.facets", 422},
		{"resultType a number", `{"resultType":3}`, "resultType", 422},
		{"text not a string", `{"query":{"text":1}}`, "query.text", 422},
		{"unknown filter key", `{"query":{"filter":{"colour":"red"}}}`, "query.filter.colour", 422},
		{"unknown member", `{"federation":"auto"}`, "federation", 422},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, http.MethodPost, "/explore", tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if tc.field != "" && !decodeProblem(t, body).hasField(tc.field) {
				t.Fatalf("problem does not name %s: %s", tc.field, body)
			}
		})
	}
}

type agentsPage struct {
	Items         []map[string]any `json:"items"`
	NextPageToken string           `json:"nextPageToken"`
	TotalSize     *int             `json:"totalSize"`
}

func (f *fixture) agents(t *testing.T, q url.Values) agentsPage {
	t.Helper()
	status, body := f.do(t, http.MethodGet, "/agents?"+q.Encode(), "")
	if status != http.StatusOK {
		t.Fatalf("agents %s: %d %s", q.Encode(), status, body)
	}
	var p agentsPage
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAgents(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	first := f.agents(t, nil)
	if first.TotalSize == nil || *first.TotalSize != len(fixtureEntries) || len(first.Items) != len(fixtureEntries) {
		t.Fatalf("default page: total %v, %d items", first.TotalSize, len(first.Items))
	}
	if first.Items[0]["visibility"] != "public" || first.Items[0]["representativeQueries"] == nil {
		t.Fatalf("listing item %v", first.Items[0])
	}

	tests := []struct {
		name    string
		q       url.Values
		wantIDs []string // in order; nil means only check the count
		wantN   int
	}{
		{"type filter", url.Values{"filter": {`type="application/a2a-agent-card+json"`}}, []string{"urn:air:sky.test:agent"}, 1},
		{"displayName substring, any case", url.Values{"filter": {`displayName:"WEATHER"`}},
			[]string{"urn:air:sky.test:agent", "urn:air:weather.test:forecast"}, 2}, // default order: identifier
		{"publisher OR", url.Values{"filter": {`publisherId="maps.test","mail.test"`}, "orderBy": {"identifier DESC"}},
			[]string{"urn:air:maps.test:route", "urn:air:mail.test:send"}, 2},
		{"AND", url.Values{"filter": {`type="application/mcp-server-card+json" AND displayName:"r"`}, "orderBy": {"displayName"}},
			[]string{"urn:air:clima.test:history", "urn:air:mail.test:send", "urn:air:rain.test:radar", "urn:air:maps.test:route", "urn:air:storm.test:alerts", "urn:air:weather.test:forecast"}, 6},
		{"createdAfter in the future", url.Values{"filter": {`createdAfter="` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"`}}, []string{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := f.agents(t, tc.q)
			got := ids(p.Items)
			if len(got) != tc.wantN || (tc.wantIDs != nil && tc.wantN > 0 && !slices.Equal(got, tc.wantIDs)) {
				t.Fatalf("got %v, want %v", got, tc.wantIDs)
			}
		})
	}
}

func TestAgentsPagination(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	for _, order := range []string{"", "displayName DESC", "createdAt, identifier DESC"} {
		t.Run("orderBy="+order, func(t *testing.T) {
			q := url.Values{"pageSize": {"3"}}
			if order != "" {
				q.Set("orderBy", order)
			}
			all := url.Values{"pageSize": {"100"}}
			if order != "" {
				all.Set("orderBy", order)
			}
			want := ids(f.agents(t, all).Items)
			var got []string
			for i := 0; i < 10; i++ {
				p := f.agents(t, q)
				got = append(got, ids(p.Items)...)
				if p.NextPageToken == "" {
					break
				}
				q.Set("pageToken", p.NextPageToken)
			}
			if !slices.Equal(got, want) || len(got) != len(fixtureEntries) {
				t.Fatalf("pages %v\nwant %v", got, want)
			}
		})
	}
	// A token is bound to its filter and order.
	p := f.agents(t, url.Values{"pageSize": {"2"}})
	for name, q := range map[string]url.Values{
		"other order":  {"pageToken": {p.NextPageToken}, "orderBy": {"displayName"}},
		"other filter": {"pageToken": {p.NextPageToken}, "filter": {`type="x"`}},
		"tampered":     {"pageToken": {tamper(p.NextPageToken)}},
	} {
		status, body := f.do(t, http.MethodGet, "/agents?"+q.Encode(), "")
		if status != 422 || !decodeProblem(t, body).hasField("pageToken") {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
}

func TestAgentsRejectsBadInput(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	tests := []struct {
		name, query, field, detail string
	}{
		{"malformed filter", "filter=" + url.QueryEscape(`type="a" OR type="b"`), "filter", "at offset 9: expected AND"},
		{"unknown filter field", "filter=" + url.QueryEscape(`owner="x"`), "filter", `at offset 0: unknown field "owner"`},
		{"unclosed quote", "filter=" + url.QueryEscape(`displayName:"abc`), "filter", "at offset 12"},
		{"bad time", "filter=" + url.QueryEscape(`updatedAfter=yesterday`), "filter", "RFC 3339"},
		{"bad orderBy", "orderBy=score", "orderBy", `unknown field "score"`},
		{"bad direction", "orderBy=" + url.QueryEscape("displayName UP"), "orderBy", "expected ASC, DESC"},
		{"pageSize zero", "pageSize=0", "pageSize", ""},
		{"pageSize too big", "pageSize=101", "pageSize", ""},
		{"pageSize not integer", "pageSize=ten", "pageSize", ""},
		{"garbage token", "pageToken=abc", "pageToken", ""},
		{"unknown parameter", "page=2", "page", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, http.MethodGet, "/agents?"+tc.query, "")
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d %s", status, body)
			}
			p := decodeProblem(t, body)
			if !p.hasField(tc.field) || !strings.Contains(p.Detail, tc.detail) {
				t.Fatalf("problem %s does not name %s with %q", body, tc.field, tc.detail)
			}
		})
	}
}

func TestHealthAndStats(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	f := newTestServer(t, registry.Config{Now: func() time.Time { return now }}, nil)

	status, body := f.do(t, http.MethodGet, "/health", "")
	var h struct {
		Status    string `json:"status"`
		Documents int    `json:"documents"`
	}
	if status != 200 || json.Unmarshal(body, &h) != nil || h.Status != "ok" || h.Documents != len(fixtureEntries) {
		t.Fatalf("health %d %s", status, body)
	}

	f.search(t, `{"query":{"text":"weather"},"federation":"none"}`)
	f.search(t, `{"query":{"text":"qqqzzz"},"federation":"none"}`)
	// Older searches, straight into the log, to fill the window.
	if err := f.db.AppendSearches([]kv.SearchRecord{
		{Time: now.AddDate(0, 0, -6), Text: "old"},
		{Time: now.AddDate(0, 0, -20), Text: "older", Results: []kv.ReturnedEntry{{ID: "x", Rank: 1}}},
	}); err != nil {
		t.Fatal(err)
	}
	f.records(t)

	type stats struct {
		Days    int    `json:"days"`
		From    string `json:"from"`
		To      string `json:"to"`
		Entries struct {
			Total  int            `json:"total"`
			ByType map[string]int `json:"byType"`
		} `json:"entries"`
		Searches struct {
			Total          int     `json:"total"`
			ZeroResults    int     `json:"zeroResults"`
			ZeroResultRate float64 `json:"zeroResultRate"`
			PerDay         []struct {
				Date     string `json:"date"`
				Searches int    `json:"searches"`
			} `json:"perDay"`
		} `json:"searches"`
	}
	get := func(q string) stats {
		status, body := f.do(t, http.MethodGet, "/stats"+q, "")
		if status != 200 {
			t.Fatalf("stats%s: %d %s", q, status, body)
		}
		var s stats
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	week := get("?days=7")
	if week.Days != 7 || week.From != "2026-05-04" || week.To != "2026-05-10" || len(week.Searches.PerDay) != 7 {
		t.Fatalf("window %+v", week)
	}
	if week.Searches.Total != 3 || week.Searches.ZeroResults != 2 || week.Searches.PerDay[6].Searches != 2 || week.Searches.PerDay[0].Searches != 1 {
		t.Fatalf("week searches %+v", week.Searches)
	}
	if week.Entries.Total != len(fixtureEntries) || week.Entries.ByType[mcpType] != 7 {
		t.Fatalf("entries %+v", week.Entries)
	}
	month := get("")
	if month.Days != 30 || month.Searches.Total != 4 || month.Searches.ZeroResultRate != 0.5 {
		t.Fatalf("default window %+v", month.Searches)
	}
	for _, q := range []string{"?days=6", "?days=91", "?days=x", "?days=", "?days=7&days=8", "?since=1"} {
		status, body := f.do(t, http.MethodGet, "/stats"+q, "")
		if status != 422 {
			t.Errorf("stats%s: %d %s", q, status, body)
		}
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/nope", 404},
		{http.MethodGet, "/search", 405},
		{http.MethodDelete, "/agents", 405},
	} {
		status, body := f.do(t, tc.method, tc.path, "")
		if status != tc.status || decodeProblem(t, body).Status != tc.status {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, status, body)
		}
	}
}
