package ingest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/web"
)

// publishers serves fixture sites by Host header: files (loaded from
// testdata/publishers/<host>/ or set by a test) with an ETag and
// Last-Modified so conditional requests work, "/" as index.html, extra
// response headers per path, and an MCP server per host at /mcp. It counts
// what it sees: requests, 304s and the most requests in flight per host.
type publishers struct {
	tb  testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	files    map[string]map[string][]byte
	headers  map[string]map[string]http.Header
	mcp      map[string]http.Handler
	inflight map[string]int
	peak     map[string]int
	log      []served
	hold     time.Duration // how long each request takes, to give overlaps a chance
}

// served is one request as the server saw it.
type served struct {
	Host, Method, Path string
	Status             int
	Start              time.Time
	Conditional        bool
}

var fixtureModTime = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)

func newPublishers(tb testing.TB) *publishers {
	tb.Helper()
	p := &publishers{tb: tb, files: map[string]map[string][]byte{}, headers: map[string]map[string]http.Header{},
		mcp: map[string]http.Handler{}, inflight: map[string]int{}, peak: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	tb.Cleanup(p.srv.Close)
	return p
}

// load copies testdata/publishers/<dir>/ into host's files.
func (p *publishers) load(host, dir string) {
	p.tb.Helper()
	root := filepath.Join("testdata", "publishers", dir)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		p.set(host, "/"+filepath.ToSlash(rel), string(b))
		return nil
	})
	if err != nil {
		p.tb.Fatal(err)
	}
}

func (p *publishers) set(host, path, body string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.files[host] == nil {
		p.files[host] = map[string][]byte{}
	}
	if path == "/index.html" {
		path = "/"
	}
	p.files[host][path] = []byte(body)
}

func (p *publishers) remove(host, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.files[host], path)
}

func (p *publishers) header(host, path, key, value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.headers[host] == nil {
		p.headers[host] = map[string]http.Header{}
	}
	if p.headers[host][path] == nil {
		p.headers[host][path] = http.Header{}
	}
	p.headers[host][path].Add(key, value)
}

func (p *publishers) serveMCP(host string, h http.Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mcp[host] = h
}

// addr is the loopback address every fixture domain resolves to.
func (p *publishers) addr() string { return p.srv.Listener.Addr().String() }

// requests returns what was served so far.
func (p *publishers) requests() []served {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]served(nil), p.log...)
}

func (p *publishers) peakInflight(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak[host]
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (p *publishers) serve(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	p.mu.Lock()
	p.inflight[host]++
	if p.inflight[host] > p.peak[host] {
		p.peak[host] = p.inflight[host]
	}
	body, ok := p.files[host][r.URL.Path]
	hdr := p.headers[host][r.URL.Path]
	mcpHandler := p.mcp[host]
	hold := p.hold
	p.mu.Unlock()
	rec := &statusRecorder{ResponseWriter: w}
	s := served{Host: host, Method: r.Method, Path: r.URL.Path, Start: time.Now(),
		Conditional: r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != ""}
	defer func() {
		p.mu.Lock()
		p.inflight[host]--
		s.Status = rec.status
		p.log = append(p.log, s)
		p.mu.Unlock()
	}()
	if hold > 0 {
		time.Sleep(hold)
	}
	for k, vs := range hdr {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	switch {
	case r.URL.Path == "/mcp" && mcpHandler != nil:
		mcpHandler.ServeHTTP(rec, r)
	case ok:
		sum := sha256.Sum256(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
		name := r.URL.Path
		if name == "/" {
			name = "/index.html"
		}
		http.ServeContent(rec, r, name, fixtureModTime, bytes.NewReader(body))
	default:
		http.NotFound(rec, r)
	}
}

// weatherMCP is the fixture MCP server (the official Go SDK, stateless,
// JSON responses) whose get_forecast description a test can change.
type weatherMCP struct {
	description atomic.Pointer[string]
}

func newWeatherMCP() *weatherMCP {
	m := &weatherMCP{}
	d := "Get the weather forecast for a city for the next days."
	m.description.Store(&d)
	return m
}

type forecastArgs struct {
	City string `json:"city" jsonschema:"the city to forecast"`
	Days int    `json:"days,omitempty" jsonschema:"how many days, 1 to 7"`
}

type alertArgs struct {
	Region string `json:"region" jsonschema:"the region to watch"`
}

func (m *weatherMCP) handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "fixture-weather", Title: "Fixture Weather", Version: "3.0.0"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "get_forecast", Title: "Get forecast", Description: *m.description.Load()},
			func(context.Context, *mcp.CallToolRequest, forecastArgs) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "list_alerts", Description: "List severe weather alerts for a region."},
			func(context.Context, *mcp.CallToolRequest, alertArgs) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, DisableLocalhostProtection: true})
}

// newCrawler returns an ingester over a fresh kv and in-memory index whose
// fetcher pins each domain to p (like --resolve) and refuses every other
// private address, with no pause between requests.
func newCrawler(tb testing.TB, p *publishers, domains ...string) *ingest.Ingester {
	tb.Helper()
	resolve := map[string]string{}
	for _, d := range domains {
		resolve[d] = p.addr()
	}
	return &ingest.Ingester{
		DB:         kvtest.Open(tb),
		Index:      mustOpenIndex(tb),
		Fetcher:    web.NewFetcher(web.FetchOptions{Resolve: resolve, Timeout: 5 * time.Second, MaxBytes: 1 << 20}),
		CrawlDelay: -1,
	}
}

// fixturePublisher serves fixture.test with its MCP server.
func fixturePublisher(tb testing.TB) (*publishers, *weatherMCP) {
	tb.Helper()
	p := newPublishers(tb)
	p.load("fixture.test", "fixture.test")
	m := newWeatherMCP()
	p.serveMCP("fixture.test", m.handler())
	return p, m
}

func mustCrawl(tb testing.TB, in *ingest.Ingester, domains ...string) *ingest.CrawlReport {
	tb.Helper()
	rep, err := in.Crawl(context.Background(), domains...)
	if err != nil {
		tb.Fatalf("crawl: %v", err)
	}
	return rep
}

func allEntries(tb testing.TB, db *kv.DB) map[string]kv.Entry {
	tb.Helper()
	out := map[string]kv.Entry{}
	if err := db.ForEachEntry(func(e kv.Entry) error { out[e.ID] = e; return nil }); err != nil {
		tb.Fatal(err)
	}
	return out
}

func changesOf(tb testing.TB, db *kv.DB, after uint64) []kv.Change {
	tb.Helper()
	cs, err := db.Changes(after, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

func lastSeq(tb testing.TB, db *kv.DB) uint64 {
	tb.Helper()
	s, err := db.LastChangeSeq()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func kindsByID(cs []kv.Change) map[string][]string {
	out := map[string][]string{}
	for _, c := range cs {
		out[c.ID] = append(out[c.ID], c.Kind)
	}
	return out
}
