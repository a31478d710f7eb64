package registry_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/registry"
)

// fakeUpstream is an upstream registry answering POST /search with a fixed
// body after a delay, remembering the last request it got.
type fakeUpstream struct {
	*httptest.Server
	calls   atomic.Int64
	lastReq atomic.Value // map[string]any
}

func newFakeUpstream(t *testing.T, status int, body string, delay time.Duration) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/search" {
			http.NotFound(w, r)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var req map[string]any
		_ = json.Unmarshal(raw, &req)
		u.lastReq.Store(req)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(u.Close)
	return u
}

func upstreamResults(items ...string) string {
	return `{"results":[` + strings.Join(items, ",") + `]}`
}

func TestFederationAuto(t *testing.T) {
	// ok: one result only it has, and a copy of a local entry (with another
	// displayName) that must lose to the local copy.
	good := newFakeUpstream(t, http.StatusOK, upstreamResults(
		`{"identifier":"urn:air:far.test:weather","displayName":"Far Weather","type":"application/mcp-server-card+json","url":"https://far.test/card.json","score":97,"source":"https://whatever","representativeQueries":["x","y"]}`,
		`{"identifier":"urn:air:weather.test:forecast","displayName":"IMPOSTOR","type":"application/mcp-server-card+json","url":"https://evil.test","score":99}`,
		`{"displayName":"no identifier, dropped"}`,
		`"not an object, dropped"`,
		`{"identifier":"urn:air:far.test:weather","displayName":"listed twice","type":"application/mcp-server-card+json","url":"https://x.test/card.json","score":1}`,
	), 0)
	// a second good upstream that agrees with the first on far.test
	second := newFakeUpstream(t, http.StatusOK, upstreamResults(
		`{"identifier":"urn:air:far.test:weather","displayName":"Far Weather (second copy)","type":"application/mcp-server-card+json","url":"https://x.test/card.json","score":50}`,
		`{"identifier":"urn:air:other.test:x","displayName":"Other","type":"application/mcp-server-card+json","url":"https://x.test/card.json","score":150}`,
	), 0)
	slow := newFakeUpstream(t, http.StatusOK, upstreamResults(`{"identifier":"urn:air:slow.test:x","displayName":"X","type":"application/mcp-server-card+json","url":"https://x.test/card.json","score":100}`), 10*time.Second)
	failing := newFakeUpstream(t, http.StatusInternalServerError, `{"error":"boom"}`, 0)
	malformed := newFakeUpstream(t, http.StatusOK, `{"results": "nope"`, 0)
	noResults := newFakeUpstream(t, http.StatusOK, `{"items":[]}`, 0)

	f := newTestServer(t, registry.Config{
		Upstreams:         []string{good.URL, second.URL, slow.URL, failing.URL, malformed.URL, noResults.URL + "/"},
		FederationTimeout: 300 * time.Millisecond,
	}, nil)

	start := time.Now()
	resp := f.search(t, `{"query":{"text":"weather forecast"},"limit":20}`)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("search waited %v for a slow upstream; the deadline is 300ms", took)
	}
	got := ids(resp.Results)
	bySource := map[string]map[string]any{}
	for _, r := range resp.Results {
		bySource[r["identifier"].(string)] = r
	}
	if n := countOf(got, "urn:air:weather.test:forecast"); n != 1 {
		t.Fatalf("duplicate identifier appears %d times: %v", n, got)
	}
	if r := bySource["urn:air:weather.test:forecast"]; r["source"] != publicURL || r["displayName"] != "Weather Forecast" {
		t.Fatalf("the local copy must win: %v", r)
	}
	far := bySource["urn:air:far.test:weather"]
	if far == nil || far["source"] != good.URL || far["displayName"] != "Far Weather" || far["score"] != float64(97) {
		t.Fatalf("upstream result not fused with its source: %v", far)
	}
	if _, ok := far["representativeQueries"]; ok {
		t.Fatalf("upstream representativeQueries passed through: %v", far)
	}
	if o := bySource["urn:air:other.test:x"]; o == nil || o["score"] != float64(100) || o["source"] != second.URL {
		t.Fatalf("out-of-range upstream score not clamped, or source wrong: %v", o)
	}
	// Found by two upstreams, far.test outranks other.test (found by one,
	// at rank 2): reciprocal rank fusion adds up agreement.
	if slices.Index(got, "urn:air:far.test:weather") > slices.Index(got, "urn:air:other.test:x") {
		t.Fatalf("fusion order %v", got)
	}
	if slices.Contains(got, "urn:air:slow.test:x") {
		t.Fatal("a result of the slow upstream arrived after the deadline yet was used")
	}
	// The upstream was asked not to federate further, with our query.
	req, _ := good.lastReq.Load().(map[string]any)
	if req["federation"] != "none" || req["query"].(map[string]any)["text"] != "weather forecast" {
		t.Fatalf("upstream request %v", req)
	}

	recs := f.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	outcomes := map[string]string{}
	for _, u := range recs[0].Upstreams {
		outcomes[u.Upstream] = u.Outcome
	}
	want := map[string]string{good.URL: "ok", second.URL: "ok", slow.URL: "timeout", failing.URL: "error", malformed.URL: "error", noResults.URL: "error"}
	for k, v := range want {
		if outcomes[k] != v {
			t.Errorf("outcome of %s = %q, want %q (all: %v)", k, outcomes[k], v, outcomes)
		}
	}
	for _, r := range recs[0].Results {
		if r.ID == "urn:air:far.test:weather" && r.Source != good.URL {
			t.Errorf("demand record of an upstream result lacks its source: %+v", r)
		}
	}

	// /stats shows the per-upstream outcome counts.
	status, body := f.do(t, http.MethodGet, "/stats", "")
	if status != http.StatusOK {
		t.Fatalf("stats %d %s", status, body)
	}
	var st struct {
		Federation []struct {
			Upstream           string
			OK, Error, Timeout int
		} `json:"federation"`
	}
	_ = json.Unmarshal(body, &st)
	counts := map[string][3]int{}
	for _, u := range st.Federation {
		counts[u.Upstream] = [3]int{u.OK, u.Error, u.Timeout}
	}
	if counts[good.URL] != [3]int{1, 0, 0} || counts[slow.URL] != [3]int{0, 0, 1} || counts[failing.URL] != [3]int{0, 1, 0} {
		t.Fatalf("stats federation %s", body)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func TestFederationNoneAndNoUpstreams(t *testing.T) {
	up := newFakeUpstream(t, http.StatusOK, upstreamResults(`{"identifier":"urn:air:far.test:weather","displayName":"X","type":"application/mcp-server-card+json","url":"https://x.test/card.json","score":90}`), 0)
	f := newTestServer(t, registry.Config{Upstreams: []string{up.URL}}, nil)
	resp := f.search(t, `{"query":{"text":"weather"},"federation":"none"}`)
	if up.calls.Load() != 0 || slices.Contains(ids(resp.Results), "urn:air:far.test:weather") {
		t.Fatal("federation none asked an upstream")
	}

	// auto without upstreams answers like none.
	lone := newTestServer(t, registry.Config{}, nil)
	auto := lone.search(t, `{"query":{"text":"weather"}}`)
	none := lone.search(t, `{"query":{"text":"weather"},"federation":"none"}`)
	if !slices.Equal(ids(auto.Results), ids(none.Results)) || len(auto.Results) == 0 {
		t.Fatalf("auto %v != none %v", ids(auto.Results), ids(none.Results))
	}
}

func TestFederationPagination(t *testing.T) {
	var items []string
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		items = append(items, `{"identifier":"urn:air:far.test:`+id+`","displayName":"`+id+`","type":"application/mcp-server-card+json","url":"https://x.test/card.json","score":50}`)
	}
	up := newFakeUpstream(t, http.StatusOK, upstreamResults(items...), 0)
	f := newTestServer(t, registry.Config{Upstreams: []string{up.URL}}, nil)
	all := ids(f.search(t, `{"query":{"text":"weather"},"limit":100}`).Results)
	var paged []string
	token := ""
	for i := 0; i < 50; i++ {
		body := `{"query":{"text":"weather"},"limit":3`
		if token != "" {
			body += `,"pageToken":"` + token + `"`
		}
		resp := f.search(t, body+"}")
		paged = append(paged, ids(resp.Results)...)
		token = resp.PageToken
		if token == "" {
			break
		}
	}
	if !slices.Equal(paged, all) || len(all) < 8 {
		t.Fatalf("fused pages %v\nwant %v", paged, all)
	}
}

func TestFederationReferrals(t *testing.T) {
	up := newFakeUpstream(t, http.StatusOK, upstreamResults(), 0)
	f := newTestServer(t, registry.Config{Upstreams: []string{up.URL}}, nil)
	resp := f.search(t, `{"query":{"text":"weather"},"federation":"referrals"}`)
	if up.calls.Load() != 0 {
		t.Fatal("referrals mode asked an upstream")
	}
	if len(resp.Results) == 0 {
		t.Fatal("referrals mode returned no local results")
	}
	var refs []string
	for _, r := range resp.Referrals {
		if r["type"] != "application/ai-registry+json" {
			t.Fatalf("referral of type %v", r["type"])
		}
		refs = append(refs, r["url"].(string))
	}
	if !slices.Contains(refs, "https://hub.test") || !slices.Contains(refs, up.URL) {
		t.Fatalf("referrals %v lack the indexed registry or the upstream", refs)
	}
	// Without referrals mode there is no referrals member.
	if r := f.search(t, `{"query":{"text":"weather"},"federation":"none"}`); r.Referrals != nil {
		t.Fatal("referrals present with federation none")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	f := newTestServer(t, registry.Config{}, []string{})
	for _, cfg := range []registry.Config{
		{PublicURL: ""},
		{PublicURL: "registry.test"},
		{PublicURL: publicURL, Upstreams: []string{"ftp://x.test"}},
		{PublicURL: publicURL, Upstreams: []string{publicURL + "/"}},
	} {
		if _, err := registry.New(cfg, f.db, f.ix); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}
