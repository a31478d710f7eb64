package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/registry/sources"
	"github.com/ardx-dev/ardx/web"
)

// POST /manifest/build writes an ARD manifest for a domain from what the
// domain already publishes: its MCP server card and live tool list, its API
// description, its llms.txt (and the API descriptions and MCP endpoints
// llms.txt links to on the same domain). Every entry cites the fetch that
// produced it in its metadata (registry/sources does that), identifiers are
// urn:air:<domain>:..., representative queries come from the source text
// only, and the manifest is run through ingest.ParseManifest before it is
// returned. Nothing is stored.

const (
	// buildTimeout bounds a whole build; each fetch has the Fetcher's own
	// timeout inside it.
	buildTimeout = 45 * time.Second
	// maxBuildSources bounds the sources a caller may name.
	maxBuildSources = 10
	// maxFollowLinks bounds the llms.txt links followed per file.
	maxFollowLinks = 5
)

// apiCandidates are the paths where APIs conventionally publish their
// description, tried in order when the caller names no sources.
var apiCandidates = []string{"/openapi.json", "/.well-known/openapi.json", "/openapi.yaml", "/swagger.json"}

// Accept headers of the builder's own fetches.
const (
	acceptAny     = "application/json, application/yaml, text/yaml, text/plain, text/markdown;q=0.9, */*;q=0.5"
	acceptAPIDesc = "application/vnd.oai.openapi+json, application/json, application/yaml, text/yaml;q=0.9, */*;q=0.1"
	acceptText    = "text/plain, text/markdown;q=0.9, */*;q=0.1"
)

// buildResponse is the body of POST /manifest/build.
type buildResponse struct {
	Domain   string          `json:"domain"`
	Manifest json.RawMessage `json:"manifest"`
	Sources  []sourceReport  `json:"sources"`
	Warnings []string        `json:"warnings"`
}

// sourceReport is one fetch the builder made, successful or not.
type sourceReport struct {
	URL       string     `json:"url"`
	Request   string     `json:"request,omitempty"` // GET, or the MCP exchange ("POST tools/list")
	Kind      string     `json:"kind,omitempty"`    // what it turned out to be: openapi, mcp-card, mcp-tools, llms.txt
	Status    int        `json:"status,omitempty"`
	SHA256    string     `json:"sha256,omitempty"`
	FetchedAt *time.Time `json:"fetchedAt,omitempty"`
	Code      string     `json:"code,omitempty"` // stable failure code, with error
	Error     string     `json:"error,omitempty"`
}

// buildPart is what one family of sources contributed.
type buildPart struct {
	entries  []sources.Entry
	sources  []sourceReport
	warnings []string
}

func (p *buildPart) warn(format string, args ...any) {
	p.warnings = append(p.warnings, fmt.Sprintf(format, args...))
}

// provReport records a successful fetch from its provenance.
func provReport(prov sources.Provenance, kind string) sourceReport {
	t := prov.FetchedAt.UTC()
	return sourceReport{URL: prov.URL, Request: prov.Method, Kind: kind, Status: prov.HTTPStatus, SHA256: prov.SHA256, FetchedAt: &t}
}

// failReport records a fetch that failed.
func failReport(rawURL, request string, res *web.FetchResult, err error) sourceReport {
	r := sourceReport{URL: rawURL, Request: request}
	if res != nil {
		t := res.FetchedAt.UTC()
		r.Status, r.SHA256, r.FetchedAt = res.Status, res.SHA256, &t
	}
	switch {
	case err != nil:
		r.Code, r.Error = describeFetchError(err)
	case res != nil && (res.Status == http.StatusNotFound || res.Status == http.StatusGone):
		r.Code, r.Error = "fetch.not-found", "HTTP "+strconv.Itoa(res.Status)
	case res != nil:
		r.Code, r.Error = "fetch.http-status", "HTTP "+strconv.Itoa(res.Status)
	}
	return r
}

// handleManifestBuild handles "POST /manifest/build".
func (s *Service) handleManifestBuild(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fe fieldErrors
	fe.onlyMembers(m, "", "a build request", "domain", "sources")
	domain := domainMember(m, &fe)
	var srcs []string
	if raw, ok := m["sources"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &srcs); err != nil || raw[0] != '[' {
			fe.add("sources", "must be an array of http(s) URLs")
		} else if len(srcs) > maxBuildSources {
			fe.add("sources", "must hold at most "+strconv.Itoa(maxBuildSources)+" URLs")
		}
		for i, u := range srcs {
			if msg := checkSourceURL(u); msg != "" {
				fe.add("sources["+strconv.Itoa(i)+"]", msg)
			}
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), buildTimeout)
	defer cancel()
	resp, p := s.buildManifest(ctx, domain, srcs)
	if p != nil {
		s.problems.Write(w, r, p)
		return
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// checkSourceURL accepts an absolute http(s) URL without user information.
func checkSourceURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return "is not a URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an absolute http(s) URL"
	case u.Host == "":
		return "has no host"
	case u.User != nil:
		return "must not carry user information"
	}
	return ""
}

// buildManifest reads the domain's sources and assembles the manifest. A
// non-nil problem means nothing usable was found.
func (s *Service) buildManifest(ctx context.Context, domain string, srcs []string) (*buildResponse, *web.Problem) {
	var parts []*buildPart
	if len(srcs) == 0 {
		// The three families are independent; they run at once and are
		// merged in a fixed order so the answer does not depend on timing.
		parts = []*buildPart{{}, {}, {}}
		var wg sync.WaitGroup
		wg.Go(func() { s.buildFromMCP(ctx, domain, "", "", parts[0]) })
		wg.Go(func() { s.buildFromAPICandidates(ctx, domain, parts[1]) })
		wg.Go(func() { s.buildFromLLMsTxt(ctx, domain, "https://"+domain+"/llms.txt", parts[2], true) })
		wg.Wait()
	} else {
		for _, u := range srcs {
			p := &buildPart{}
			s.buildFromURL(ctx, domain, strings.TrimSpace(u), p)
			parts = append(parts, p)
		}
	}

	resp := &buildResponse{Domain: domain, Sources: []sourceReport{}, Warnings: []string{}}
	var entries []sources.Entry
	seen := map[string]string{} // identifier -> source URL that produced it
	for _, p := range parts {
		resp.Sources = append(resp.Sources, p.sources...)
		resp.Warnings = append(resp.Warnings, p.warnings...)
		for _, e := range p.entries {
			src, _ := e.Metadata["source.url"].(string)
			if first, dup := seen[e.Identifier]; dup {
				if first != src {
					resp.Warnings = append(resp.Warnings, fmt.Sprintf("%s: produced again by %s; the entry from %s is kept", e.Identifier, src, first))
				}
				continue
			}
			seen[e.Identifier] = src
			entries = append(entries, e)
		}
	}
	for _, sr := range resp.Sources {
		if sr.Error == "" && sr.URL != "" && !withinDomain(hostOf(sr.URL), domain) {
			resp.Warnings = append(resp.Warnings, fmt.Sprintf("%s is not served from %s; publish the manifest only if %s speaks for it", sr.URL, domain, domain))
		}
	}

	if len(entries) == 0 {
		return nil, s.nothingToBuild(domain, srcs, resp.Sources)
	}

	body, kept, warnings, err := validateBuilt(domain, entries)
	if err != nil {
		s.log.Error("manifest build: encode", "domain", domain, "err", err)
		return nil, s.problems.New(web.SlugInternal, "the manifest could not be encoded")
	}
	resp.Warnings = append(resp.Warnings, warnings...)
	if kept == 0 {
		return nil, s.problems.Invalid("nothing "+domain+" publishes yields a valid ARD entry",
			web.FieldError{Field: "domain", Message: strings.Join(warnings, "; ")})
	}
	resp.Manifest = body
	return resp, nil
}

// nothingToBuild explains why no entry came out: the host cannot be reached
// (or may not be), or it publishes none of the sources read.
func (s *Service) nothingToBuild(domain string, srcs []string, reports []sourceReport) *web.Problem {
	var fe fieldErrors
	field := func(u string) string {
		for i, s := range srcs {
			if strings.TrimSpace(s) == u {
				return "sources[" + strconv.Itoa(i) + "]"
			}
		}
		return "domain"
	}
	unreachable := true
	for _, r := range reports {
		if r.Code == "" || r.Code == "fetch.not-found" || r.Code == "fetch.http-status" || r.Code == "source.unrecognised" {
			unreachable = false
		}
		if r.Error != "" {
			fe.add(field(r.URL), r.URL+": "+r.Error)
		}
	}
	detail := domain + " publishes no MCP server card, API description or llms.txt at the usual places; name its description URLs in sources"
	if len(srcs) > 0 {
		detail = "none of the sources is an MCP server, API description or llms.txt this registry can read"
	}
	if unreachable && len(reports) > 0 {
		// Name the URL that failed, not the domain asked about: a build
		// fetches several hosts' URLs.
		detail = reports[0].URL + " could not be fetched: " + reports[0].Error
	}
	if len(fe) == 0 {
		fe.add("domain", detail)
	}
	p := s.problems.Invalid(detail, fe...)
	return p
}

// validateBuilt encodes the manifest, runs it through ingest.ParseManifest,
// drops any entry it rejects (none should be; a rejection is a bug worth a
// warning, not a broken manifest) and returns the final bytes.
func validateBuilt(domain string, entries []sources.Entry) (json.RawMessage, int, []string, error) {
	var warnings []string
	for range 2 {
		body, err := encodeManifest(domain, entries)
		if err != nil {
			return nil, 0, nil, err
		}
		parsed, problems := ingest.ParseManifest(body)
		rejected := map[string]bool{}
		warnings = warnings[:0]
		for _, p := range problems {
			if p.Severity == ingest.SeverityError {
				if i, ok := entryIndex(p.Pointer); ok && i < len(entries) {
					rejected[entries[i].Identifier] = true
				}
				warnings = append(warnings, "dropped: "+p.String())
				continue
			}
			warnings = append(warnings, p.String())
		}
		for _, pe := range parsed.Entries {
			if !ingest.PublisherAllowed(pe.Publisher, domain) {
				rejected[pe.ID] = true
				warnings = append(warnings, "dropped: "+pe.ID+": publisher is not "+domain)
			}
		}
		if len(rejected) == 0 {
			return body, len(parsed.Entries), warnings, nil
		}
		kept := entries[:0:0]
		for _, e := range entries {
			if !rejected[e.Identifier] {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	body, err := encodeManifest(domain, entries)
	return body, len(entries), warnings, err
}

// entryIndex reads i from a pointer "/entries/i...".
func entryIndex(ptr string) (int, bool) {
	rest, ok := strings.CutPrefix(ptr, "/entries/")
	if !ok {
		return 0, false
	}
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		rest = rest[:j]
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// encodeManifest writes a manifest both ARD generations accept: v0.9's
// specVersion and host beside v0.91's entries.
func encodeManifest(domain string, entries []sources.Entry) (json.RawMessage, error) {
	if entries == nil {
		entries = []sources.Entry{}
	}
	doc := struct {
		SpecVersion string          `json:"specVersion"`
		Host        map[string]any  `json:"host"`
		Entries     []sources.Entry `json:"entries"`
	}{"1.0", map[string]any{"displayName": domain}, entries}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// buildFromMCP reads an MCP server: its card (cardURL, or the well-known
// locations) and its live tool list (endpoint, or the card's remote).
func (s *Service) buildFromMCP(ctx context.Context, domain, endpoint, cardURL string, p *buildPart) {
	srv, res, err := s.reader.ReadMCP(ctx, domain, endpoint, cardURL)
	if err != nil {
		where := firstOf(cardURL, endpoint, "https://"+domain+sources.WellKnownServerCard)
		r := sourceReport{URL: where, Request: "GET"}
		r.Code, r.Error = mcpFailure(err)
		p.sources = append(p.sources, r)
		return
	}
	if srv.Card != nil {
		p.sources = append(p.sources, provReport(srv.Card.Source, "mcp-card"))
	}
	if srv.Live != nil {
		if srv.Live.HandshakeSource.URL != "" {
			p.sources = append(p.sources, provReport(srv.Live.HandshakeSource, "mcp-tools"))
		}
		if len(srv.Live.Tools) > 0 && srv.Live.Tools[0].Source.Method != srv.Live.HandshakeSource.Method {
			p.sources = append(p.sources, provReport(srv.Live.Tools[0].Source, "mcp-tools"))
		}
		if srv.Live.AuthRequired {
			p.warn("%s requires authentication to list its tools; only what its card says is in the manifest", srv.Live.Endpoint)
		}
		p.warnings = append(p.warnings, srv.Live.Warnings...)
	}
	p.warnings = append(p.warnings, srv.Warnings...)
	p.entries = append(p.entries, res.Entries...)
	p.warnings = append(p.warnings, res.Warnings...)
}

// mcpFailure classifies a ReadMCP error: a transport failure keeps its fetch
// code, anything else means no MCP server was found there.
func mcpFailure(err error) (string, string) {
	code, msg := describeFetchError(err)
	if code != codeFetchFailed {
		return code, msg
	}
	if errors.Is(err, sources.ErrNotFound) {
		return "fetch.not-found", "no MCP server card or live tool list found"
	}
	return "source.mcp-unreadable", err.Error()
}

// buildFromAPICandidates tries the conventional API description paths and
// reads the first that answers with a description.
func (s *Service) buildFromAPICandidates(ctx context.Context, domain string, p *buildPart) {
	for _, path := range apiCandidates {
		u := "https://" + domain + path
		res, err := s.fetcher.Get(ctx, u, acceptAPIDesc)
		if err != nil || res.Status < 200 || res.Status > 299 {
			r := failReport(u, "GET", res, err)
			p.sources = append(p.sources, r)
			if err != nil {
				return // the host itself failed; the other paths will too
			}
			continue
		}
		if s.apiFromFetch(res, domain, p) {
			return
		}
	}
}

// unrecognised reports a fetched document that is not the kind of source
// it was read as.
func (p *buildPart) unrecognised(res *web.FetchResult, err error) {
	r := failReport(res.URL, "GET", res, nil)
	r.Code, r.Error = "source.unrecognised", err.Error()
	p.sources = append(p.sources, r)
}

// apiFromFetch parses a fetched document as an API description and adds
// its entries; false when it is not one.
func (s *Service) apiFromFetch(res *web.FetchResult, domain string, p *buildPart) bool {
	api, err := sources.ParseAPI(res.Body, res.URL)
	if err != nil {
		p.unrecognised(res, err)
		return false
	}
	prov := sources.ProvenanceOf(res, "GET")
	out, err := sources.APIEntries(api, domain, prov)
	if err != nil {
		r := provReport(prov, "openapi")
		r.Code, r.Error = "source.unusable", err.Error()
		p.sources = append(p.sources, r)
		return false
	}
	p.sources = append(p.sources, provReport(prov, "openapi"))
	p.entries = append(p.entries, out.Entries...)
	p.warnings = append(p.warnings, out.Warnings...)
	return true
}

// buildFromLLMsTxt reads an llms.txt and, when follow is set, the API
// descriptions and MCP endpoints it links to on the same domain.
func (s *Service) buildFromLLMsTxt(ctx context.Context, domain, u string, p *buildPart, follow bool) {
	res, err := s.fetcher.Get(ctx, u, acceptText)
	if err != nil || res.Status < 200 || res.Status > 299 {
		p.sources = append(p.sources, failReport(u, "GET", res, err))
		return
	}
	s.llmsFromFetch(ctx, res, domain, p, follow)
}

// llmsFromFetch parses a fetched llms.txt; false when it is not one.
func (s *Service) llmsFromFetch(ctx context.Context, res *web.FetchResult, domain string, p *buildPart, follow bool) bool {
	doc, err := sources.ParseLLMsTxt(res.Body, res.URL)
	if err != nil {
		p.unrecognised(res, err)
		return false
	}
	prov := sources.ProvenanceOf(res, "GET")
	p.sources = append(p.sources, provReport(prov, "llms.txt"))
	out, err := sources.LLMsTxtEntries(doc, domain, prov)
	if err == nil {
		p.entries = append(p.entries, out.Entries...)
		p.warnings = append(p.warnings, out.Warnings...)
	}
	if !follow {
		return true
	}
	followed := 0
	for _, l := range doc.Follow() {
		if !withinDomain(hostOf(l.URL), domain) {
			p.warn("%s links to %s on another host; not followed", res.URL, l.URL)
			continue
		}
		if followed == maxFollowLinks {
			p.warn("%s links to more than %d descriptions; the rest were not followed", res.URL, maxFollowLinks)
			break
		}
		switch l.Kind {
		case sources.LinkOpenAPI:
			followed++
			r, err := s.fetcher.Get(ctx, l.URL, acceptAPIDesc)
			if err != nil || r.Status < 200 || r.Status > 299 {
				p.sources = append(p.sources, failReport(l.URL, "GET", r, err))
				continue
			}
			s.apiFromFetch(r, domain, p)
		case sources.LinkMCPEndpoint:
			followed++
			s.buildFromMCP(ctx, domain, l.URL, "", p)
		case sources.LinkCatalog:
			p.warn("%s links to an ARD manifest at %s: %s already publishes one", res.URL, l.URL, domain)
		}
	}
	return true
}

// buildFromURL reads one caller-named source, whatever it turns out to be:
// an API description, an MCP server card, an llms.txt, or an MCP endpoint
// (which answers a plain GET with an error).
func (s *Service) buildFromURL(ctx context.Context, domain, u string, p *buildPart) {
	res, err := s.fetcher.Get(ctx, u, acceptAny)
	if err != nil {
		p.sources = append(p.sources, failReport(u, "GET", nil, err))
		return
	}
	if res.Status >= 200 && res.Status <= 299 {
		if _, err := sources.ParseAPI(res.Body, res.URL); err == nil {
			s.apiFromFetch(res, domain, p)
			return
		}
		if card, err := sources.ParseServerCard(res.Body, res.URL); err == nil {
			prov := sources.ProvenanceOf(res, "GET")
			srv := &sources.MCPServer{Card: &sources.CardFetch{Card: card, Source: prov}}
			p.sources = append(p.sources, provReport(prov, "mcp-card"))
			if ep := card.StreamableHTTPEndpoint(); ep != "" {
				tl, err := s.reader.ListTools(ctx, ep)
				if err != nil {
					p.warn("%s: tool list not read: %v", ep, err)
				} else {
					srv.Live = tl
					if tl.HandshakeSource.URL != "" {
						p.sources = append(p.sources, provReport(tl.HandshakeSource, "mcp-tools"))
					}
				}
			}
			out, err := sources.MCPEntries(srv, domain)
			if err != nil {
				p.warn("%s: %v", u, err)
				return
			}
			p.entries = append(p.entries, out.Entries...)
			p.warnings = append(p.warnings, out.Warnings...)
			return
		}
		if !looksLikeJSON(res.Body) {
			if _, err := sources.ParseLLMsTxt(res.Body, res.URL); err == nil {
				s.llmsFromFetch(ctx, res, domain, p, true)
				return
			}
		}
	}
	// Not a document: perhaps an MCP endpoint, which wants a POST.
	tl, lerr := s.reader.ListTools(ctx, u)
	if lerr != nil {
		r := failReport(u, "GET", res, nil)
		if r.Code == "" {
			r.Code = "source.unrecognised"
			r.Error = "not an OpenAPI/Swagger description, MCP server card, llms.txt or MCP endpoint"
		}
		p.sources = append(p.sources, r)
		return
	}
	if tl.HandshakeSource.URL != "" {
		p.sources = append(p.sources, provReport(tl.HandshakeSource, "mcp-tools"))
	}
	out, err := sources.MCPEntries(&sources.MCPServer{Live: tl}, domain)
	if err != nil {
		p.warn("%s: %v", u, err)
		return
	}
	p.entries = append(p.entries, out.Entries...)
	p.warnings = append(p.warnings, out.Warnings...)
}

func looksLikeJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}
