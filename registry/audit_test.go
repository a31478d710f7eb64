package registry_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/web"
)

type auditResp struct {
	Manifest struct {
		Found      bool   `json:"found"`
		URL        string `json:"url"`
		LegacyPath bool   `json:"legacyPath"`
		Code       string `json:"code"`
	} `json:"manifest"`
	Summary struct {
		Entries, Valid, Invalid, Indexed int
	} `json:"summary"`
	Entries []struct {
		Identifier string   `json:"identifier"`
		Valid      bool     `json:"valid"`
		Indexed    bool     `json:"indexed"`
		Problems   []string `json:"problems"`
		Ranks      []struct {
			Query       string `json:"query"`
			Rank        *int   `json:"rank"`
			NotInTop100 bool   `json:"notInTop100"`
		} `json:"ranks"`
	} `json:"entries"`
	Coverage []struct {
		Registry   string `json:"registry"`
		This       bool   `json:"this"`
		Discovered bool   `json:"discovered"`
		Reached    bool   `json:"reached"`
		Holds      int    `json:"holds"`
		Of         int    `json:"of"`
		Error      string `json:"error"`
	} `json:"coverage"`
}

func TestAudit(t *testing.T) {
	// One upstream holds the notes server; one is down.
	holding := newFakeUpstream(t, http.StatusOK, upstreamResults(
		`{"identifier":"urn:air:fixture.test:mcp:notes","displayName":"Fixture Notes MCP","type":"application/mcp-server-card+json","url":"https://x.test/card.json","score":90}`,
		`{"identifier":"urn:air:elsewhere.test:x","displayName":"Other","type":"application/mcp-server-card+json","url":"https://x.test/card.json","score":10}`,
	), 0)
	down := newFakeUpstream(t, http.StatusServiceUnavailable, `{}`, 0)
	f := newPublisherServer(t, registry.Config{Upstreams: []string{holding.URL, down.URL}, FederationTimeout: time.Second}, append([]string{
		`{"identifier":"urn:air:fixture.test:mcp:notes","displayName":"Fixture Notes MCP","type":"application/mcp-server-card+json","url":"https://fixture.test/.well-known/mcp/server-card.json","description":"Take notes and search them over MCP.","representativeQueries":["take a note","search my notes"]}`,
	}, fixtureEntries...))

	status, body := f.do(t, http.MethodPost, "/audit", `{"domain":"fixture.test"}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var a auditResp
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	if !a.Manifest.Found || a.Manifest.URL != "https://fixture.test/.well-known/ard.json" || a.Manifest.LegacyPath {
		t.Fatalf("manifest %+v", a.Manifest)
	}
	byID := map[string]int{}
	for i, e := range a.Entries {
		if _, dup := byID[e.Identifier]; !dup { // the rejected duplicate comes later
			byID[e.Identifier] = i
		}
	}
	notes := a.Entries[byID["urn:air:fixture.test:mcp:notes"]]
	if !notes.Valid || !notes.Indexed || len(notes.Ranks) != 2 || notes.Ranks[0].Rank == nil || *notes.Ranks[0].Rank != 1 {
		t.Fatalf("notes entry %+v", notes)
	}
	if squat := a.Entries[byID["urn:air:other.test:squat"]]; squat.Valid || len(squat.Problems) == 0 {
		t.Fatalf("squatted entry %+v", squat)
	}
	if page := a.Entries[byID["urn:air:fixture.test:mcp:page"]]; page.Indexed || page.Ranks[0].Rank != nil || !page.Ranks[0].NotInTop100 {
		t.Fatalf("unindexed entry %+v", page)
	}
	if a.Summary.Invalid == 0 || a.Summary.Indexed != 1 {
		t.Fatalf("summary %+v", a.Summary)
	}
	if len(a.Coverage) != 3 || !a.Coverage[0].This || a.Coverage[0].Holds != 1 {
		t.Fatalf("coverage %+v", a.Coverage)
	}
	if c := a.Coverage[1]; c.Registry != holding.URL || !c.Reached || c.Holds != 1 || c.Of != a.Coverage[0].Of {
		t.Fatalf("holding upstream %+v", c)
	}
	if c := a.Coverage[2]; c.Reached || c.Error == "" || c.Holds != 0 {
		t.Fatalf("down upstream %+v", c)
	}
	// The upstream was asked for this publisher only, without federating.
	req, _ := holding.lastReq.Load().(map[string]any)
	if req["federation"] != "none" || !strings.Contains(mustJSON(t, req["query"]), `"publisher":["fixture.test"]`) {
		t.Fatalf("upstream request %v", req)
	}

	for _, tc := range []struct{ domain, code string }{
		{"empty.test", "manifest.not-found"},
		{"private.test", "fetch.address-forbidden"},
	} {
		_, body := f.do(t, http.MethodPost, "/audit", `{"domain":"`+tc.domain+`"}`)
		a = auditResp{}
		_ = json.Unmarshal(body, &a)
		if a.Manifest.Found || a.Manifest.Code != tc.code {
			t.Errorf("%s: %s", tc.domain, body)
		}
	}
	for _, bad := range []string{`{}`, `{"domain":"x"}`, `{"domain":"fixture.test","deep":true}`} {
		if status, body := f.do(t, http.MethodPost, "/audit", bad); status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d: %s", bad, status, body)
		}
	}
	if n, _ := f.db.CountEntries(); n != len(fixtureEntries)+1 {
		t.Fatalf("audit changed the store: %d entries", n)
	}
}

func TestFederationDiscovered(t *testing.T) {
	peer := newFakeUpstream(t, http.StatusOK, upstreamResults(
		`{"identifier":"urn:air:peer.test:weather","displayName":"Peer Weather","type":"application/mcp-server-card+json","url":"https://peer.test/card.json","score":80}`,
	), 0)
	stranger := newFakeUpstream(t, http.StatusOK, upstreamResults(`{"identifier":"urn:air:stranger.test:x","displayName":"X","type":"application/mcp-server-card+json","url":"https://x.test/card.json","score":99}`), 0)
	configured := newFakeUpstream(t, http.StatusOK, upstreamResults(), 0)
	pu, _ := url.Parse(peer.URL)
	su, _ := url.Parse(stranger.URL)
	hosts := fixturePublishers()
	// peer.test and stranger.test are registries the index learnt about;
	// only peer.test is on the operator's allowlist.
	fetcher := newPublisherFetcherTo(t, hosts, map[string]string{"peer.test": pu.Host, "stranger.test": su.Host})
	bodies := append([]string{
		`{"identifier":"urn:air:peer.test:registry","displayName":"Peer","type":"application/ai-registry+json","url":"https://peer.test/search","representativeQueries":["peer registry","weather registry"]}`,
		`{"identifier":"urn:air:stranger.test:registry","displayName":"Stranger","type":"application/ai-registry+json","url":"https://stranger.test","representativeQueries":["stranger registry","another registry"]}`,
	}, fixtureEntries...)
	f := newPublisherServer(t, registry.Config{
		Upstreams:          []string{configured.URL},
		FederateDiscovered: []string{"Peer.test"},
		FederationTimeout:  2 * time.Second,
		Fetcher:            fetcher,
	}, bodies)

	resp := f.search(t, `{"query":{"text":"weather forecast"},"limit":20}`)
	var fromPeer map[string]any
	for _, r := range resp.Results {
		if r["identifier"] == "urn:air:peer.test:weather" {
			fromPeer = r
		}
		if r["identifier"] == "urn:air:stranger.test:x" {
			t.Fatalf("a registry off the allowlist was asked")
		}
	}
	if fromPeer == nil || fromPeer["source"] != "https://peer.test" {
		t.Fatalf("discovered registry not fused: %v", resp.Results)
	}
	if stranger.calls.Load() != 0 || peer.calls.Load() != 1 {
		t.Fatalf("calls: peer %d stranger %d", peer.calls.Load(), stranger.calls.Load())
	}
	// Outcomes of the discovered upstream show in /stats.
	f.records(t)
	status, body := f.do(t, http.MethodGet, "/stats", "")
	if status != http.StatusOK || !strings.Contains(string(body), `"upstream":"https://peer.test","ok":1`) {
		t.Fatalf("stats %d: %s", status, body)
	}
}

// newPublisherFetcherTo is newPublisherFetcher with extra domains pinned to
// other loopback servers.
func newPublisherFetcherTo(tb testing.TB, hosts hostMux, extra map[string]string) *web.Fetcher {
	tb.Helper()
	srv := httptest.NewServer(hosts)
	tb.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	resolve := map[string]string{}
	for h := range hosts {
		resolve[h] = u.Host
	}
	for h, addr := range extra {
		resolve[h] = addr
	}
	return newFetcher(resolve)
}
