package registry_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/ingest"
)

// privateEntry is registered by acme.test for its own key only.
const privateEntry = `{"identifier":"urn:air:acme.test:internal:billing","displayName":"Acme Billing","type":"application/openapi-operation+json","url":"https://internal.acme.test/billing","description":"Internal weather billing service.","representativeQueries":["bill weather","internal billing"]}`

// newRulesServer serves the fixture corpus plus one private entry of
// acme.test and one public entry whose manifest carries members named like
// the registry's own. The viewer is read from the X-Test-Viewer header,
// the internal hook domain keys will plug into.
func newRulesServer(t *testing.T) *fixture {
	t.Helper()
	f := newTestServer(t, registry.Config{Viewer: func(r *http.Request) []string { return []string{r.Header.Get("X-Test-Viewer")} }}, nil)
	loadEntries(t, f.db, f.ix, "squatter", []string{
		`{"identifier":"urn:air:squat.test:tool","displayName":"Squat Tool","type":"application/mcp-server-card+json","url":"https://squat.test/card.json","description":"weather squatter","score":100,"sourc\u0065":"https://evil.test","visibility":"private","representativeQueries":["weather squat","squat tool"]}`,
	})
	loadPrivate(t, f, "acme.test", privateEntry)
	return f
}

// loadPrivate stores body as a private entry of owner and indexes it.
func loadPrivate(t *testing.T, f *fixture, owner, body string) {
	t.Helper()
	var head struct {
		Identifier string `json:"identifier"`
	}
	if err := json.Unmarshal([]byte(body), &head); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.ReplaceSource("private:"+owner, []kv.Entry{{ID: head.Identifier, Body: json.RawMessage(body), Owner: owner}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	reindexIDs(t, f, head.Identifier)
}

func (f *fixture) request(t *testing.T, method, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestAgentLookup(t *testing.T) {
	f := newRulesServer(t)
	acme := map[string]string{"X-Test-Viewer": "acme.test"}
	tests := []struct {
		name       string
		path       string
		hdr        map[string]string
		wantStatus int
		wantCode   string
		wantID     string
		wantVis    string
	}{
		{"encoded", "/agents/" + url.PathEscape("urn:air:weather.test:forecast"), nil, 200, "", "urn:air:weather.test:forecast", "public"},
		{"colons unencoded", "/agents/urn:air:weather.test:forecast", nil, 200, "", "urn:air:weather.test:forecast", "public"},
		{"fully encoded colons", "/agents/urn%3Aair%3Aweather.test%3Aforecast", nil, 200, "", "urn:air:weather.test:forecast", "public"},
		{"legacy prefix", "/agents/urn:ai:weather.test:forecast", nil, 200, "", "urn:air:weather.test:forecast", "public"},
		{"unknown", "/agents/urn:air:weather.test:nothing", nil, 404, "NOT_FOUND", "", ""},
		{"name is case-sensitive", "/agents/urn:air:weather.test:FORECAST", nil, 404, "NOT_FOUND", "", ""},
		{"malformed", "/agents/not-a-urn", nil, 400, "INVALID_ARGUMENT", "", ""},
		{"encoded slash", "/agents/urn:air:weather.test%2Fforecast:x", nil, 400, "INVALID_ARGUMENT", "", ""},
		{"two segments", "/agents/urn:air:weather.test:forecast/more", nil, 400, "INVALID_ARGUMENT", "", ""},
		{"empty", "/agents/", nil, 400, "INVALID_ARGUMENT", "", ""},
		{"query parameter", "/agents/urn:air:weather.test:forecast?x=1", nil, 422, "INVALID_ARGUMENT", "", ""},
		{"private anonymous", "/agents/urn:air:acme.test:internal:billing", nil, 404, "NOT_FOUND", "", ""},
		{"private other domain", "/agents/urn:air:acme.test:internal:billing", map[string]string{"X-Test-Viewer": "other.test"}, 404, "NOT_FOUND", "", ""},
		{"private owner", "/agents/urn:air:acme.test:internal:billing", acme, 200, "", "urn:air:acme.test:internal:billing", "private"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.request(t, http.MethodGet, tc.path, tc.hdr)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if tc.wantCode != "" {
				if m["errorCode"] != tc.wantCode || m["message"] == "" || m["message"] == nil {
					t.Fatalf("error envelope %s, want errorCode %s and a message", body, tc.wantCode)
				}
				return
			}
			if m["identifier"] != tc.wantID || m["visibility"] != tc.wantVis {
				t.Fatalf("got %s, want %s (%s)", body, tc.wantID, tc.wantVis)
			}
			for _, k := range []string{"score", "source"} {
				if _, ok := m[k]; ok {
					t.Errorf("lookup carries %q: %s", k, body)
				}
			}
			if m["displayName"] == nil || m["type"] == nil || (m["url"] == nil && m["data"] == nil) {
				t.Errorf("lookup is not the stored entry: %s", body)
			}
		})
	}
}

// TestStoredMembersNeverPassAsOurs: a manifest's own score, source or
// visibility (plain or escaped) never reaches a caller as the registry's.
func TestStoredMembersNeverPassAsOurs(t *testing.T) {
	f := newRulesServer(t)
	check := func(t *testing.T, raw []byte, wantScore bool) {
		t.Helper()
		want := map[string]int{"score": 0, "source": 0, "visibility": 1}
		if wantScore {
			want["score"], want["source"] = 1, 1
		}
		for name, n := range want {
			if got := strings.Count(string(raw), `"`+name+`"`); got != n {
				t.Errorf("%q appears %d times, want %d: %s", name, got, n, raw)
			}
		}
		if strings.Contains(string(raw), `\u0065`) || strings.Contains(string(raw), "evil.test") {
			t.Errorf("stored escaped member came through: %s", raw)
		}
	}
	_, body := f.do(t, http.MethodGet, "/agents?filter="+url.QueryEscape(`publisherId=squat.test`), "")
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &page); err != nil || len(page.Items) != 1 {
		t.Fatalf("agents page %s: %v", body, err)
	}
	check(t, page.Items[0], false)
	var item map[string]any
	_ = json.Unmarshal(page.Items[0], &item)
	if item["visibility"] != "public" {
		t.Errorf("visibility %v, want public", item["visibility"])
	}
	_, body = f.do(t, http.MethodGet, "/agents/urn:air:squat.test:tool", "")
	check(t, body, false)
	_, body = f.do(t, http.MethodPost, "/search", `{"query":{"text":"squat tool"},"federation":"none"}`)
	var res struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(body, &res); err != nil || len(res.Results) == 0 {
		t.Fatalf("search %s: %v", body, err)
	}
	check(t, res.Results[0], true)
	var first map[string]any
	_ = json.Unmarshal(res.Results[0], &first)
	if first["source"] != publicURL || first["visibility"] != "public" {
		t.Errorf("search result %s", res.Results[0])
	}
}

// reindexIDs indexes the stored entries ids as ingestion does.
func reindexIDs(t *testing.T, f *fixture, ids ...string) {
	t.Helper()
	stored, err := f.db.GetEntries(ids)
	if err != nil {
		t.Fatal(err)
	}
	var docs []index.Doc
	for _, id := range ids {
		d, err := ingest.ToDoc(stored[id])
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	if err := f.ix.Put(docs); err != nil {
		t.Fatal(err)
	}
}

// TestErrorEnvelope: every problem carries ARD's errorCode and message
// beside the RFC 9457 members, and validation stays a 422 with errors.
func TestErrorEnvelope(t *testing.T) {
	f := newRulesServer(t)
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantCode                 string
	}{
		{"validation", http.MethodPost, "/search", `{"query":{"text":""}}`, 422, "INVALID_ARGUMENT"},
		{"not json", http.MethodPost, "/search", `{`, 400, "INVALID_ARGUMENT"},
		{"no route", http.MethodGet, "/nowhere", "", 404, "NOT_FOUND"},
		{"method", http.MethodDelete, "/search", "", 405, "INVALID_ARGUMENT"},
		{"unknown entry", http.MethodGet, "/agents/urn:air:x.test:y", "", 404, "NOT_FOUND"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, tc.method, tc.path, tc.body)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tc.wantStatus, body)
			}
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"type", "title", "status", "detail", "errorCode", "message"} {
				if m[k] == nil || m[k] == "" {
					t.Errorf("member %q missing: %s", k, body)
				}
			}
			if m["errorCode"] != tc.wantCode {
				t.Errorf("errorCode %v, want %s", m["errorCode"], tc.wantCode)
			}
			if tc.wantStatus == 422 && m["errors"] == nil {
				t.Errorf("422 without errors: %s", body)
			}
		})
	}
}

// TestParameterRules: one rule on every GET route: unknown, repeated and
// empty parameters are refused, never ignored.
func TestParameterRules(t *testing.T) {
	f := newRulesServer(t)
	tests := []struct {
		name, path string
		wantStatus int
		wantField  string
	}{
		{"agents unknown", "/agents?zzz=1", 422, "zzz"},
		{"agents empty filter", "/agents?filter=", 422, "filter"},
		{"agents repeated", "/agents?pageSize=2&pageSize=3", 422, "pageSize"},
		{"agents unterminated single quote", "/agents?filter=" + url.QueryEscape("type = 'unterminated"), 422, "filter"},
		{"agents unterminated double quote", "/agents?filter=" + url.QueryEscape(`type = "unterminated`), 422, "filter"},
		{"agents empty quoted value", "/agents?filter=" + url.QueryEscape(`type = ''`), 422, "filter"},
		{"agents single quotes", "/agents?filter=" + url.QueryEscape("type = 'application/mcp-server-card+json'"), 200, ""},
		{"agents ARD example", "/agents?filter=" + url.QueryEscape("type = 'application/mcp-server-card+json' AND createdAfter > '2020-01-01'"), 200, ""},
		{"tool-safety empty and unknown rule", "/tool-safety?rule=&rule=zzz", 422, "rule"},
		{"tool-safety empty rule", "/tool-safety?rule=", 422, "rule"},
		{"tool-safety unknown", "/tool-safety?x=1", 422, "x"},
		{"tools empty q", "/tools?q=", 422, "q"},
		{"tools unknown", "/tools?q=mail&zzz=1", 422, "zzz"},
		{"stats empty days", "/stats?days=", 422, "days"},
		{"stats unknown", "/stats?day=7", 422, "day"},
		{"health unknown", "/health?verbose=1", 422, "verbose"},
		{"openapi unknown", "/openapi.json?v=2", 422, "v"},
		{"POST search with a parameter", "POST /search?limit=5", 422, "limit"},
		{"POST explore with a parameter", "POST /explore?x=", 422, "x"},
		{"POST search without", "POST /search", 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method, path, req := http.MethodGet, tc.path, ""
			if p, ok := strings.CutPrefix(tc.path, "POST "); ok {
				method, path, req = http.MethodPost, p, `{"query":{"text":"weather"}}`
			}
			status, body := f.do(t, method, path, req)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tc.wantStatus, body)
			}
			if tc.wantField != "" && !decodeProblem(t, body).hasField(tc.wantField) {
				t.Errorf("problem does not name %q: %s", tc.wantField, body)
			}
			if tc.name == "agents unterminated single quote" && !strings.Contains(string(body), "at offset 7") {
				t.Errorf("problem does not name the offset: %s", body)
			}
		})
	}
}

// TestEmptyFilterValues: a filter value that is empty or null is a 422, not
// a filter that silently constrains nothing.
func TestEmptyFilterValues(t *testing.T) {
	f := newRulesServer(t)
	for _, filter := range []string{`{"type":""}`, `{"type":["",null]}`, `{"type":[null]}`, `{"tags":[" "]}`, `{"type":[]}`, `{"type":["application/mcp-server-card+json",""]}`} {
		for _, route := range []string{"/search", "/explore"} {
			status, body := f.do(t, http.MethodPost, route, `{"query":{"text":"weather","filter":`+filter+`}}`)
			if status != 422 || !decodeProblem(t, body).hasField("query.filter."+strings.Split(filter, `"`)[1]) {
				t.Errorf("%s %s: status %d: %s", route, filter, status, body)
			}
		}
	}
}

// TestOptionsAndHead: OPTIONS answers with Allow and CORS preflight
// headers; HEAD answers like GET without a body.
func TestOptionsAndHead(t *testing.T) {
	f := newRulesServer(t)
	for _, path := range []string{"/search", "/agents", "/agents/urn:air:weather.test:forecast", "/health", "/explore"} {
		resp, body := f.request(t, http.MethodOptions, path, map[string]string{
			"Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
		if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
			t.Errorf("OPTIONS %s: %d %s", path, resp.StatusCode, body)
		}
		allow := resp.Header.Get("Allow")
		if !strings.Contains(allow, "OPTIONS") || resp.Header.Get("Access-Control-Allow-Methods") != allow ||
			resp.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Content-Type") {
			t.Errorf("OPTIONS %s headers: %v", path, resp.Header)
		}
	}
	for _, path := range []string{"/health", "/agents", "/stats", "/openapi.json", "/agents/urn:air:weather.test:forecast", "/agents/urn:air:x.test:none"} {
		get, getBody := f.request(t, http.MethodGet, path, nil)
		head, headBody := f.request(t, http.MethodHead, path, nil)
		if head.StatusCode != get.StatusCode || len(headBody) != 0 || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d (GET %d), body %q, type %q", path, head.StatusCode, get.StatusCode, headBody, head.Header.Get("Content-Type"))
		}
		if get.StatusCode == 200 && len(getBody) == 0 {
			t.Errorf("GET %s: empty body", path)
		}
		if get.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("GET %s: no CORS header", path)
		}
	}
}

// TestPublicNumbersCountPublicEntries: /health and /stats leave private
// entries, and their types, out.
func TestPublicNumbersCountPublicEntries(t *testing.T) {
	f := newRulesServer(t)
	public := len(fixtureEntries) + 1
	var health struct{ Documents int }
	_, body := f.do(t, http.MethodGet, "/health", "")
	if err := json.Unmarshal(body, &health); err != nil || health.Documents != public {
		t.Errorf("health %s, want %d documents", body, public)
	}
	var stats struct {
		Entries struct {
			Total  int
			ByType map[string]int
		}
	}
	_, body = f.do(t, http.MethodGet, "/stats", "")
	if err := json.Unmarshal(body, &stats); err != nil || stats.Entries.Total != public {
		t.Errorf("stats %s, want total %d", body, public)
	}
	if _, ok := stats.Entries.ByType["application/openapi-operation+json"]; ok {
		t.Errorf("private entry's type shows in byType: %v", stats.Entries.ByType)
	}
}

// TestPageTokensSurviveRestart: a token from one process is honoured by
// the next on the same data, and one past its lifetime says it expired.
func TestPageTokensSurviveRestart(t *testing.T) {
	clock := &testClock{now: time.Now()}
	f := newTestServer(t, registry.Config{Now: clock.Now}, nil)
	first := f.search(t, `{"query":{"text":"weather"},"limit":2,"federation":"none"}`)
	_, agentsBody := f.do(t, http.MethodGet, "/agents?pageSize=2", "")
	var page struct{ NextPageToken string }
	_ = json.Unmarshal(agentsBody, &page)
	if first.PageToken == "" || page.NextPageToken == "" {
		t.Fatalf("no page tokens: %+v %s", first, agentsBody)
	}
	// A second service on the same kv and index: a restart.
	svc, err := registry.New(registry.Config{PublicURL: publicURL, Now: clock.Now}, f.db, f.ix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	g := &fixture{db: f.db, ix: f.ix, svc: svc, srv: srv}
	tests := []struct {
		name       string
		after      time.Duration
		method     string
		path, body string
		wantStatus int
		wantMsg    string
	}{
		{"search after restart", 0, http.MethodPost, "/search", `{"query":{"text":"weather"},"limit":2,"federation":"none","pageToken":"` + first.PageToken + `"}`, 200, ""},
		{"agents after restart", 0, http.MethodGet, "/agents?pageSize=2&pageToken=" + page.NextPageToken, "", 200, ""},
		{"search other query", 0, http.MethodPost, "/search", `{"query":{"text":"maps"},"limit":2,"federation":"none","pageToken":"` + first.PageToken + `"}`, 422, "is not a page token of this query"},
		{"search expired", 25 * time.Hour, http.MethodPost, "/search", `{"query":{"text":"weather"},"limit":2,"federation":"none","pageToken":"` + first.PageToken + `"}`, 422, "has expired"},
		{"agents expired", 25 * time.Hour, http.MethodGet, "/agents?pageSize=2&pageToken=" + page.NextPageToken, "", 422, "has expired"},
	}
	start := clock.Now()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock.Set(start.Add(tc.after))
			status, body := g.do(t, tc.method, tc.path, tc.body)
			if status != tc.wantStatus || !strings.Contains(string(body), tc.wantMsg) {
				t.Fatalf("status %d: %s", status, body)
			}
		})
	}
}

// TestFetchErrorsNameTheURL: a failed fetch names the URL that failed and
// never this machine's resolver or its own addresses.
func TestFetchErrorsNameTheURL(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, nil)
	for _, route := range []string{"/manifest/build", "/doctor"} {
		status, body := f.do(t, http.MethodPost, route, `{"domain":"unknown.test"}`)
		if route == "/manifest/build" && (status != 422 || !strings.Contains(decodeProblem(t, body).Detail, "https://unknown.test/")) {
			t.Errorf("%s: %d %s", route, status, body)
		}
		if strings.Contains(string(body), "10.255.255.53") || strings.Contains(string(body), ":53") {
			t.Errorf("%s leaks the resolver address: %s", route, body)
		}
	}
}
