package registry_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/registry"
)

// TestHostileUpstream drives upstreams that forge our members with JSON
// escapes and duplicates, send wrong types, ignore the filter, stall and
// send huge bodies; nothing of it may reach an answer.
func TestHostileUpstream(t *testing.T) {
	forger := newFakeUpstream(t, http.StatusOK, `{"results":[`+
		// escaped names: the upstream's own score/source/visibility
		`{"identifier":"urn:air:forge.test:a","displayName":"Forged A","type":"application/mcp-server-card+json","url":"https://forge.test/a","scor\u0065":999,"sourc\u0065":"https://registry.test","visibilit\u0079":"private","score":40},`+
		// duplicate members: the last one is what most parsers keep
		`{"identifier":"urn:air:forge.test:b","displayName":"Forged B","type":"application/mcp-server-card+json","url":"https://forge.test/b","score":40,"score":100,"source":"x","source":"https://registry.test","visibility":"public","visibility":"private"},`+
		// wrong types: dropped item by item
		`{"identifier":42,"displayName":"number id","type":"application/mcp-server-card+json","url":"https://forge.test/c"},`+
		`{"identifier":"urn:air:forge.test:d","displayName":["array"],"type":"application/mcp-server-card+json","url":"https://forge.test/d"},`+
		`{"identifier":"urn:air:forge.test:e","displayName":"No type","url":"https://forge.test/e"},`+
		`{"identifier":"urn:air:forge.test:f","displayName":"Neither url nor data","type":"application/mcp-server-card+json"},`+
		`{"identifier":"urn:air:forge.test:g","displayName":"bad url","type":"application/mcp-server-card+json","url":"javascript:alert(1)"},`+
		`{"identifier":"not a urn","displayName":"bad id","type":"application/mcp-server-card+json","url":"https://forge.test/h"},`+
		`{"identifier":"urn:air:forge.test:i","displayName":"typed members","type":"application/mcp-server-card+json","url":"https://forge.test/i","tags":"weather","metadata":["x"],"extra":{"__proto__":1},"representativeQueries":["q","r"]},`+
		// ignores the filter: an A2A card in an MCP-only search
		`{"identifier":"urn:air:forge.test:j","displayName":"Wrong type","type":"application/a2a-agent-card+json","url":"https://forge.test/j"}`+
		`]}`, 0)
	stall := newFakeUpstream(t, http.StatusOK, upstreamResults(`{"identifier":"urn:air:stall.test:x","displayName":"Stall","type":"application/mcp-server-card+json","url":"https://stall.test/x"}`), 10*time.Second)
	huge := newFakeUpstream(t, http.StatusOK, `{"results":[{"identifier":"urn:air:huge.test:x","displayName":"Huge","type":"application/mcp-server-card+json","url":"https://huge.test/x","description":"`+strings.Repeat("A", 3<<20)+`"}]}`, 0)
	bigItem := newFakeUpstream(t, http.StatusOK, upstreamResults(`{"identifier":"urn:air:big.test:x","displayName":"Big","type":"application/mcp-server-card+json","url":"https://big.test/x","data":{"x":"`+strings.Repeat("B", 100<<10)+`"}}`), 0)

	f := newTestServer(t, registry.Config{
		Upstreams:         []string{forger.URL, stall.URL, huge.URL, bigItem.URL},
		FederationTimeout: 300 * time.Millisecond,
	}, nil)
	status, raw := f.do(t, http.MethodPost, "/search", `{"query":{"text":"weather forecast","filter":{"type":"application/mcp-server-card+json"}},"limit":50}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	var resp struct {
		Results   []json.RawMessage `json:"results"`
		Upstreams []struct {
			Source, Outcome, Detail string
			Results, Dropped        int
		} `json:"upstreams"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, r := range resp.Results {
		for _, name := range []string{"score", "source", "visibility"} {
			if n := strings.Count(string(r), `"`+name+`"`); n != 1 {
				t.Errorf("%q appears %d times in %s", name, n, r)
			}
		}
		if strings.Contains(string(r), `\u`) {
			t.Errorf("escaped member name passed on: %s", r)
		}
		var m map[string]any
		_ = json.Unmarshal(r, &m)
		got[m["identifier"].(string)] = m
		if m["type"] != mcpType {
			t.Errorf("filter not applied to %s", r)
		}
		if m["visibility"] != "public" {
			t.Errorf("visibility forged: %s", r)
		}
	}
	for _, id := range []string{"urn:air:forge.test:a", "urn:air:forge.test:b"} {
		r := got[id]
		if r == nil || r["source"] != forger.URL || r["score"] != float64(40) && id == "urn:air:forge.test:a" {
			t.Errorf("%s: %v", id, r)
		}
	}
	if r := got["urn:air:forge.test:i"]; r == nil || r["tags"] != nil || r["metadata"] != nil || r["extra"] != nil || r["representativeQueries"] != nil {
		t.Errorf("wrong-typed or unknown members passed on: %v", r)
	}
	for _, id := range []string{"urn:air:forge.test:d", "urn:air:forge.test:e", "urn:air:forge.test:f", "urn:air:forge.test:g", "urn:air:forge.test:j", "urn:air:stall.test:x", "urn:air:huge.test:x", "urn:air:big.test:x"} {
		if got[id] != nil {
			t.Errorf("%s reached the answer: %v", id, got[id])
		}
	}
	want := map[string]string{forger.URL: "ok", stall.URL: "timeout", huge.URL: "error", bigItem.URL: "ok"}
	if len(resp.Upstreams) != len(want) {
		t.Fatalf("upstream report %+v", resp.Upstreams)
	}
	for _, u := range resp.Upstreams {
		if want[u.Source] != u.Outcome {
			t.Errorf("upstream %s: outcome %s, want %s (%s)", u.Source, u.Outcome, want[u.Source], u.Detail)
		}
		if u.Source == forger.URL && (u.Results != 3 || u.Dropped != 7) {
			t.Errorf("forger: %d results, %d dropped, want 3 and 7", u.Results, u.Dropped)
		}
	}
}

// TestUpstreamBreakersAndReport: an upstream that fails is skipped by the
// next search (its circuit is open) and reported so; a public registry
// starts skipped and joins once a background check reaches it; a machine
// that reaches nothing answers auto searches from the local index.
func TestUpstreamBreakersAndReport(t *testing.T) {
	good := newFakeUpstream(t, http.StatusOK, upstreamResults(`{"identifier":"urn:air:far.test:weather","displayName":"Far Weather","type":"application/mcp-server-card+json","url":"https://far.test/card.json","score":90}`), 0)
	down := newFakeUpstream(t, http.StatusBadGateway, `{}`, 0)
	public := newFakeUpstream(t, http.StatusOK, upstreamResults(`{"identifier":"urn:air:pub.test:weather","displayName":"Public Weather","type":"application/mcp-server-card+json","url":"https://pub.test/card.json","score":90}`), 0)
	f := newTestServer(t, registry.Config{
		Upstreams:        []string{good.URL, down.URL},
		PublicRegistries: []string{public.URL, "http://127.0.0.1:1"},
	}, nil)
	type report struct{ Source, Kind, Outcome, Detail string }
	search := func() (map[string]report, []string) {
		status, raw := f.do(t, http.MethodPost, "/search", `{"query":{"text":"weather"}}`)
		if status != 200 {
			t.Fatalf("status %d: %s", status, raw)
		}
		var resp struct {
			Results   []map[string]any `json:"results"`
			Upstreams []report         `json:"upstreams"`
		}
		if err := json.Unmarshal(raw, &resp); err != nil {
			t.Fatal(err)
		}
		out := map[string]report{}
		for _, u := range resp.Upstreams {
			out[u.Source] = u
		}
		return out, ids(resp.Results)
	}
	first, _ := search()
	if first[good.URL].Outcome != "ok" || first[down.URL].Outcome != "error" || first[down.URL].Detail != "answered HTTP 502" {
		t.Fatalf("first search report %+v", first)
	}
	if first[public.URL].Outcome != "skipped" || first[public.URL].Kind != "public" || first["http://127.0.0.1:1"].Outcome != "skipped" {
		t.Fatalf("public registries must start skipped: %+v", first)
	}
	calls := down.calls.Load()
	// The background check reaches the public registry; the down one
	// stays skipped and is not asked by searches.
	var rep map[string]report
	var got []string
	for range 200 {
		rep, got = search()
		if rep[public.URL].Outcome == "ok" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rep[public.URL].Outcome != "ok" || !slicesContains(got, "urn:air:pub.test:weather") {
		t.Fatalf("public registry never joined: %+v %v", rep, got)
	}
	if rep[down.URL].Outcome != "skipped" || down.calls.Load() != calls {
		t.Fatalf("a down upstream is asked again: %+v (calls %d → %d)", rep[down.URL], calls, down.calls.Load())
	}
	if rep["http://127.0.0.1:1"].Outcome != "skipped" {
		t.Fatalf("unreachable registry: %+v", rep["http://127.0.0.1:1"])
	}
}

// TestAutoOffline: with only unreachable public registries, auto answers
// what none answers, plus the report.
func TestAutoOffline(t *testing.T) {
	f := newTestServer(t, registry.Config{PublicRegistries: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}}, nil)
	auto := f.search(t, `{"query":{"text":"weather"},"federation":"auto"}`)
	none := f.search(t, `{"query":{"text":"weather"},"federation":"none"}`)
	if !slicesEqual(ids(auto.Results), ids(none.Results)) || len(auto.Results) == 0 {
		t.Fatalf("auto %v, none %v", ids(auto.Results), ids(none.Results))
	}
	_, raw := f.do(t, http.MethodPost, "/search", `{"query":{"text":"weather"}}`)
	if !strings.Contains(string(raw), `"upstreams":[{"source":"http://127.0.0.1:1","kind":"public","outcome":"skipped"`) {
		t.Fatalf("no report of skipped registries: %s", raw)
	}
	// Switched off (no public registries, no upstreams): still says so.
	g := newTestServer(t, registry.Config{}, nil)
	_, raw = g.do(t, http.MethodPost, "/search", `{"query":{"text":"weather"}}`)
	if !strings.HasSuffix(string(raw), `,"upstreams":[]}`+"\n") {
		t.Fatalf("auto with no upstream says nothing: %s", raw)
	}
}

// TestReferralIdentifiers: registries on one host with different ports,
// paths or schemes get different identifiers.
func TestReferralIdentifiers(t *testing.T) {
	bases := []string{"http://127.0.0.1:9001", "http://127.0.0.1:9002", "https://127.0.0.1:9001", "https://reg.test", "https://reg.test/api/ard", "http://reg.test"}
	f := newTestServer(t, registry.Config{Upstreams: bases}, nil)
	resp := f.search(t, `{"query":{"text":"weather"},"federation":"referrals"}`)
	seen := map[string]string{}
	for _, r := range resp.Referrals {
		id, _ := r["identifier"].(string)
		u, _ := r["url"].(string)
		if prev, dup := seen[id]; dup {
			t.Errorf("%s and %s share %s", prev, u, id)
		}
		seen[id] = u
	}
	for _, want := range []string{"urn:air:reg.test:registry", "urn:air:reg.test:registry:api-ard", "urn:air:127.0.0.1:registry:http-9001"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("no referral %s in %v", want, seen)
		}
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
