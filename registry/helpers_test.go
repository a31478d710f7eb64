package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/ingest"
)

const publicURL = "http://registry.test"

const mcpType = "application/mcp-server-card+json"

// fixtureEntries is a small corpus: enough weather entries to page through,
// a few other topics, types, tags and one registry entry.
var fixtureEntries = []string{
	`{"identifier":"urn:air:weather.test:forecast","displayName":"Weather Forecast","type":"application/mcp-server-card+json","url":"https://weather.test/mcp/card.json","description":"Weather forecast tools: hourly and daily forecasts for any city.","tags":["weather","forecast"],"capabilities":["get_forecast"],"representativeQueries":["weather forecast tools","will it rain tomorrow"],"metadata":{"region":"eu"}}`,
	`{"identifier":"urn:air:meteo.test:now","displayName":"Meteo Now","type":"application/mcp-server-card+json","url":"https://meteo.test/card.json","description":"Current weather conditions and weather forecast for airports.","tags":["weather"],"capabilities":["get_conditions"],"representativeQueries":["current weather","airport weather forecast"],"metadata":{"region":"us"}}`,
	`{"identifier":"urn:air:storm.test:alerts","displayName":"Storm Alerts","type":"application/mcp-server-card+json","url":"https://storm.test/card.json","description":"Severe weather alerts and storm warnings.","tags":["weather","alerts"],"representativeQueries":["storm warning","severe weather alerts"]}`,
	`{"identifier":"urn:air:sky.test:agent","displayName":"Sky Weather Agent","type":"application/a2a-agent-card+json","url":"https://sky.test/.well-known/agent-card.json","description":"An agent that answers weather forecast questions in plain language.","tags":["weather"],"representativeQueries":["ask about the weather","weather forecast agent"]}`,
	`{"identifier":"urn:air:rain.test:radar","displayName":"Rain Radar","type":"application/mcp-server-card+json","url":"https://rain.test/card.json","description":"Rain radar images and precipitation weather forecast.","tags":["weather","radar"],"representativeQueries":["rain radar","precipitation forecast"]}`,
	`{"identifier":"urn:air:clima.test:history","displayName":"Climate History","type":"application/mcp-server-card+json","url":"https://clima.test/card.json","description":"Historical weather data and climate records.","tags":["weather","climate"],"representativeQueries":["historical weather","climate data"]}`,
	`{"identifier":"urn:air:maps.test:route","displayName":"Route Maps","type":"application/mcp-server-card+json","url":"https://maps.test/card.json","description":"Driving directions, routes and travel time between places.","tags":["maps","travel"],"representativeQueries":["driving directions","route planner"]}`,
	`{"identifier":"urn:air:mail.test:send","displayName":"Mail Sender","type":"application/mcp-server-card+json","url":"https://mail.test/card.json","description":"Send transactional email through an API.","tags":["email"],"capabilities":["send_email"],"representativeQueries":["send an email","transactional email"]}`,
	`{"identifier":"urn:air:skills.test:pdf","displayName":"PDF Skill","type":"application/agent-skills+zip","url":"https://skills.test/pdf.zip","description":"Skill for reading and filling PDF forms.","tags":["documents"],"representativeQueries":["fill a pdf form","read pdf"]}`,
	`{"identifier":"urn:air:hub.test:registry","displayName":"Hub Registry","type":"application/ai-registry+json","url":"https://hub.test","description":"Another ARD registry of weather and maps tools.","representativeQueries":["registry of tools","find a registry"]}`,
}

// fixture is a registry service over a temp kv and an in-memory index.
type fixture struct {
	db  *kv.DB
	ix  *index.Index
	svc *registry.Service
	srv *httptest.Server
}

// newTestServer serves a registry over bodies (the fixture corpus when nil).
func newTestServer(tb testing.TB, cfg registry.Config, bodies []string) *fixture {
	tb.Helper()
	db, err := kv.Open(tb.TempDir(), kv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	ix, err := index.OpenMemory()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ix.Close() })
	if bodies == nil {
		bodies = fixtureEntries
	}
	loadEntries(tb, db, ix, "fixtures", bodies)
	if cfg.PublicURL == "" {
		cfg.PublicURL = publicURL
	}
	svc, err := registry.New(cfg, db, ix)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	tb.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			tb.Error(err)
		}
	})
	return &fixture{db: db, ix: ix, svc: svc, srv: srv}
}

// loadEntries stores bodies in kv as one source and indexes them the way
// ingestion does.
func loadEntries(tb testing.TB, db *kv.DB, ix *index.Index, source string, bodies []string) {
	tb.Helper()
	entries := make([]kv.Entry, 0, len(bodies))
	ids := make([]string, 0, len(bodies))
	for _, b := range bodies {
		var head struct {
			Identifier string `json:"identifier"`
		}
		if err := json.Unmarshal([]byte(b), &head); err != nil {
			tb.Fatalf("fixture %s: %v", b, err)
		}
		entries = append(entries, kv.Entry{ID: head.Identifier, Body: json.RawMessage(b)})
		ids = append(ids, head.Identifier)
	}
	if _, err := db.ReplaceSource(source, entries, time.Now()); err != nil {
		tb.Fatal(err)
	}
	stored, err := db.GetEntries(ids)
	if err != nil {
		tb.Fatal(err)
	}
	docs := make([]index.Doc, 0, len(stored))
	for _, id := range ids {
		d, err := ingest.ToDoc(stored[id])
		if err != nil {
			tb.Fatal(err)
		}
		docs = append(docs, d)
	}
	if err := ix.Put(docs); err != nil {
		tb.Fatal(err)
	}
}

// send makes a request with an optional key and extra headers and returns
// the status, headers and body: the one request helper the others wrap.
func (f *fixture) send(tb testing.TB, method, path, key, body string, hdr map[string]string) (int, http.Header, []byte) {
	tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

// do sends a request without a key and returns the status and the body.
func (f *fixture) do(tb testing.TB, method, path, body string) (int, []byte) {
	tb.Helper()
	status, _, out := f.send(tb, method, path, "", body, nil)
	return status, out
}

// searchResponse decodes a POST /search body.
type searchResponse struct {
	Results   []map[string]any `json:"results"`
	PageToken string           `json:"pageToken"`
	Referrals []map[string]any `json:"referrals"`
}

func (f *fixture) search(tb testing.TB, body string) searchResponse {
	tb.Helper()
	status, out := f.do(tb, http.MethodPost, "/search", body)
	if status != http.StatusOK {
		tb.Fatalf("search %s: status %d: %s", body, status, out)
	}
	var resp searchResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		tb.Fatalf("search response %s: %v", out, err)
	}
	return resp
}

func ids(results []map[string]any) []string {
	out := make([]string, len(results))
	for i, r := range results {
		out[i], _ = r["identifier"].(string)
	}
	return out
}

// records flushes the demand log and returns every record in it.
func (f *fixture) records(tb testing.TB) []kv.SearchRecord {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.svc.Flush(ctx); err != nil {
		tb.Fatal(err)
	}
	var out []kv.SearchRecord
	if err := f.db.SearchesSince(time.Time{}, func(r kv.SearchRecord) (bool, error) {
		out = append(out, r)
		return true, nil
	}); err != nil {
		tb.Fatal(err)
	}
	return out
}

// problem decodes a problem document.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

func decodeProblem(tb testing.TB, body []byte) problem {
	tb.Helper()
	var p problem
	if err := json.Unmarshal(body, &p); err != nil {
		tb.Fatalf("problem %s: %v", body, err)
	}
	return p
}

func (p problem) hasField(field string) bool {
	for _, e := range p.Errors {
		if e.Field == field {
			return true
		}
	}
	return false
}

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		tb.Fatal(err)
	}
	return buf.String()
}
