package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/internal/pagecheck"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/report"
)

// demandBody decodes GET /demand.
type demandBody struct {
	report.DemandReport
	Access struct {
		Full        bool   `json:"full"`
		ServedDays  int    `json:"servedDays"`
		ServedLimit int    `json:"servedLimit"`
		Note        string `json:"note"`
	} `json:"access"`
}

func (f *fixture) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	status, body := f.do(t, http.MethodGet, path, "")
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

// probeSearch sends a search marked as the registry's own traffic, as the
// benchmark runner and web-position checks do (a context value).
func (f *fixture) probeSearch(t *testing.T, body string) searchResponse {
	t.Helper()
	req := httptest.NewRequestWithContext(registry.WithProbeTraffic(context.Background()), http.MethodPost, "/search", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.svc.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("probe search: %d %s", rec.Code, rec.Body)
	}
	var resp searchResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestDemandCountsRealSearches: searches answered through the API come
// back in /demand with exact counts, ranks and query texts; the
// registry's own traffic only with include_probe=1.
func TestDemandCountsRealSearches(t *testing.T) {
	f := newTestServer(t, registry.Config{FullReports: func(*http.Request, string) bool { return true }}, nil)
	const domain = "rain.test"
	type want struct {
		returned, best, firstPage int64
		queries                   map[string]int64 // normalized → searches
	}
	own, all := want{queries: map[string]int64{}}, want{queries: map[string]int64{}}
	count := func(w *want, text string, res searchResponse) {
		best := int64(0)
		for i, id := range ids(res.Results) {
			if report.PublisherOf(id) != domain {
				continue
			}
			rank := int64(i + 1)
			w.returned++
			if rank <= 10 {
				w.firstPage++
			}
			if w.best == 0 || rank < w.best {
				w.best = rank
			}
			if best == 0 || rank < best {
				best = rank
			}
		}
		if best > 0 {
			w.queries[report.NormalizeQuery(text)]++
		}
	}
	searches := []struct {
		text  string
		n     int
		probe bool
	}{
		{"weather forecast", 3, false},
		{"Rain  Radar", 2, false},
		{"precipitation", 1, false},
		{"driving directions", 2, false}, // returns no rain.test entry
		{"rain radar", 4, true},
	}
	for _, s := range searches {
		body := fmt.Sprintf(`{"query":{"text":%q},"federation":"none"}`, s.text)
		for range s.n {
			var res searchResponse
			if s.probe {
				res = f.probeSearch(t, body)
			} else {
				res = f.search(t, body)
				count(&own, s.text, res)
			}
			count(&all, s.text, res)
		}
	}
	if own.returned == 0 || all.returned == own.returned {
		t.Fatalf("the searches do not exercise the report: own %d, with probes %d", own.returned, all.returned)
	}
	f.records(t) // flush the demand log

	check := func(path string, w want) demandBody {
		t.Helper()
		var d demandBody
		f.getJSON(t, path, &d)
		if len(d.Entries) != 1 || d.Entries[0].Identifier != "urn:air:rain.test:radar" {
			t.Fatalf("%s: entries %+v", path, d.Entries)
		}
		e := d.Entries[0]
		if e.Returned != w.returned || e.BestRank != w.best || e.FirstPage != w.firstPage {
			t.Fatalf("%s: returned %d best %d first page %d; want %d %d %d", path, e.Returned, e.BestRank, e.FirstPage, w.returned, w.best, w.firstPage)
		}
		got := map[string]int64{}
		for _, q := range d.Queries {
			got[q.Normalized] = q.Searches
		}
		if fmt.Sprint(got) != fmt.Sprint(w.queries) {
			t.Fatalf("%s: queries %v, want %v", path, got, w.queries)
		}
		var total int64
		for _, n := range w.queries {
			total += n
		}
		if d.Searches != total {
			t.Fatalf("%s: searches %d, want %d", path, d.Searches, total)
		}
		return d
	}
	d := check("/demand?domain=rain.test&days=1", own)
	if d.IncludeProbe {
		t.Fatal("includeProbe without asking")
	}
	for _, q := range d.Queries {
		if q.Normalized == "rain radar" && q.Text != "Rain  Radar" {
			t.Fatalf("query shown as %q, want it as first asked", q.Text)
		}
	}
	check("/demand?domain=rain.test&include_probe=1", all)

	// Another domain's report counts only its own entries.
	var other demandBody
	f.getJSON(t, "/demand?domain=maps.test", &other)
	if other.Appearances == 0 || other.Entries[0].Identifier != "urn:air:maps.test:route" {
		t.Fatalf("maps.test: %+v", other)
	}
	var none demandBody
	f.getJSON(t, "/demand?domain=nothing.test", &none)
	if none.Appearances != 0 || len(none.Entries) != 0 || none.Searches != 0 {
		t.Fatalf("nothing.test: %+v", none)
	}
}

// TestReportParameters: the contract's bounds, 422 outside them, and the
// free window.
func TestReportParameters(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	for _, tc := range []struct {
		path  string
		want  int
		field string
	}{
		{"/demand", 422, "domain"},
		{"/demand?domain=", 422, "domain"},
		{"/demand?domain=ab", 422, "domain"},
		{"/demand?domain=http://x.test/", 422, "domain"},
		{"/demand?domain=x.test&days=0", 422, "days"},
		{"/demand?domain=x.test&days=366", 422, "days"},
		{"/demand?domain=x.test&days=ten", 422, "days"},
		{"/demand?domain=x.test&limit=0", 422, "limit"},
		{"/demand?domain=x.test&limit=201", 422, "limit"},
		{"/demand?domain=x.test&include_probe=2", 422, "include_probe"},
		{"/demand?domain=x.test&include_probe=true", 422, "include_probe"},
		{"/demand?domain=x.test&domain=y.test", 422, "domain"},
		{"/demand?domain=x.test&who=me", 422, "who"},
		{"/demand?domain=x.test&days=365&limit=200&include_probe=1", 200, ""},
		{"/demand?domain=x.test&days=1&limit=1&include_probe=0", 200, ""},
		{"/analytics?domain=x.test&days=366", 422, "days"},
		{"/analytics?domain=x.test&limit=5", 422, "limit"},
		{"/analytics?domain=x.test", 200, ""},
		{"/insights", 422, "domain"},
		{"/insights?domain=x.test&days=365", 200, ""},
		{"/web-position?domain=x.test&days=0", 422, "days"},
		{"/web-position?domain=x.test", 200, ""},
		{"/usage?domain=x.test&metric=likes", 422, "metric"},
		{"/usage?domain=x.test&metric=", 422, "metric"},
		{"/usage?domain=x.test&metric=dependents", 200, ""},
		{"/adoption?domain=x.test", 422, "domain"},
		{"/adoption", 200, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			status, body := f.do(t, http.MethodGet, tc.path, "")
			if status != tc.want {
				t.Fatalf("status %d, want %d: %s", status, tc.want, body)
			}
			if tc.field != "" && !decodeProblem(t, body).hasField(tc.field) {
				t.Fatalf("problem does not name %s: %s", tc.field, body)
			}
		})
	}

	// Without FullReports the free window is served, and the payload says so.
	var d demandBody
	f.getJSON(t, "/demand?domain=x.test&days=90&limit=200", &d)
	if d.Access.Full || d.Days != 7 || d.Access.ServedDays != 7 || d.Access.ServedLimit != 25 || !strings.Contains(d.Access.Note, "free window") {
		t.Fatalf("free window: days %d access %+v", d.Days, d.Access)
	}
	d = demandBody{}
	f.getJSON(t, "/demand?domain=x.test&days=3", &d)
	if d.Days != 3 || d.Access.Note != "" {
		t.Fatalf("inside the free window: days %d access %+v", d.Days, d.Access)
	}
	full := newTestServer(t, registry.Config{FullReports: func(r *http.Request, domain string) bool {
		return domain == "x.test" && r.Header.Get("X-Test-Owner") == "yes"
	}}, nil)
	req, _ := http.NewRequest(http.MethodGet, full.srv.URL+"/demand?domain=x.test&days=90&limit=200", nil)
	req.Header.Set("X-Test-Owner", "yes")
	resp, err := full.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if !d.Access.Full || d.Days != 90 || d.Access.ServedLimit != 200 {
		t.Fatalf("full window: days %d access %+v", d.Days, d.Access)
	}
}

const privateID = "urn:air:corp.test:secret-weather"

// TestReportsNeverIdentifyCallers: whoever searched (address, key, user
// agent) and whatever private entry they saw, no report carries it. The
// searches are drawn at random; every report of every domain is read.
func TestReportsNeverIdentifyCallers(t *testing.T) {
	var key string // a real key, minted below
	f := newTestServer(t, registry.Config{
		Viewer: func(r *http.Request) []string {
			if r.Header.Get("Authorization") == "Bearer "+key {
				return []string{"corp.test"}
			}
			return nil
		},
		FullReports: func(*http.Request, string) bool { return true },
	}, nil)
	{
		resp, err := http.Post(f.srv.URL+"/claim", "application/json", strings.NewReader(`{"domain":"corp.test"}`))
		if err != nil {
			t.Fatal(err)
		}
		var minted struct {
			Key struct {
				Key string `json:"key"`
			} `json:"key"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&minted); err != nil || minted.Key.Key == "" {
			t.Fatalf("POST /claim minted no key: %v (status %d)", err, resp.StatusCode)
		}
		resp.Body.Close()
		key = minted.Key.Key
	}
	loadPrivate(t, f, "corp.test", `{"identifier":"`+privateID+`","displayName":"Secret Weather","type":"application/mcp-server-card+json","url":"https://corp.test/card.json","description":"Internal weather forecast service.","tags":["weather"],"representativeQueries":["weather forecast"]}`)
	rng := rand.New(rand.NewPCG(7, 7))
	texts := []string{"weather forecast", "weather", "rain radar", "secret weather", "internal weather", "storm", "pdf form"}
	agents := []string{"UA-Probe/9.9 (unique-agent-4411)", "curl/8.0 unique-agent-4411"}
	sawPrivate := false
	for i := range 40 {
		body := fmt.Sprintf(`{"query":{"text":%q},"federation":"none"}`, texts[rng.IntN(len(texts))])
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/search", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", agents[rng.IntN(len(agents))])
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
		if rng.IntN(2) == 0 {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var res searchResponse
		_ = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		sawPrivate = sawPrivate || slices.Contains(ids(res.Results), privateID)
	}
	f.records(t)
	if !sawPrivate {
		// Searches do not pass a viewer to the index yet (keys are issue
		// 16's): record what such a search records, a private result
		// among public ones, through the same rollup.
		for i := range 5 {
			rec := kv.SearchRecord{Time: time.Now().UTC(), Text: "weather forecast", Results: []kv.ReturnedEntry{
				{ID: privateID, Rank: 1, Private: true},
				{ID: "urn:air:weather.test:forecast", Rank: 2},
				{ID: "urn:air:meteo.test:now", Rank: 3 + i%2},
			}}
			if err := f.db.AppendSearches([]kv.SearchRecord{rec}); err != nil {
				t.Fatal(err)
			}
		}
		f.records(t) // the writer counts them into the rollups
	}
	forbidden := []string{key, "unique-agent-4411", "203.0.113.", "127.0.0.1", "secret-weather", "Secret Weather"}
	for _, domain := range []string{"corp.test", "weather.test", "meteo.test", "rain.test", "storm.test"} {
		for _, path := range []string{"/demand?domain=%s&include_probe=1&limit=200&days=365", "/analytics?domain=%s", "/insights?domain=%s",
			"/web-position?domain=%s", "/usage?domain=%s"} {
			for _, accept := range []string{"application/json", "text/html"} {
				req, _ := http.NewRequest(http.MethodGet, f.srv.URL+fmt.Sprintf(path, domain), nil)
				req.Header.Set("Accept", accept)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := f.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var sb strings.Builder
				_, _ = fmt.Fprint(&sb, readAll(t, resp))
				for _, s := range forbidden {
					if strings.Contains(sb.String(), s) {
						t.Fatalf("%s (%s) carries %q:\n%s", req.URL.Path+"?"+req.URL.RawQuery, accept, s, sb.String())
					}
				}
			}
		}
	}
	// The public entries those searches returned are counted.
	var d demandBody
	f.getJSON(t, "/demand?domain=weather.test", &d)
	if d.Appearances == 0 {
		t.Fatal("weather.test was never counted: the test proves nothing")
	}
	// The raw demand log has no field for any of it either.
	for _, rec := range f.records(t) {
		raw, _ := json.Marshal(rec)
		for _, s := range forbidden[:4] {
			if strings.Contains(string(raw), s) {
				t.Fatalf("demand record carries %q: %s", s, raw)
			}
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", resp.Request.URL, resp.StatusCode, b.String())
	}
	return b.String()
}

// usageBody decodes GET /usage.
type usageBody struct {
	Targets []string        `json:"targets"`
	Today   []report.Figure `json:"today"`
	History []report.UsageDay
}

// TestUsageSourcesThatFailHangAndLie: figures come from loopback fakes of
// the public interfaces; a source that fails, hangs, answers the wrong
// type or a huge body shows as unavailable with a reason, never as zero.
func TestUsageSourcesThatFailHangAndLie(t *testing.T) {
	var calls atomic.Int64
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/repos/good/tool":
			fmt.Fprint(w, `{"full_name":"good/tool","stargazers_count":42}`)
		case "/repos/zero/tool":
			fmt.Fprint(w, `{"stargazers_count":0}`)
		case "/repos/fail/tool":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/repos/hang/tool":
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		case "/repos/string/tool":
			fmt.Fprint(w, `{"stargazers_count":"42"}`)
		case "/repos/negative/tool":
			fmt.Fprint(w, `{"stargazers_count":-3}`)
		case "/repos/missing/tool":
			fmt.Fprint(w, `{"full_name":"missing/tool"}`)
		case "/repos/huge/tool":
			fmt.Fprint(w, `{"stargazers_count":1,"pad":"`+strings.Repeat("x", 2<<20)+`"}`)
		case "/repos/html/tool":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html>rate limited</html>`)
		case "/downloads/point/last-month/good-pkg":
			fmt.Fprint(w, `{"downloads":1234,"package":"good-pkg"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(fake.Close)
	client := &http.Client{Timeout: 300 * time.Millisecond}
	f := newTestServer(t, registry.Config{Reports: registry.ReportSources{Usage: report.UsageConfig{
		GitHubBase: fake.URL, NPMBase: fake.URL, Client: client, Burst: 100,
	}}}, nil)
	repos := []string{"good", "zero", "fail", "hang", "string", "negative", "missing", "huge", "html", "absent"}
	var urls []string
	for _, r := range repos {
		urls = append(urls, `"https://github.com/`+r+`/tool"`)
	}
	loadEntries(t, f.db, f.ix, "usage", []string{
		`{"identifier":"urn:air:tools.test:a","displayName":"A","type":"application/mcp-server-card+json","url":"https://tools.test/a.json","description":"tool a","metadata":{"repos":[` + strings.Join(urls[:5], ",") + `]}}`,
		`{"identifier":"urn:air:tools.test:b","displayName":"B","type":"application/mcp-server-card+json","url":"https://tools.test/b.json","description":"tool b","metadata":{"repos":[` + strings.Join(urls[5:], ",") + `]},"data":{"packages":[{"registryType":"npm","identifier":"good-pkg"},{"registryType":"npm","identifier":"gone-pkg"}]}}`,
	})

	var u usageBody
	f.getJSON(t, "/usage?domain=tools.test", &u)
	if len(u.Today) != len(repos) {
		t.Fatalf("targets %v, figures %d", u.Targets, len(u.Today))
	}
	for _, fig := range u.Today {
		repo, _, _ := strings.Cut(fig.Target, "/")
		switch repo {
		case "good", "zero":
			wantV := map[string]int64{"good": 42, "zero": 0}[repo]
			if !fig.Available || fig.Value == nil || *fig.Value != wantV || !strings.HasPrefix(fig.Source, fake.URL+"/repos/") || fig.At.IsZero() {
				t.Fatalf("%s: %+v", fig.Target, fig)
			}
		default:
			if fig.Available || fig.Value != nil || fig.Reason == "" {
				t.Fatalf("%s: a failing source must be unavailable with a reason, not a number: %+v", fig.Target, fig)
			}
		}
	}
	// The JSON says null, not 0, for an unavailable figure.
	_, raw := f.do(t, http.MethodGet, "/usage?domain=tools.test", "")
	if !strings.Contains(string(raw), `"value":null`) {
		t.Fatalf("no null value in %s", raw)
	}
	// The second read serves fresh figures from the cache, asks again for the rest.
	before := calls.Load()
	f.getJSON(t, "/usage?domain=tools.test", &u)
	if after := calls.Load(); after-before != int64(len(repos)-2) {
		t.Fatalf("second read made %d calls, want %d (the two good figures cached)", after-before, len(repos)-2)
	}
	for _, fig := range u.Today {
		if fig.Available && !fig.Cached {
			t.Fatalf("%s was read again: %+v", fig.Target, fig)
		}
	}
	if len(u.History) != 1 {
		t.Fatalf("history %+v", u.History)
	}

	f.getJSON(t, "/usage?domain=tools.test&metric=npm-downloads", &u)
	got := map[string]string{}
	for _, fig := range u.Today {
		if fig.Value != nil {
			got[fig.Target] = fmt.Sprint(*fig.Value)
		} else {
			got[fig.Target] = "unavailable"
		}
	}
	if fmt.Sprint(got) != "map[gone-pkg:unavailable good-pkg:1234]" {
		t.Fatalf("npm figures %v", got)
	}
	// A source the operator did not configure is unavailable, not zero.
	f.getJSON(t, "/usage?domain=tools.test&metric=pypi-downloads", &u)
	if len(u.Today) != 0 {
		t.Fatalf("pypi figures without a named package: %+v", u.Today)
	}
}

// webBody decodes GET /web-position.
type webBody struct {
	Configured bool              `json:"providerConfigured"`
	Phrasings  []string          `json:"phrasings"`
	Today      []report.WebCheck `json:"today"`
	History    []report.WebCheck `json:"history"`
	Notes      []string          `json:"notes"`
}

// TestWebPosition: without a provider nothing is called and the payload
// says so; with a loopback fake, positions are read, recorded for the
// day and not asked again; a provider that hangs or lies gives no position.
func TestWebPosition(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	var wb webBody
	f.getJSON(t, "/web-position?domain=weather.test", &wb)
	if wb.Configured || len(wb.Today) != 0 || len(wb.History) != 0 || !strings.Contains(wb.Notes[0], "No web-search provider") {
		t.Fatalf("unconfigured: %+v", wb)
	}
	if !slices.Contains(wb.Phrasings, "weather forecast tools") {
		t.Fatalf("phrasings %v lack the entry's representative query", wb.Phrasings)
	}

	var calls atomic.Int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("X-Subscription-Token") != "web-key" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		switch r.URL.Query().Get("q") {
		case "weather forecast tools":
			fmt.Fprint(w, `{"web":{"results":[{"url":"https://other.test/a"},{"url":"https://x.test/"},{"url":"https://docs.weather.test/mcp"},{"url":"https://weather.test/"}]}}`)
		case "will it rain tomorrow":
			fmt.Fprint(w, `{"web":{"results":[{"url":"https://other.test/a"},{"url":"https://notweather.test/"}]}}`)
		default:
			fmt.Fprint(w, `{"web":{"results":[{"url":42}]}}`)
		}
	}))
	t.Cleanup(fake.Close)
	f = newTestServer(t, registry.Config{Reports: registry.ReportSources{WebSearch: report.WebSearchConfig{
		Endpoint: fake.URL + "/search", Key: "web-key", Client: &http.Client{Timeout: time.Second}, Burst: 10,
	}}}, nil)
	f.getJSON(t, "/web-position?domain=weather.test", &wb)
	pos := map[string]string{}
	for _, c := range wb.Today {
		switch {
		case c.Checked && c.Position != nil:
			pos[c.Phrase] = fmt.Sprint(*c.Position)
		case c.Checked:
			pos[c.Phrase] = "not found"
		default:
			pos[c.Phrase] = "unavailable"
		}
	}
	if pos["weather forecast tools"] != "3" || pos["will it rain tomorrow"] != "not found" {
		t.Fatalf("positions %v", pos)
	}
	if len(wb.History) != 2 {
		t.Fatalf("recorded %+v; want the two checked phrasings", wb.History)
	}
	n := calls.Load()
	f.getJSON(t, "/web-position?domain=weather.test", &wb)
	if got := calls.Load() - n; got != 0 {
		t.Fatalf("the second report of the day called the provider %d times for checked phrasings", got)
	}
}

// TestReportPagesReadable: each report negotiates an HTML page with an
// inline SVG chart and readable contrast.
func TestReportPagesReadable(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	for range 3 {
		f.search(t, `{"query":{"text":"weather forecast"},"federation":"none"}`)
	}
	f.records(t)
	for _, path := range []string{"/demand?domain=weather.test", "/analytics?domain=weather.test", "/insights?domain=weather.test",
		"/web-position?domain=weather.test", "/usage?domain=weather.test", "/adoption"} {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
		req.Header.Set("Accept", "text/html")
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("%s: %s", path, ct)
		}
		if strings.Contains(body, "<script") || strings.Contains(body, "http://cdn") || strings.Contains(body, "https://cdn") {
			t.Fatalf("%s: page loads something", path)
		}
		if path != "/web-position?domain=weather.test" && path != "/usage?domain=weather.test" && !strings.Contains(body, "<svg") {
			t.Fatalf("%s: no chart", path)
		}
	}
	for _, path := range []string{"/demand?domain=weather.test", "/adoption", "/insights?domain=weather.test"} {
		pagecheck.Check(t, f.svc.Handler(), path)
	}
}

// TestInsightsAndAnalyticsFromRealSearches: /insights follows the top
// queries' best rank and names the publishers ranked above (from the
// very responses); /analytics lists zero-result queries in the domain's
// categories only.
func TestInsightsAndAnalyticsFromRealSearches(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	const domain = "rain.test"
	above := map[string]int64{}
	var best int64
	for range 2 {
		res := f.search(t, `{"query":{"text":"weather forecast"},"federation":"none"}`)
		got := ids(res.Results)
		at := slices.IndexFunc(got, func(id string) bool { return report.PublisherOf(id) == domain })
		if at < 1 {
			t.Fatalf("rain.test at %d in %v: the test needs it below others", at, got)
		}
		best = int64(at + 1)
		seen := map[string]bool{}
		for _, id := range got[:at] {
			if p := report.PublisherOf(id); !seen[p] {
				seen[p] = true
				above[p]++
			}
		}
	}
	for _, body := range []string{
		`{"query":{"text":"tornado","filter":{"tags":["radar"]}},"federation":"none"}`,
		`{"query":{"text":"xyzzy plugh"},"federation":"none"}`,
	} {
		if res := f.search(t, body); len(res.Results) != 0 {
			t.Fatalf("%s found %v", body, ids(res.Results))
		}
	}
	f.records(t)

	var in report.InsightsReport
	f.getJSON(t, "/insights?domain=rain.test", &in)
	if len(in.Queries) == 0 || in.Queries[0].Normalized != "weather forecast" {
		t.Fatalf("insights %+v", in)
	}
	q := in.Queries[0]
	today := q.Days[len(q.Days)-1]
	if q.Searches != 2 || q.BestRank != best || today.Searches != 2 || today.BestRank != best || len(q.Days) != 7 {
		t.Fatalf("query %+v", q)
	}
	gotAbove := map[string]int64{}
	for _, a := range q.RankedAbove {
		gotAbove[a.Publisher] = a.Searches
	}
	if fmt.Sprint(gotAbove) != fmt.Sprint(above) {
		t.Fatalf("ranked above %v, want %v", gotAbove, above)
	}

	var an struct {
		Categories  []string `json:"categories"`
		ZeroResults struct {
			Total   int                `json:"total"`
			Queries []report.ZeroQuery `json:"queries"`
		} `json:"zeroResultQueries"`
		PerDay []report.DayCount `json:"perDay"`
		Probes struct {
			Entries []map[string]any `json:"entries"`
		} `json:"probes"`
	}
	f.getJSON(t, "/analytics?domain=rain.test", &an)
	if !slices.Contains(an.Categories, "radar") {
		t.Fatalf("categories %v", an.Categories)
	}
	if an.ZeroResults.Total != 1 || an.ZeroResults.Queries[0].Text != "tornado" || an.ZeroResults.Queries[0].Searches != 1 {
		t.Fatalf("zero-result queries %+v", an.ZeroResults)
	}
	if last := an.PerDay[len(an.PerDay)-1]; last.Searches != 2 || last.MeanBestRank != float64(best) {
		t.Fatalf("per day %+v", an.PerDay)
	}
	if len(an.Probes.Entries) != 1 || an.Probes.Entries[0]["entry"] != "urn:air:rain.test:radar" {
		t.Fatalf("probes %+v", an.Probes)
	}
}

// TestReportSourcesHangAndRateLimit: a web-search provider that hangs
// gives no position and records nothing; a usage source past its rate
// limit is held back, not read, and shows as unavailable.
func TestReportSourcesHangAndRateLimit(t *testing.T) {
	hang := make(chan struct{})
	var calls atomic.Int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if strings.HasPrefix(r.URL.Path, "/repos/") {
			fmt.Fprint(w, `{"stargazers_count":7}`)
			return
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); fake.Close() })
	f := newTestServer(t, registry.Config{Reports: registry.ReportSources{
		WebSearch: report.WebSearchConfig{Endpoint: fake.URL + "/search", Client: &http.Client{Timeout: 200 * time.Millisecond}},
		Usage:     report.UsageConfig{GitHubBase: fake.URL, Burst: 2, PerSecond: 0.001},
	}}, nil)
	var wb webBody
	f.getJSON(t, "/web-position?domain=weather.test", &wb)
	if len(wb.Today) == 0 || len(wb.History) != 0 {
		t.Fatalf("hanging provider: %+v", wb)
	}
	for _, c := range wb.Today {
		if c.Checked || c.Position != nil || !strings.Contains(c.Reason, "in time") {
			t.Fatalf("hanging provider gave %+v", c)
		}
	}
	loadEntries(t, f.db, f.ix, "repos", []string{
		`{"identifier":"urn:air:many.test:a","displayName":"A","type":"application/mcp-server-card+json","url":"https://many.test/a.json","description":"a","metadata":{"r":["https://github.com/o/one","https://github.com/o/two","https://github.com/o/three"]}}`,
	})
	before := calls.Load()
	var u usageBody
	f.getJSON(t, "/usage?domain=many.test", &u)
	if calls.Load()-before != 2 || len(u.Today) != 3 || !u.Today[0].Available || !u.Today[1].Available ||
		u.Today[2].Available || u.Today[2].Value != nil || !strings.Contains(u.Today[2].Reason, "rate limit") {
		t.Fatalf("rate limit: %d calls, %+v", calls.Load()-before, u.Today)
	}
}

// TestAdoptionCountsAndSnapshots: /adoption counts what the public
// entries publish and keeps one snapshot a day.
func TestAdoptionCountsAndSnapshots(t *testing.T) {
	var now atomic.Pointer[time.Time]
	day1 := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	now.Store(&day1)
	f := newTestServer(t, registry.Config{Now: func() time.Time { return *now.Load() }}, []string{})
	loadEntries(t, f.db, f.ix, "https://ard.test/.well-known/ard.json", []string{
		`{"identifier":"urn:air:ard.test:mcp","displayName":"M","type":"application/mcp-server-card+json","url":"https://ard.test/mcp.json","description":"m","representativeQueries":["q"],"metadata":{"mcp.transport":"streamable-http","mcp.handshake":"ok","mcp.authRequired":true}}`,
		`{"identifier":"urn:air:ard.test:agent","displayName":"A","type":"application/a2a-agent-card+json","url":"https://ard.test/agent.json","description":"a","trustManifest":{"identity":"did:web:ard.test"}}`,
	})
	loadEntries(t, f.db, f.ix, "https://old.test/.well-known/ai-catalog.json", []string{
		`{"identifier":"urn:air:old.test:mcp","displayName":"O","type":"application/mcp-server-card+json","url":"https://old.test/mcp.json","description":"o","data":{"remotes":[{"type":"sse","url":"https://old.test/sse"}]}}`,
	})
	loadEntries(t, f.db, f.ix, "https://both.test/.well-known/ard.json", []string{
		`{"identifier":"urn:air:both.test:op","displayName":"Op","type":"application/openapi-operation+json","url":"https://both.test/api","description":"op","metadata":{"source.kind":"llms.txt"}}`,
	})
	loadEntries(t, f.db, f.ix, "https://both.test/.well-known/ai-catalog.json", []string{
		`{"identifier":"urn:air:both.test:op2","displayName":"Op2","type":"application/openapi-operation+json","url":"https://both.test/api2","description":"op2"}`,
	})
	loadPrivate(t, f, "corp.test", `{"identifier":"urn:air:corp.test:private","displayName":"P","type":"application/mcp-server-card+json","url":"https://corp.test/p.json","description":"p","representativeQueries":["p"]}`)

	var a struct {
		Current report.Adoption   `json:"current"`
		History []report.Adoption `json:"history"`
	}
	f.getJSON(t, "/adoption", &a)
	c := a.Current
	got := fmt.Sprintf("entries=%d pubs=%+v mcp=%d transport=%v auth=%v a2a=%d openapi=%d llms=%+v trust=%+v rq=%+v",
		c.Entries, c.Publishers, c.MCP.Total, c.MCP.ByTransport, c.MCP.ByAuth, c.A2ACards, c.OpenAPI, c.LLMsTxt, c.Trust, c.RepQueries)
	want := "entries=5 pubs={Total:3 ARD:2 LegacyOnly:1 Other:0} mcp=2 transport=map[sse:1 streamable-http:1] auth=map[required:1 unknown:1] a2a=1 openapi=2 llms={Entries:1 Publishers:1} trust={Entries:1 Publishers:1} rq={Entries:1 Publishers:1}"
	if got != want {
		t.Fatalf("adoption\n got %s\nwant %s", got, want)
	}
	if len(a.History) != 1 || a.History[0].Date != "2026-11-20" {
		t.Fatalf("history %+v", a.History)
	}
	day2 := day1.Add(26 * time.Hour)
	now.Store(&day2)
	loadEntries(t, f.db, f.ix, "https://new.test/.well-known/ard.json", []string{
		`{"identifier":"urn:air:new.test:a","displayName":"N","type":"application/a2a-agent-card+json","url":"https://new.test/a.json","description":"n"}`,
	})
	f.getJSON(t, "/adoption", &a)
	if len(a.History) != 2 || a.History[0].Publishers.ARD != 2 || a.History[1].Publishers.ARD != 3 || a.Current.A2ACards != 2 {
		t.Fatalf("second day: current %+v history %+v", a.Current.Publishers, a.History)
	}
}
