package registry_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/ingest"
)

const (
	usdcBaseSepolia = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
	usdcBase        = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
	merchantPayTo   = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
)

// v1Terms is a v1 402 body: 0.01 USDC on Base Sepolia.
const v1Terms = `{"x402Version":1,"error":"X-PAYMENT header is required","accepts":[{"scheme":"exact","network":"base-sepolia","maxAmountRequired":"10000","resource":"https://merchant.test/v1/quote","description":"A quote","mimeType":"application/json","payTo":"` + merchantPayTo + `","maxTimeoutSeconds":60,"asset":"` + usdcBaseSepolia + `","extra":{"name":"USDC","version":"2"}}]}`

// v2Terms is a v2 PaymentRequired for amount base units of USDC on Base.
func v2Terms(amount string) string {
	return `{"x402Version":2,"error":"PAYMENT-SIGNATURE header is required","resource":{"url":"https://merchant.test/v2/quote"},"accepts":[{"scheme":"exact","network":"eip155:8453","amount":"` + amount + `","asset":"` + usdcBase + `","payTo":"` + merchantPayTo + `","maxTimeoutSeconds":60,"extra":{"name":"USD Coin","version":"2"}}]}`
}

// payMerchant is a loopback merchant: a v1 402 body, a v2 402 header whose
// amount the test can change, a liar whose 402 asks ten times what its
// catalogue item says, and a free route.
type payMerchant struct {
	v2Amount atomic.Value // string
	hits     atomic.Int64
	paths    sync.Map // path -> true once asked
}

func (m *payMerchant) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.hits.Add(1)
	m.paths.Store(r.URL.Path, true)
	if r.Header.Get("X-PAYMENT") != "" || r.Header.Get("PAYMENT-SIGNATURE") != "" {
		http.Error(w, "the probe must never pay", http.StatusBadRequest)
		return
	}
	switch r.URL.Path {
	case "/v1/quote":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte(v1Terms))
	case "/v2/quote", "/liar":
		amount := m.v2Amount.Load().(string)
		if r.URL.Path == "/liar" {
			amount = "10000"
		}
		w.Header().Set("PAYMENT-REQUIRED", base64.StdEncoding.EncodeToString([]byte(v2Terms(amount))))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte(`{}`))
	case "/free":
		_, _ = w.Write([]byte(`{"ok":true}`))
	default:
		http.NotFound(w, r)
	}
}

// payEntries state terms the ways publishers do: an x402 PaymentRequired
// in metadata (v1), a bazaar catalogue item (v2), a catalogue item that
// lies, MPP and card terms in metadata, and a free entry.
var payEntries = []string{
	`{"identifier":"urn:air:merchant.test:quote-v1","displayName":"Quote v1","type":"application/json","url":"https://merchant.test/v1/quote","description":"Stock quote, paid per call.","metadata":{"pay.protocol":"x402","pay.scheme":"exact","pay.network":"base-sepolia","pay.asset":"` + usdcBaseSepolia + `","pay.amount":"10000","pay.payTo":"` + merchantPayTo + `"}}`,
	`{"identifier":"urn:air:merchant.test:quote-v2","displayName":"Quote v2","type":"application/x402-resource+json","description":"Stock quote, paid per call.","data":{"resource":"https://merchant.test/v2/quote","type":"http","x402Version":2,"method":"GET","accepts":[{"scheme":"exact","network":"eip155:8453","amount":"1000","asset":"` + usdcBase + `","payTo":"` + merchantPayTo + `","maxTimeoutSeconds":60,"extra":{"name":"USD Coin","version":"2"}}]}}`,
	`{"identifier":"urn:air:merchant.test:liar","displayName":"Cheap quote","type":"application/x402-resource+json","description":"Stock quote, paid per call.","data":{"resource":"https://merchant.test/liar","type":"http","x402Version":2,"accepts":[{"scheme":"exact","network":"eip155:8453","amount":"1000","asset":"` + usdcBase + `","payTo":"` + merchantPayTo + `","maxTimeoutSeconds":60}]}}`,
	`{"identifier":"urn:air:merchant.test:quote-mpp","displayName":"Quote over MPP","type":"application/json","url":"https://mpp.merchant.test/quote","description":"Stock quote, paid per call.","metadata":{"pay.protocol":"mpp","pay.network":"tempo","pay.price":"0.002","pay.2.protocol":"card","pay.2.network":"stripe","pay.2.price":0.05}}`,
	// States nothing, but its URL answers 402: it learns the terms.
	`{"identifier":"urn:air:merchant.test:quote-plain","displayName":"Plain quote","type":"application/json","url":"https://merchant.test/v1/quote","description":"Stock quote, paid per call."}`,
	`{"identifier":"urn:air:merchant.test:quote-free","displayName":"Free quote","type":"application/json","url":"https://merchant.test/free","description":"Stock quote, delayed, free."}`,
}

func newPayFixture(t *testing.T) (*fixture, *payMerchant, *testClock) {
	t.Helper()
	m := &payMerchant{}
	m.v2Amount.Store("1000")
	srv := httptest.NewServer(hostMux{"merchant.test": m})
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	clock := &testClock{now: time.Now().UTC().Truncate(time.Second)}
	f := newTestServer(t, registry.Config{Fetcher: newLoopbackFetcher(map[string]string{"merchant.test": u.Host}), Now: clock.Now,
		Probe: registry.ProbeConfig{Timeout: 2 * time.Second}}, payEntries)
	return f, m, clock
}

func (f *fixture) payIDs(t *testing.T, filter string) []string {
	t.Helper()
	res := f.search(t, `{"query":{"text":"stock quote","filter":`+filter+`},"federation":"none","limit":50}`)
	var out []string
	for _, id := range ids(res.Results) {
		out = append(out, id[len("urn:air:merchant.test:"):])
	}
	slices.Sort(out)
	return out
}

func TestPaymentFiltersOverHTTP(t *testing.T) {
	f, m, clock := newPayFixture(t)
	round := func() {
		clock.Add(time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.svc.ProbeRound(ctx)
	}
	check := func(step, filter string, want ...string) {
		t.Helper()
		if got := f.payIDs(t, filter); !slices.Equal(got, want) {
			t.Errorf("%s: filter %s: got %v, want %v", step, filter, got, want)
		}
	}
	check("before any probe", `{"pay:verified":"live"}`)
	check("terms", `{"pay:protocol":"x402"}`, "liar", "quote-v1", "quote-v2")
	check("terms", `{"pay:protocol":"payable"}`, "liar", "quote-mpp", "quote-v1", "quote-v2")
	check("terms", `{"pay:protocol":"free"}`, "quote-free", "quote-plain")
	check("terms", `{"pay:protocol":["mpp","card"]}`, "quote-mpp")
	check("terms", `{"pay:network":"base"}`, "liar", "quote-v2")
	check("terms", `{"pay:network":"eip155:8453"}`, "liar", "quote-v2")
	check("terms", `{"pay:network":["tempo","stripe"]}`, "quote-mpp")
	check("terms", `{"pay:network":"base-sepolia"}`, "quote-v1")
	// 0.001 (v2 and the liar's claim) and 0.002 (MPP) and 0.01 (v1).
	check("terms", `{"maxPricePerCall":0.001}`, "liar", "quote-free", "quote-plain", "quote-v2")
	check("terms", `{"maxPricePerCall":"0.0009999"}`, "quote-free", "quote-plain")
	check("terms", `{"maxPricePerCall":0.01}`, "liar", "quote-free", "quote-mpp", "quote-plain", "quote-v1", "quote-v2")
	check("terms", `{"pay:price":{"lt":0.01}}`, "liar", "quote-free", "quote-mpp", "quote-plain", "quote-v2")
	check("terms", `{"pay:price":{"gt":0.001,"lte":0.002}}`, "quote-mpp")
	check("terms", `{"pay:price":{"eq":"0.0500"}}`, "quote-mpp")
	check("terms", `{"pay:protocol":"x402","pay:network":"base","maxPricePerCall":0.001}`, "liar", "quote-v2")

	round()
	if m.hits.Load() == 0 {
		t.Fatal("the probe never reached the merchant")
	}
	// The liar's 402 asks 0.01, its catalogue item says 0.001: not live.
	check("after a probe", `{"pay:verified":"live"}`, "quote-plain", "quote-v1", "quote-v2")
	// The plain entry learned the terms of its 402 (v1: 0.01 on Base Sepolia).
	check("after a probe", `{"pay:protocol":"free"}`, "quote-free")
	check("after a probe", `{"pay:network":"base-sepolia","pay:price":{"eq":0.01}}`, "quote-plain", "quote-v1")
	check("after a probe", `{"pay:verified":"live","pay:network":"base"}`, "quote-v2")
	check("after a probe", `{"pay:verified":"live","maxPricePerCall":"0.005"}`, "quote-v2")

	// The explore facets count the same.
	status, body := f.do(t, http.MethodPost, "/explore", `{"query":{"text":"stock quote"},"resultType":{"facets":["pay:verified","pay:protocol","pay:network"]}}`)
	if status != http.StatusOK {
		t.Fatalf("explore: %d %s", status, body)
	}
	for _, want := range []string{`"live"`, `"payable"`, `"tempo"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("explore facets lack %s: %s", want, body)
		}
	}

	// The v2 merchant raises its price: its 402 no longer states what its
	// entry claims, so it stops being live at the next probe.
	m.v2Amount.Store("2000")
	round()
	check("after the price change", `{"pay:verified":"live"}`, "quote-plain", "quote-v1")
	m.v2Amount.Store("1000")
	round()
	check("back to the claimed price", `{"pay:verified":"live"}`, "quote-plain", "quote-v1", "quote-v2")

	// Verified means recently: past the window without a new probe, no
	// entry is live.
	clock.Add(2 * time.Hour)
	if err := f.svc.ReconcilePay(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("past the window", `{"pay:verified":"live"}`)
	// What it learned stays (the last terms seen), no longer verified.
	check("past the window", `{"pay:protocol":"x402"}`, "liar", "quote-plain", "quote-v1", "quote-v2")
}

// TestIngestKeepsProbedTerms: an ingest through the server's Ingester
// (Decorate = DecorateDoc) re-puts an entry without losing what the probes
// saw of it.
func TestIngestKeepsProbedTerms(t *testing.T) {
	f, _, clock := newPayFixture(t)
	clock.Add(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.svc.ProbeRound(ctx)
	if got := f.payIDs(t, `{"pay:verified":"live"}`); !slices.Equal(got, []string{"quote-plain", "quote-v1", "quote-v2"}) {
		t.Fatalf("live after a probe: %v", got)
	}
	// The publisher rewrites its manifest: same entries, new descriptions.
	dir := t.TempDir()
	var manifest []string
	for _, b := range payEntries {
		manifest = append(manifest, strings.Replace(b, "Stock quote, paid per call.", "Stock quote, paid per call, now with dividends.", 1))
	}
	path := filepath.Join(dir, "merchant.json")
	if err := os.WriteFile(path, []byte(`{"specVersion":"1.0","host":{"displayName":"Merchant"},"entries":[`+strings.Join(manifest, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	live := []string{"quote-plain", "quote-v1", "quote-v2"}
	// Without the hook, a re-put drops the marks (so this test can fail);
	// the next reconciliation mends them.
	if rep, err := (&ingest.Ingester{DB: f.db, Index: f.ix}).Ingest(ctx, path); err != nil || len(rep.Sources[0].Rejected) > 0 {
		t.Fatalf("ingest: %v %+v", err, rep)
	}
	if got := f.payIDs(t, `{"pay:verified":"live"}`); len(got) != 0 {
		t.Fatalf("an undecorated ingest kept the marks of %v; the check below proves nothing", got)
	}
	if err := f.svc.ReconcilePay(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.payIDs(t, `{"pay:verified":"live"}`); !slices.Equal(got, live) {
		t.Errorf("live after reconciliation: %v", got)
	}
	// With the hook the marks survive the re-put itself.
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(mustRead(t, path)), "dividends", "splits")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&ingest.Ingester{DB: f.db, Index: f.ix, Decorate: f.svc.DecorateDoc}).Ingest(ctx, path); err != nil {
		t.Fatal(err)
	}
	if got := f.payIDs(t, `{"pay:verified":"live"}`); !slices.Equal(got, live) {
		t.Errorf("live after a decorated ingest: %v", got)
	}
}

// TestProbeTargetsReadAfterEntriesChange: the probe targets are read from
// every entry (seconds of CPU at 100k entries) only after entries changed:
// not after the reconciliation's own writes to the index, nor after a
// re-ingest that changes nothing; and an entry published since is probed.
func TestProbeTargetsReadAfterEntriesChange(t *testing.T) {
	f, m, clock := newPayFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	round := func() {
		clock.Add(time.Minute)
		f.svc.ProbeRound(ctx)
	}
	reads := func(step string, want int) {
		t.Helper()
		if got := registry.ProbeTargetReads(f.svc); got != want {
			t.Errorf("%s: targets read %d times, want %d", step, got, want)
		}
	}
	round()
	reads("first round", 1)
	if got := f.payIDs(t, `{"pay:verified":"live"}`); len(got) == 0 {
		t.Fatal("no entry marked live: the reconciliation wrote nothing to the index, so this test proves nothing")
	}
	round()
	if err := f.svc.ReconcilePay(ctx); err != nil {
		t.Fatal(err)
	}
	reads("after the reconciliation's own index writes", 1)

	path := filepath.Join(t.TempDir(), "more.json")
	manifest := `{"specVersion":"1.0","host":{"displayName":"Merchant"},"entries":[` +
		`{"identifier":"urn:air:merchant.test:quote-new","displayName":"New quote","type":"application/json","url":"https://merchant.test/new","description":"Stock quote, new."}]}`
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	in := &ingest.Ingester{DB: f.db, Index: f.ix, Decorate: f.svc.DecorateDoc}
	if rep, err := in.Ingest(ctx, path); err != nil || len(rep.Sources[0].Rejected) > 0 {
		t.Fatalf("ingest: %v %+v", err, rep)
	}
	round()
	reads("after a new entry", 2)
	if _, ok := m.paths.Load("/new"); !ok {
		t.Error("the new entry's endpoint was not probed")
	}
	if _, err := in.Ingest(ctx, path); err != nil {
		t.Fatal(err)
	}
	round()
	reads("after a re-ingest that changes nothing", 2)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPaymentFiltersFederate: an upstream gets the payment keys in the
// contract's request shapes (pay:price an object, maxPricePerCall a
// number), and its results are held to them by the terms they state.
func TestPaymentFiltersFederate(t *testing.T) {
	up := newFakeUpstream(t, http.StatusOK, upstreamResults(
		`{"identifier":"urn:air:far.test:cheap","displayName":"Cheap quote","type":"application/json","url":"https://far.test/cheap","description":"Stock quote","metadata":{"pay.protocol":"x402","pay.network":"base","pay.price":"0.001"}}`,
		`{"identifier":"urn:air:far.test:dear","displayName":"Dear quote","type":"application/json","url":"https://far.test/dear","description":"Stock quote","metadata":{"pay.protocol":"x402","pay.network":"base","pay.price":"0.5"}}`,
	), 0)
	f := newTestServer(t, registry.Config{Upstreams: []string{up.URL}, FederationTimeout: 2 * time.Second}, payEntries)
	res := f.search(t, `{"query":{"text":"stock quote","filter":{"pay:price":{"lte":0.01,"gt":"0"},"maxPricePerCall":1e-2,"pay:network":"base"}}}`)
	got := ids(res.Results)
	if !slices.Contains(got, "urn:air:far.test:cheap") || slices.Contains(got, "urn:air:far.test:dear") {
		t.Errorf("results %v: want the cheap upstream entry and not the dear one", got)
	}
	req, _ := up.lastReq.Load().(map[string]any)
	q, _ := req["query"].(map[string]any)
	filter, _ := q["filter"].(map[string]any)
	price, _ := filter["pay:price"].(map[string]any)
	if price["lte"] != 0.01 || price["gt"] != float64(0) || filter["maxPricePerCall"] != 0.01 {
		t.Errorf("the upstream got filter %v", filter)
	}
	if nets, _ := filter["pay:network"].([]any); len(nets) != 1 || nets[0] != "base" {
		t.Errorf("the upstream got pay:network %v", filter["pay:network"])
	}
}

// TestProbeTargetsFollowTheChangeFeed: after a publish the probe targets
// are brought up to date from the entries the change feed names, and
// agree with a read of every entry (as after a restart): endpoints shared
// across sources, MCP tools through their server (two of one name), an
// API's operations, agents, paid and learning entries, changed, removed
// and added.
func TestProbeTargetsFollowTheChangeFeed(t *testing.T) {
	f, _, _ := newPayFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const (
		srv     = `{"identifier":"urn:air:merchant.test:srv","displayName":"Srv","description":"Quotes over MCP.","type":"application/mcp-server-card+json","url":"https://merchant.test/card.json","metadata":{"mcp.endpoint":"https://merchant.test/mcp"}}`
		agent   = `{"identifier":"urn:air:merchant.test:agent","displayName":"Agent","description":"An agent.","type":"application/a2a-agent-card+json","url":"https://merchant.test/agent.json"}`
		agent2  = `{"identifier":"urn:air:merchant.test:agent","displayName":"Agent","description":"An agent.","type":"application/a2a-agent-card+json","url":"https://agents.merchant.test/agent.json"}`
		shared  = `{"identifier":"urn:air:merchant.test:quote-again","displayName":"Quote again","description":"The v1 quote, listed twice.","type":"application/json","url":"https://merchant.test/v1/quote"}`
		paidNew = `{"identifier":"urn:air:merchant.test:paid-new","displayName":"Paid","description":"Paid per call.","type":"application/json","url":"https://merchant.test/paid","metadata":{"pay.protocol":"x402","pay.scheme":"exact","pay.network":"base-sepolia","pay.asset":"` + usdcBaseSepolia + `","pay.amount":"5000","pay.payTo":"` + merchantPayTo + `"}}`
	)
	tool := func(id, name string) string {
		return `{"identifier":"urn:air:merchant.test:` + id + `","displayName":"` + id + `","description":"A tool.","type":"application/mcp-tool+json","data":{"server":{"identifier":"urn:air:merchant.test:srv","tool":"` + name + `"}}}`
	}
	op := func(id, server string) string {
		return `{"identifier":"urn:air:merchant.test:` + id + `","displayName":"` + id + `","description":"An operation.","type":"application/openapi-operation+json","data":{"method":"GET","path":"/` + id + `","servers":["` + server + `"]}}`
	}
	path := filepath.Join(t.TempDir(), "more.json")
	in := &ingest.Ingester{DB: f.db, Index: f.ix, Decorate: f.svc.DecorateDoc}
	publish := func(entries ...string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(`{"specVersion":"1.0","host":{"displayName":"Merchant"},"entries":[`+strings.Join(entries, ",")+`]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if rep, err := in.Ingest(ctx, path); err != nil || len(rep.Sources[0].Rejected) > 0 {
			t.Fatalf("ingest: %v %+v", err, rep)
		}
	}
	last := ""
	check := func(step string, changes bool) {
		t.Helper()
		reads := registry.ProbeTargetReads(f.svc)
		got, err := registry.ProbeState(f.svc, false)
		if err != nil {
			t.Fatal(err)
		}
		if n := registry.ProbeTargetReads(f.svc) - reads; n != map[bool]int{true: 1, false: 0}[changes] {
			t.Errorf("%s: targets built %d times", step, n)
		}
		want, err := registry.ProbeState(f.svc, true)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: targets from the change feed:\n%s\nfrom every entry:\n%s", step, got, want)
		}
		if (got != last) != changes {
			t.Errorf("%s: targets changed %v, want %v:\n%s", step, got != last, changes, got)
		}
		last = got
	}
	check("the fixture's entries", true)
	publish(srv, tool("tool-a", "quote"), tool("tool-b", "news"), agent, op("op1", "https://api.merchant.test"), op("op2", "https://api.merchant.test"), shared)
	check("a second source", true)
	publish(srv, tool("tool-a", "quote"), tool("tool-c", "quote"), agent2, op("op1", "https://api.merchant.test"), op("op2", "https://api2.merchant.test"), shared, paidNew)
	check("changed, removed and added", true)
	// Two tools of one name on a server: the later identifier, as a read
	// in key order leaves it; the removed tool is gone.
	if !strings.Contains(last, "target mcp https://merchant.test/mcp [urn:air:merchant.test:srv] tools map[quote:urn:air:merchant.test:tool-c]") {
		t.Errorf("the server's tools:\n%s", last)
	}
	publish(srv, tool("tool-a", "quote"), tool("tool-c", "quote"), agent2, op("op1", "https://api.merchant.test"), op("op2", "https://api2.merchant.test"), shared, paidNew)
	check("the same again", false)
	publish(tool("tool-a", "quote"), tool("tool-c", "quote"), agent2, op("op1", "https://api.merchant.test"), op("op2", "https://api2.merchant.test"), paidNew)
	check("the server gone", true)
	for _, want := range []string{"urn:air:merchant.test:paid-new", "a2a https://agents.merchant.test/agent.json", "api https://api2.merchant.test"} {
		if !strings.Contains(last, want) {
			t.Errorf("the targets lack %q:\n%s", want, last)
		}
	}
}
