package sources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"

	"github.com/ardx-dev/ardx/web"
)

// ErrNotFound means no document was found where one was looked for (every
// candidate location answered 404 or something that was not the document).
var ErrNotFound = errors.New("not found")

// Accept headers of the fetches.
const (
	acceptAPI     = "application/vnd.oai.openapi+json, application/json, application/yaml, text/yaml;q=0.9, */*;q=0.1"
	acceptCard    = "application/mcp-server-card+json, application/json;q=0.9"
	acceptLLMsTxt = "text/plain, text/markdown;q=0.9, */*;q=0.1"
)

// Reader fetches publishers' descriptions through the SSRF-safe Fetcher and
// parses them. It is safe for concurrent use.
type Reader struct {
	fetch   Client
	log     *slog.Logger
	version string
}

// Client is what a Reader fetches through: *web.Fetcher, or a wrapper of one
// that adds politeness or conditional requests (registry/ingest's crawler).
// A wrapper must keep the Fetcher's SSRF checks: it may only delay, record
// or answer from a cache, never dial by itself.
type Client interface {
	Get(ctx context.Context, rawURL, accept string) (*web.FetchResult, error)
	Do(req *http.Request) (*web.FetchResult, error)
}

// NewReader returns a Reader fetching through f. A nil log discards.
func NewReader(f *web.Fetcher, log *slog.Logger) *Reader {
	return NewReaderFor(f, log)
}

// NewReaderFor returns a Reader fetching through c. A nil log discards.
func NewReaderFor(c Client, log *slog.Logger) *Reader {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = strings.TrimPrefix(bi.Main.Version, "v")
	}
	return &Reader{fetch: c, log: log.With("component", "sources"), version: v}
}

// get fetches url and requires a 2xx answer.
func (r *Reader) get(ctx context.Context, rawURL, accept string) (*web.FetchResult, error) {
	res, err := r.fetch.Get(ctx, rawURL, accept)
	if err != nil {
		return nil, err
	}
	if res.Status == http.StatusNotFound || res.Status == http.StatusGone {
		return res, fmt.Errorf("%s: %w (HTTP %d)", rawURL, ErrNotFound, res.Status)
	}
	if res.Status < 200 || res.Status > 299 {
		return res, &HTTPStatusError{URL: rawURL, Method: "GET", Status: res.Status}
	}
	return res, nil
}

// ReadAPI fetches and parses an API description and returns its entries,
// anchored at domain (empty: the document's host).
func (r *Reader) ReadAPI(ctx context.Context, rawURL, domain string) (*API, *Result, error) {
	res, err := r.get(ctx, rawURL, acceptAPI)
	if err != nil {
		return nil, nil, fmt.Errorf("sources: %w", err)
	}
	api, err := ParseAPI(res.Body, res.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("sources: %s: %w", res.URL, err)
	}
	out, err := APIEntries(api, domain, ProvenanceOf(res, "GET"))
	if err != nil {
		return api, nil, err
	}
	r.log.Debug("read API description", "url", res.URL, "operations", len(api.Operations))
	return api, out, nil
}

// CardFetch is a server card and the fetch that produced it.
type CardFetch struct {
	Card   *ServerCard
	Source Provenance
}

// ReadServerCard fetches and parses the server card at cardURL.
func (r *Reader) ReadServerCard(ctx context.Context, cardURL string) (*CardFetch, error) {
	res, err := r.get(ctx, cardURL, acceptCard)
	if err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	card, err := ParseServerCard(res.Body, res.URL)
	if err != nil {
		return nil, fmt.Errorf("sources: %s: %w", res.URL, err)
	}
	return &CardFetch{Card: card, Source: ProvenanceOf(res, "GET")}, nil
}

// FindServerCard looks for a server card: at <endpoint>/server-card when an
// endpoint is given, then at the two well-known paths of domain (empty: the
// endpoint's host). The first card found wins; ErrNotFound when none is.
func (r *Reader) FindServerCard(ctx context.Context, domain, endpoint string) (*CardFetch, error) {
	var candidates []string
	if endpoint != "" {
		candidates = append(candidates, strings.TrimSuffix(endpoint, "/")+"/server-card")
	}
	base := ""
	switch {
	case domain != "":
		base = "https://" + domain
	case endpoint != "":
		if u, err := url.Parse(endpoint); err == nil && u.IsAbs() {
			base = u.Scheme + "://" + u.Host
		}
	}
	if base != "" {
		candidates = append(candidates, base+WellKnownServerCard, base+WellKnownServerCardLegacy)
	}
	var errs []error
	for _, u := range candidates {
		cf, err := r.ReadServerCard(ctx, u)
		if err == nil {
			return cf, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("sources: no MCP server card for %s: %w", firstNonEmpty(domain, endpoint), errors.Join(append([]error{ErrNotFound}, errs...)...))
}

// ReadMCP reads everything an MCP server publishes about itself: its card
// (cardURL, or looked for with FindServerCard when empty) and its live tool
// list at endpoint (empty: the card's first streamable-http remote). Either
// half may be missing; only both missing is an error. The entries are
// anchored at domain (empty: the endpoint's or card's host).
func (r *Reader) ReadMCP(ctx context.Context, domain, endpoint, cardURL string) (*MCPServer, *Result, error) {
	srv := &MCPServer{}
	var cardErr error
	if cardURL != "" {
		srv.Card, cardErr = r.ReadServerCard(ctx, cardURL)
	} else {
		srv.Card, cardErr = r.FindServerCard(ctx, domain, endpoint)
	}
	if endpoint == "" && srv.Card != nil {
		endpoint = srv.Card.Card.StreamableHTTPEndpoint()
	}
	var listErr error
	if endpoint != "" {
		srv.Live, listErr = r.ListTools(ctx, endpoint)
	}
	if srv.Card == nil && srv.Live == nil {
		return nil, nil, errors.Join(cardErr, listErr, errors.New("sources: neither a server card nor a live tool list"))
	}
	if cardErr != nil {
		srv.Warnings = append(srv.Warnings, cardErr.Error())
	}
	if listErr != nil {
		srv.Warnings = append(srv.Warnings, listErr.Error())
	}
	out, err := MCPEntries(srv, domain)
	if err != nil {
		return srv, nil, err
	}
	return srv, out, nil
}

// ReadLLMsTxt fetches and parses an llms.txt and returns its entries.
func (r *Reader) ReadLLMsTxt(ctx context.Context, rawURL, domain string) (*LLMsTxt, *Result, error) {
	res, err := r.get(ctx, rawURL, acceptLLMsTxt)
	if err != nil {
		return nil, nil, fmt.Errorf("sources: %w", err)
	}
	doc, err := ParseLLMsTxt(res.Body, res.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("sources: %s: %w", res.URL, err)
	}
	out, err := LLMsTxtEntries(doc, domain, ProvenanceOf(res, "GET"))
	if err != nil {
		return doc, nil, err
	}
	return doc, out, nil
}
