package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// DefaultCrawlDelay is the pause between two requests to one host when
// Ingester.CrawlDelay is zero: a crawl of a domain makes a dozen or so
// requests, which this spreads over a few seconds.
const DefaultCrawlDelay = 250 * time.Millisecond

// FetchRecord is one outbound request made during a crawl: what a publisher
// sees in its access log, and what the crawl report cites.
type FetchRecord struct {
	URL       string    `json:"url"`
	Method    string    `json:"method"`           // GET, or POST for an MCP exchange
	Status    int       `json:"status,omitempty"` // the status on the wire: 304 for a cache hit
	SHA256    string    `json:"sha256,omitempty"` // of the body used (the cached one on 304)
	FetchedAt time.Time `json:"fetchedAt"`
	// NotModified is set when the server answered 304 to a conditional
	// request, and the cached body (unchanged) was used.
	NotModified bool   `json:"notModified,omitempty"`
	Error       string `json:"error,omitempty"`
}

// politeClient wraps the SSRF-safe Fetcher for crawling: one request at a
// time per host with a pause between them, conditional GETs from the fetch
// cache in kv, and a record of every request in the crawl's context. It
// never dials by itself, so every check of web.Fetcher still applies.
type politeClient struct {
	f     *web.Fetcher
	db    *kv.DB // nil: no conditional requests
	delay time.Duration
	now   func() time.Time

	mu    sync.Mutex
	hosts map[string]*hostGate
}

// hostGate serialises the requests to one host. The channel is a mutex that
// a waiter can give up on when its context ends.
type hostGate struct {
	sem  chan struct{}
	last time.Time // when the previous request to the host finished
}

func newPoliteClient(f *web.Fetcher, db *kv.DB, delay time.Duration) *politeClient {
	return &politeClient{f: f, db: db, delay: delay, hosts: map[string]*hostGate{}, now: time.Now}
}

// acquire waits for the host's turn and for the delay since its previous
// request; release must be called when the request is done.
func (c *politeClient) acquire(ctx context.Context, host string) (release func(), err error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	c.mu.Lock()
	g := c.hosts[host]
	if g == nil {
		g = &hostGate{sem: make(chan struct{}, 1)}
		c.hosts[host] = g
	}
	c.mu.Unlock()
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if wait := c.delay - c.now().Sub(g.last); c.delay > 0 && !g.last.IsZero() && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			<-g.sem
			return nil, ctx.Err()
		}
	}
	return func() {
		g.last = c.now()
		<-g.sem
	}, nil
}

// Get fetches rawURL politely. When the fetch cache holds a body for it, the
// request is conditional, and a 304 answer is turned into the cached 200
// (FetchedAt and SHA256 of the original fetch), so a caller sees exactly
// the document it saw last time.
func (c *politeClient) Get(ctx context.Context, rawURL, accept string) (*web.FetchResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", web.ErrBadURL, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return c.Do(req)
}

// Do sends req politely; GETs are conditional as in Get.
func (c *politeClient) Do(req *http.Request) (*web.FetchResult, error) {
	ctx := req.Context()
	rec := FetchRecord{URL: req.URL.String(), Method: req.Method}
	var cached *kv.CachedFetch
	if req.Method == http.MethodGet && c.db != nil {
		if cf, err := c.db.GetCachedFetch(rec.URL); err == nil && len(cf.Body) > 0 {
			cached = &cf
			if cf.ETag != "" {
				req.Header.Set("If-None-Match", cf.ETag)
			}
			if cf.LastModified != "" {
				req.Header.Set("If-Modified-Since", cf.LastModified)
			}
		}
	}
	release, err := c.acquire(ctx, req.URL.Hostname())
	if err != nil {
		return nil, err
	}
	res, err := c.f.Do(req)
	release()
	rec.FetchedAt = c.now().UTC()
	if err != nil {
		rec.Error = err.Error()
		record(ctx, rec)
		return nil, err
	}
	rec.Status, rec.SHA256, rec.FetchedAt = res.Status, res.SHA256, res.FetchedAt
	switch {
	case res.Status == http.StatusNotModified && cached != nil:
		rec.NotModified, rec.SHA256 = true, cached.SHA256
		res = &web.FetchResult{
			URL:       firstNonEmpty(cached.FinalURL, cached.URL),
			Status:    http.StatusOK,
			Header:    res.Header,
			Body:      cached.Body,
			FetchedAt: cached.FetchedAt,
			SHA256:    cached.SHA256,
		}
	case res.Status == http.StatusOK && req.Method == http.MethodGet && c.db != nil:
		etag, lm := res.Header.Get("ETag"), res.Header.Get("Last-Modified")
		switch {
		case etag != "" || lm != "":
			if err := c.db.PutCachedFetch(kv.CachedFetch{URL: rec.URL, FinalURL: res.URL, ETag: etag, LastModified: lm,
				SHA256: res.SHA256, FetchedAt: res.FetchedAt, Body: res.Body}); err != nil {
				rec.Error = "fetch cache: " + err.Error()
			}
		case cached != nil:
			// The server stopped sending validators: stop asking.
			_ = c.db.DeleteCachedFetch(rec.URL)
		}
	}
	record(ctx, rec)
	return res, nil
}

// fetchLog collects the FetchRecords of one domain's crawl; it travels in
// the context so that every reader (sources.Reader included) reports into
// the crawl that caused the request.
type fetchLog struct {
	mu   sync.Mutex
	recs []FetchRecord
}

type fetchLogKey struct{}

func withFetchLog(ctx context.Context) (context.Context, *fetchLog) {
	l := &fetchLog{}
	return context.WithValue(ctx, fetchLogKey{}, l), l
}

func record(ctx context.Context, r FetchRecord) {
	if l, ok := ctx.Value(fetchLogKey{}).(*fetchLog); ok {
		l.mu.Lock()
		l.recs = append(l.recs, r)
		l.mu.Unlock()
	}
}

func (l *fetchLog) records() []FetchRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]FetchRecord(nil), l.recs...)
}

// plainClient adapts a bare Fetcher for Discover called from outside a
// crawl: no delay, no cache.
type plainClient struct{ f *web.Fetcher }

func (p plainClient) Get(ctx context.Context, rawURL, accept string) (*web.FetchResult, error) {
	if p.f == nil {
		return nil, errors.New("no outbound fetcher configured")
	}
	return p.f.Get(ctx, rawURL, accept)
}

func (p plainClient) Do(req *http.Request) (*web.FetchResult, error) {
	if p.f == nil {
		return nil, errors.New("no outbound fetcher configured")
	}
	return p.f.Do(req)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// inCrawl reports whether ctx belongs to a crawl (carries its fetch log).
func inCrawl(ctx context.Context) bool {
	_, ok := ctx.Value(fetchLogKey{}).(*fetchLog)
	return ok
}

// crawlClient is the Ingester's one polite client: one, so that concurrent
// crawls (a background re-crawl and a publisher's request) share the
// per-host gates.
func (in *Ingester) crawlClient() *politeClient {
	in.crawlerOnce.Do(func() {
		delay := in.CrawlDelay
		switch {
		case delay == 0:
			delay = DefaultCrawlDelay
		case delay < 0:
			delay = 0
		}
		in.crawler = newPoliteClient(in.Fetcher, in.DB, delay)
	})
	return in.crawler
}
