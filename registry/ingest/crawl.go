package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/safety"
	"github.com/ardx-dev/ardx/registry/sources"
)

// ChangeToolChanged is the change-feed kind appended, besides the normal
// entry.changed, when a stored MCP tool's description hash
// (safety.DescriptionHash) differs on re-crawl: what a model is shown of the
// tool changed after users may have approved it (a "rug pull").
const ChangeToolChanged = "tool.changed"

// MetaDescriptionHash is the metadata key of an MCP tool entry that pins its
// safety.DescriptionHash, so the next crawl can compare.
const MetaDescriptionHash = "mcp.descriptionHash"

// Document kinds of a crawl.
const (
	DocManifest = "manifest"
	DocOpenAPI  = "openapi"
	DocMCP      = "mcp"
	DocLLMsTxt  = "llms.txt"
)

// Well-known locations of an API description, tried in order until one
// answers with a description.
var wellKnownAPIPaths = []string{"/openapi.json", "/openapi.yaml", "/swagger.json", "/.well-known/openapi.json"}

// Bounds on one domain's crawl, so that one publisher cannot make it
// unbounded: API descriptions and MCP servers read per domain.
const (
	maxAPIsPerDomain = 10
	maxMCPPerDomain  = 10
)

// volatileMeta are metadata keys that differ on every fetch of an unchanged
// document; an entry differing only in them is kept as stored, so a
// re-crawl reports real changes only.
var volatileMeta = []string{
	"source.fetchedAt", "source.sha256", "source.httpStatus",
	"mcp.live.fetchedAt", "mcp.live.sha256", "mcp.live.httpStatus",
}

// CrawlReport is what a crawl did, domain by domain.
type CrawlReport struct {
	Domains  []DomainReport `json:"domains"`
	Duration time.Duration  `json:"duration"`
}

// DomainReport is the outcome of crawling one domain.
type DomainReport struct {
	Domain string `json:"domain"`
	// Discovery is where the manifest was found (mechanism, URL, status,
	// the legacy-path warning) and every location tried.
	Discovery *Discovery `json:"discovery,omitempty"`
	// Documents are the documents read, one replace-by-source key each.
	Documents []DocumentReport `json:"documents"`
	// Fetches are every request made, in order.
	Fetches []FetchRecord `json:"fetches"`
	Stored  int           `json:"stored"`
	Added   int           `json:"added"`
	Changed int           `json:"changed"`
	Removed int           `json:"removed"`
	// Rejected entries were skipped, with the reason.
	Rejected []Problem `json:"rejected,omitempty"`
	Warnings []Problem `json:"warnings,omitempty"`
	// ToolChanges are MCP tools whose description hash changed.
	ToolChanges []ToolChange `json:"toolChanges,omitempty"`
	// Error is set when the domain could not be crawled (not a domain,
	// unreachable, refused address, nothing published, a manifest that is
	// not one); nothing was stored and its earlier entries are kept.
	Error string `json:"error,omitempty"`
}

// DocumentReport is one document of a crawl and what storing it did.
type DocumentReport struct {
	Kind         string    `json:"kind"`   // DocManifest, DocOpenAPI, DocMCP or DocLLMsTxt
	Source       string    `json:"source"` // the replace-by-source key
	URL          string    `json:"url"`
	Status       int       `json:"status,omitempty"`
	SHA256       string    `json:"sha256,omitempty"`
	FetchedAt    time.Time `json:"fetchedAt,omitzero"`
	NotModified  bool      `json:"notModified,omitempty"`
	AuthRequired bool      `json:"authRequired,omitempty"` // an MCP server answered 401 with a challenge
	Stored       int       `json:"stored"`
	Added        int       `json:"added"`
	Changed      int       `json:"changed"`
	Removed      int       `json:"removed"`
	// Error is set when the document could not be read or was not valid;
	// its previously stored entries are kept.
	Error string `json:"error,omitempty"`
}

// ToolChange is one MCP tool whose description hash changed.
type ToolChange struct {
	Identifier string `json:"identifier"`
	OldHash    string `json:"oldHash"`
	NewHash    string `json:"newHash"`
}

// Errors returns the domains that failed as a whole.
func (r *CrawlReport) Errors() []DomainReport {
	var out []DomainReport
	for _, d := range r.Domains {
		if d.Error != "" {
			out = append(out, d)
		}
	}
	return out
}

// Print writes a human summary: one line per domain, then its documents,
// rejections, warnings and tool changes.
func (r *CrawlReport) Print(w io.Writer) {
	for _, d := range r.Domains {
		fmt.Fprintln(w, d.line())
		if d.Error != "" {
			continue
		}
		if disc := d.Discovery; disc != nil && disc.ManifestURL != "" {
			fmt.Fprintf(w, "  manifest: %s (%s, HTTP %d)\n", disc.ManifestURL, disc.Mechanism, disc.Status)
		}
		for _, doc := range d.Documents {
			s := fmt.Sprintf("  %s %s: %d stored (+%d ~%d -%d)", doc.Kind, doc.URL, doc.Stored, doc.Added, doc.Changed, doc.Removed)
			switch {
			case doc.Error != "":
				s = fmt.Sprintf("  %s %s: error: %s (earlier entries kept)", doc.Kind, doc.URL, doc.Error)
			case doc.NotModified:
				s += ", not modified"
			}
			if doc.AuthRequired {
				s += ", auth required"
			}
			fmt.Fprintln(w, s)
		}
		for i, p := range d.Rejected {
			if i == maxPrintedRejections {
				fmt.Fprintf(w, "  ... and %d more rejected\n", len(d.Rejected)-i)
				break
			}
			fmt.Fprintf(w, "  rejected %s\n", p.location())
		}
		for _, p := range d.Warnings {
			if p.Pointer == "" && p.Identifier == "" {
				fmt.Fprintf(w, "  warning: %s\n", p.Message)
			}
		}
		for _, tc := range d.ToolChanges {
			fmt.Fprintf(w, "  tool changed: %s (%s -> %s)\n", tc.Identifier, tc.OldHash, tc.NewHash)
		}
	}
	var stored, errs int
	for _, d := range r.Domains {
		stored += d.Stored
		if d.Error != "" {
			errs++
		}
	}
	fmt.Fprintf(w, "crawled %d domain(s) in %s: %d entries stored, %d domain error(s)\n",
		len(r.Domains), r.Duration.Round(time.Millisecond), stored, errs)
}

// line is the one-line progress summary of a domain.
func (d *DomainReport) line() string {
	if d.Error != "" {
		return fmt.Sprintf("%s: error: %s", d.Domain, d.Error)
	}
	how := "no manifest"
	if d.Discovery != nil && d.Discovery.Mechanism != "" {
		how = "manifest via " + d.Discovery.Mechanism
	}
	return fmt.Sprintf("%s: %s, %d document(s), %d stored (+%d ~%d -%d), %d rejected, %d tool change(s)",
		d.Domain, how, len(d.Documents), d.Stored, d.Added, d.Changed, d.Removed, len(d.Rejected), len(d.ToolChanges))
}

// Crawl discovers and ingests everything each domain publishes: its ARD
// manifest (found by Discover), the API descriptions and MCP servers its
// entries point at, its llms.txt and the API and MCP links in it, an API
// description at a well-known path and an MCP server card at a well-known
// path. Every API operation and MCP tool becomes an entry linked to its
// parent. Each document is its own replace-by-source key, so a re-crawl
// replaces exactly what that document gave; the differences are the change
// events of kv.ReplaceSource, plus ChangeToolChanged for MCP tools whose
// description changed.
//
// Domains are crawled concurrently (Concurrency), each one politely: one
// request at a time per host, CrawlDelay apart, conditional requests from
// the fetch cache. A domain that fails as a whole stores nothing; the
// error is for a cancelled context or a store that failed.
func (in *Ingester) Crawl(ctx context.Context, domains ...string) (*CrawlReport, error) {
	if in.DB == nil {
		return nil, errors.New("ingest: no DB")
	}
	start := time.Now()
	rep := &CrawlReport{Domains: make([]DomainReport, len(domains))}
	prog := newProgress(in.Progress, len(domains), "crawl")
	defer prog.finish()
	workers := in.Concurrency
	if workers <= 0 {
		workers = 4
	}
	type result struct {
		i   int
		r   DomainReport
		err error
	}
	results := make(chan result)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(domains)) {
		wg.Go(func() {
			for i := range jobs {
				r, err := in.crawlDomain(ctx, domains[i])
				results <- result{i, r, err}
			}
		})
	}
	go func() {
		defer close(jobs)
		for i := range domains {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()
	var firstErr error
	done := make([]bool, len(domains))
	for res := range results {
		rep.Domains[res.i], done[res.i] = res.r, true
		if res.err != nil && firstErr == nil {
			firstErr = res.err
		}
		prog.line(res.r.line())
		crawledDomainsTotal.WithLabelValues(outcomeLabel(res.r.Error != "")).Inc()
		countEntries(res.r.Added, res.r.Changed, res.r.Removed, len(res.r.Rejected))
	}
	// Domains never started (cancelled) still get a line.
	for i, ok := range done {
		if !ok {
			rep.Domains[i] = DomainReport{Domain: domains[i], Error: "not crawled: " + ctx.Err().Error()}
		}
	}
	rep.Duration = time.Since(start)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return rep, firstErr
}

// staged is one document read and validated, waiting to be stored.
type staged struct {
	doc    DocumentReport
	l      loaded // entries, rejections, warnings, documents to keep
	failed bool   // the document failed: leave its key alone
}

// domainCrawl is the state of one domain's crawl while it reads.
type domainCrawl struct {
	in     *Ingester
	domain string
	reader *sources.Reader
	rep    *DomainReport
	docs   []*staged
	seen   map[string]string // identifier -> document that gave it
	apis   map[string]bool   // API description URLs read (or tried)
	mcps   map[string]bool   // MCP card URLs and endpoints read
	nAPI   int
	nMCP   int
}

// crawlDomain crawls one domain; its error is for a failed store or a
// cancelled context only.
func (in *Ingester) crawlDomain(ctx context.Context, domain string) (rep DomainReport, err error) {
	domain = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(domain)), ".")
	rep = DomainReport{Domain: domain, Documents: []DocumentReport{}}
	if in.Fetcher == nil {
		rep.Error = "no outbound fetcher configured"
		return rep, nil
	}
	mu, _ := in.domainLocks.LoadOrStore(domain, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()

	ctx, flog := withFetchLog(ctx)
	defer func() { rep.Fetches = flog.records() }()
	client := in.crawlClient()
	dc := &domainCrawl{
		in: in, domain: domain, rep: &rep,
		reader: sources.NewReaderFor(client, in.logger()),
		seen:   map[string]string{}, apis: map[string]bool{}, mcps: map[string]bool{},
	}

	disc, derr := discover(ctx, client, domain)
	rep.Discovery = disc
	if ctx.Err() != nil {
		rep.Error = ctx.Err().Error()
		return rep, ctx.Err()
	}
	if derr != nil && !errors.Is(derr, ErrNoManifest) {
		rep.Error = derr.Error()
		return rep, nil
	}
	for _, w := range disc.Warnings {
		rep.Warnings = append(rep.Warnings, Problem{Document: disc.ManifestURL, Severity: SeverityWarning, Message: w})
	}
	if disc.Result != nil {
		if msg := dc.readManifest(ctx, disc); msg != "" {
			rep.Error = msg
			return rep, ctx.Err()
		}
	} else {
		rep.Warnings = append(rep.Warnings, Problem{Severity: SeverityWarning, Message: derr.Error()})
	}
	dc.readLLMsTxt(ctx)
	dc.readBazaar(ctx, client)
	if dc.nAPI == 0 {
		for _, p := range wellKnownAPIPaths {
			if dc.readAPI(ctx, "https://"+domain+p, "", true) {
				break
			}
		}
	}
	if dc.nMCP == 0 {
		dc.readMCP(ctx, "", "", "", true)
	}
	if ctx.Err() != nil {
		rep.Error = ctx.Err().Error()
		return rep, ctx.Err()
	}
	if len(dc.docs) == 0 {
		rep.Error = fmt.Sprintf("%s publishes nothing ardx can read: %v; no API description, MCP server card or llms.txt either", domain, derr)
		return rep, nil
	}
	if err := dc.store(ctx); err != nil {
		rep.Error = "store: " + err.Error()
		return rep, err
	}
	return rep, nil
}

// manifestKey is the replace-by-source key of a domain's manifest: the
// v0.91 path whichever mechanism found it, the same key Ingest uses for a
// bare domain, so crawling and ingesting a domain never strand entries
// under two keys.
func manifestKey(domain string) string { return "https://" + domain + WellKnownARD }

// readManifest validates the discovered manifest (following nested
// catalogs) and the API descriptions and MCP servers its entries point at.
// It returns a message when the manifest is not one: the domain then fails
// as a whole.
func (dc *domainCrawl) readManifest(ctx context.Context, disc *Discovery) string {
	doc := webDocument(disc.ManifestURL, disc.Result)
	if !contains(doc.hosts, dc.domain) {
		// The domain pointed at this manifest (an Agentmap or link to
		// another host): it vouches for entries of its own.
		doc.hosts = append(doc.hosts, dc.domain)
	}
	l := dc.in.load(ctx, unit{key: manifestKey(dc.domain), pre: &doc})
	if l.err != nil {
		return "manifest " + l.err.Error()
	}
	st := &staged{l: l, doc: dc.docReport(ctx, DocManifest, manifestKey(dc.domain), disc.ManifestURL)}
	dc.rep.Rejected = append(dc.rep.Rejected, l.report.Rejected...)
	dc.rep.Warnings = append(dc.rep.Warnings, l.report.Warnings...)
	for _, e := range l.entries {
		dc.seen[e.ID] = disc.ManifestURL
	}
	dc.docs = append(dc.docs, st)

	for _, e := range l.entries {
		var f struct {
			Type string          `json:"type"`
			URL  string          `json:"url"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(e.Body, &f) != nil {
			continue
		}
		switch {
		case f.Type == sources.TypeOpenAPI && f.URL != "", f.URL != "" && looksLikeAPIDescription(f.URL):
			dc.readAPI(ctx, f.URL, e.ID, false)
		case f.Type == TypeMCPServer && f.URL != "":
			dc.readMCP(ctx, "", f.URL, e.ID, false)
		case f.Type == TypeMCPServer && len(f.Data) > 0:
			if card, err := sources.ParseServerCard(f.Data, disc.ManifestURL); err == nil {
				if ep := card.StreamableHTTPEndpoint(); ep != "" {
					dc.readMCP(ctx, ep, "", e.ID, false)
				}
			}
		}
		if ctx.Err() != nil {
			return ""
		}
	}
	return ""
}

// looksLikeAPIDescription judges a URL by its last path segment, for
// manifest entries whose type does not say.
func looksLikeAPIDescription(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	p := strings.ToLower(u.Path)
	for _, suffix := range []string{"/openapi.json", "/openapi.yaml", "/openapi.yml", "/swagger.json", "/swagger.yaml", "/swagger.yml"} {
		if strings.HasSuffix(p, suffix) {
			return true
		}
	}
	return false
}

// docReport describes the fetch of rawURL made in this crawl (the last
// one for that URL).
func (dc *domainCrawl) docReport(ctx context.Context, kind, key, rawURL string) DocumentReport {
	d := DocumentReport{Kind: kind, Source: key, URL: rawURL}
	if l, ok := ctx.Value(fetchLogKey{}).(*fetchLog); ok {
		recs := l.records()
		for i := len(recs) - 1; i >= 0; i-- {
			if recs[i].URL == rawURL {
				d.Status, d.SHA256, d.FetchedAt, d.NotModified = recs[i].Status, recs[i].SHA256, recs[i].FetchedAt, recs[i].NotModified
				break
			}
		}
	}
	return d
}

// readAPI reads one API description. parent is the manifest entry that
// links it ("" when none): the operations are then linked to that entry and
// no parent of ardx's making is added. probe marks a well-known path tried
// on chance, whose absence is no error. It reports whether a description
// was read.
func (dc *domainCrawl) readAPI(ctx context.Context, rawURL, parent string, probe bool) bool {
	if dc.apis[rawURL] || dc.nAPI >= maxAPIsPerDomain {
		return false
	}
	dc.apis[rawURL] = true
	_, res, err := dc.reader.ReadAPI(ctx, rawURL, dc.domain)
	if err != nil {
		if probe || ctx.Err() != nil {
			return false
		}
		dc.fail(ctx, DocOpenAPI, rawURL, rawURL, err)
		return false
	}
	dc.nAPI++
	entries := res.Entries
	if parent != "" && len(entries) > 0 && entries[0].Type == sources.TypeOpenAPI {
		entries = entries[1:]
		for i := range entries {
			if od, ok := entries[i].Data.(*sources.OperationData); ok {
				od.API = parent
			}
		}
	}
	dc.stage(ctx, DocOpenAPI, rawURL, rawURL, entries, res.Warnings)
	return true
}

// readMCP reads one MCP server: by card URL, by endpoint, or (both empty)
// by the well-known card paths of the domain. parent links the tools to a
// manifest entry, as in readAPI.
func (dc *domainCrawl) readMCP(ctx context.Context, endpoint, cardURL, parent string, probe bool) {
	key := firstNonEmpty(cardURL, endpoint, "https://"+dc.domain+sources.WellKnownServerCard)
	if dc.mcps[key] || dc.nMCP >= maxMCPPerDomain {
		return
	}
	dc.mcps[key] = true
	srv, res, err := dc.reader.ReadMCP(ctx, dc.domain, endpoint, cardURL)
	if err != nil {
		if probe || ctx.Err() != nil {
			return
		}
		dc.fail(ctx, DocMCP, key, key, err)
		return
	}
	dc.nMCP++
	if srv.Live != nil {
		dc.mcps[srv.Live.Endpoint] = true
	}
	entries := res.Entries
	if parent != "" && len(entries) > 0 && entries[0].Type == sources.TypeMCPServer {
		gen := entries[0].Identifier
		entries = entries[1:]
		for i := range entries {
			entries[i].Identifier = parent + strings.TrimPrefix(entries[i].Identifier, gen)
			if td, ok := entries[i].Data.(*sources.ToolData); ok {
				td.Server.Identifier = parent
			}
			if entries[i].Metadata != nil {
				entries[i].Metadata["mcp.server"] = parent
			}
		}
	}
	st := dc.stage(ctx, DocMCP, key, key, entries, res.Warnings)
	if srv.Live != nil && srv.Live.AuthRequired {
		st.doc.AuthRequired = true
		dc.rep.Warnings = append(dc.rep.Warnings, Problem{Document: srv.Live.Endpoint, Severity: SeverityWarning,
			Message: "the MCP server requires authentication (401): its tools could not be listed; " + srv.Live.WWWAuthenticate})
	}
	if srv.Card != nil && st.doc.Status == 0 {
		st.doc.URL = srv.Card.Source.URL
		st.doc.Status, st.doc.SHA256, st.doc.FetchedAt = srv.Card.Source.HTTPStatus, srv.Card.Source.SHA256, srv.Card.Source.FetchedAt
	}
}

// readLLMsTxt reads /llms.txt, stores the entries of its own links and
// follows its API and MCP links.
func (dc *domainCrawl) readLLMsTxt(ctx context.Context) {
	u := "https://" + dc.domain + "/llms.txt"
	doc, res, err := dc.reader.ReadLLMsTxt(ctx, u, dc.domain)
	if err != nil {
		// A missing llms.txt, or an HTML page served for every path, is
		// the common case, not an error.
		if !errors.Is(err, sources.ErrNotFound) && !errors.Is(err, sources.ErrNotLLMsTxt) && ctx.Err() == nil {
			dc.fail(ctx, DocLLMsTxt, u, u, err)
		}
		return
	}
	dc.stage(ctx, DocLLMsTxt, u, u, res.Entries, res.Warnings)
	for _, link := range doc.Follow() {
		switch link.Kind {
		case sources.LinkOpenAPI:
			dc.readAPI(ctx, link.URL, "", false)
		case sources.LinkMCPEndpoint:
			dc.readMCP(ctx, link.URL, "", "", false)
		case sources.LinkCatalog:
			if link.URL != dc.rep.Discovery.ManifestURL {
				dc.rep.Warnings = append(dc.rep.Warnings, Problem{Document: u, Severity: SeverityWarning,
					Message: fmt.Sprintf("llms.txt links an ARD manifest at %s, which is not the one discovery found; point Agentmap or rel=\"ard\" at it", link.URL)})
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// fail records a document that could not be read; its key keeps its
// entries.
func (dc *domainCrawl) fail(ctx context.Context, kind, key, rawURL string, err error) {
	d := dc.docReport(ctx, kind, key, rawURL)
	d.Error = err.Error()
	dc.docs = append(dc.docs, &staged{doc: d, failed: true})
}

// stage validates generated entries as a manifest (the same validator as
// every other source), pins MCP tools' description hashes, and queues them
// under key.
func (dc *domainCrawl) stage(ctx context.Context, kind, key, rawURL string, entries []sources.Entry, notes []string) *staged {
	st := &staged{doc: dc.docReport(ctx, kind, key, rawURL)}
	st.l.report.Source = key
	for _, n := range notes {
		st.l.report.Warnings = append(st.l.report.Warnings, Problem{Document: rawURL, Severity: SeverityWarning, Message: n})
	}
	for i := range entries {
		if td, ok := entries[i].Data.(*sources.ToolData); ok {
			if entries[i].Metadata == nil {
				entries[i].Metadata = map[string]any{}
			}
			entries[i].Metadata[MetaDescriptionHash] = toolHash(td)
		}
	}
	if entries == nil {
		entries = []sources.Entry{}
	}
	body, err := marshalNoEscape(map[string]any{"entries": entries})
	if err != nil {
		st.failed, st.doc.Error = true, "encode generated entries: "+err.Error()
		dc.docs = append(dc.docs, st)
		return st
	}
	m, problems := ParseManifest(body)
	for _, p := range problems {
		p.Document = rawURL
		if p.Severity == SeverityError {
			st.l.report.Rejected = append(st.l.report.Rejected, p)
		} else {
			st.l.report.Warnings = append(st.l.report.Warnings, p)
		}
	}
	prov := kv.Provenance{Source: st.doc.URL, FetchedAt: st.doc.FetchedAt, HTTPStatus: st.doc.Status, SHA256: st.doc.SHA256}
	if len(entries) > 0 {
		prov = provenanceOf(entries[0].Metadata, prov)
	}
	for _, e := range m.Entries {
		switch {
		case !PublisherAllowed(e.Publisher, dc.domain):
			st.l.report.Rejected = append(st.l.report.Rejected, Problem{Document: rawURL, Pointer: e.Pointer, Identifier: e.ID, Severity: SeverityError,
				Message: fmt.Sprintf("publisher %q is not %s or a subdomain of it", e.Publisher, dc.domain)})
		case dc.seen[e.ID] != "":
			st.l.report.Rejected = append(st.l.report.Rejected, Problem{Document: rawURL, Pointer: e.Pointer, Identifier: e.ID, Severity: SeverityError,
				Message: "duplicate identifier; " + dc.seen[e.ID] + " already gives it"})
		default:
			dc.seen[e.ID] = rawURL
			st.l.entries = append(st.l.entries, kv.Entry{ID: e.ID, Body: e.Body, Provenance: prov})
		}
	}
	dc.rep.Rejected = append(dc.rep.Rejected, st.l.report.Rejected...)
	dc.rep.Warnings = append(dc.rep.Warnings, st.l.report.Warnings...)
	dc.docs = append(dc.docs, st)
	return st
}

// provenanceOf reads the fetch an entry cites from its source.* metadata.
func provenanceOf(meta map[string]any, def kv.Provenance) kv.Provenance {
	p := def
	if s, ok := meta["source.url"].(string); ok && s != "" {
		p.Source = s
	}
	if s, ok := meta["source.sha256"].(string); ok && s != "" {
		p.SHA256 = s
	}
	if n, ok := meta["source.httpStatus"].(int); ok {
		p.HTTPStatus = n
	}
	if s, ok := meta["source.fetchedAt"].(string); ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			p.FetchedAt = t
		}
	}
	return p
}

// toolHash is safety.DescriptionHash of a listed tool.
func toolHash(td *sources.ToolData) string {
	t := safety.Tool{Name: td.Name, Title: td.Title, Description: td.Description, InputSchema: td.InputSchema}
	if td.Annotations != nil {
		t.Annotations, _ = json.Marshal(td.Annotations)
	}
	return safety.DescriptionHash(t)
}

// store commits every staged document, removes the keys a previous crawl
// produced that this one no longer did (when every request of this crawl
// got a definite answer), appends tool.changed events, and records the
// crawl state.
func (dc *domainCrawl) store(ctx context.Context) error {
	in, rep := dc.in, dc.rep
	clean := true // no document failed and no request failed or got a 5xx
	keys := make([]string, 0, len(dc.docs))
	for _, st := range dc.docs {
		keys = append(keys, st.doc.Source)
		if st.failed {
			clean = false
		}
	}
	if l, ok := ctx.Value(fetchLogKey{}).(*fetchLog); ok {
		for _, r := range l.records() {
			if r.Error != "" || r.Status >= 500 {
				clean = false
			}
		}
	}
	prev, err := in.DB.GetCrawlState(dc.domain)
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return err
	}
	var events []kv.Change
	now := in.now()
	for _, st := range dc.docs {
		if st.failed {
			rep.Documents = append(rep.Documents, st.doc)
			continue
		}
		changed, err := dc.stabilize(st)
		if err != nil {
			return err
		}
		if err := in.store(st.doc.Source, &st.l); err != nil {
			return err
		}
		if st.l.err != nil { // stored, but the index lagged
			rep.Warnings = append(rep.Warnings, Problem{Document: st.doc.URL, Severity: SeverityWarning, Message: st.l.err.Error()})
		}
		for _, tc := range changed {
			events = append(events, kv.Change{Time: now, Kind: ChangeToolChanged, ID: tc.Identifier, Source: st.doc.Source})
		}
		rep.ToolChanges = append(rep.ToolChanges, changed...)
		st.doc.Stored, st.doc.Added, st.doc.Changed, st.doc.Removed = st.l.report.Stored, st.l.report.Added, st.l.report.Changed, st.l.report.Removed
		rep.Documents = append(rep.Documents, st.doc)
	}
	for _, old := range prev.Sources {
		if contains(keys, old) {
			continue
		}
		if !clean {
			keys = append(keys, old) // not sure it is gone: keep it, and remember it
			continue
		}
		gone := &loaded{report: SourceReport{Source: old}}
		if err := in.store(old, gone); err != nil {
			return err
		}
		rep.Documents = append(rep.Documents, DocumentReport{Kind: "gone", Source: old, URL: old, Removed: gone.report.Removed})
	}
	for _, d := range rep.Documents {
		rep.Stored += d.Stored
		rep.Added += d.Added
		rep.Changed += d.Changed
		rep.Removed += d.Removed
	}
	if len(events) > 0 {
		if _, err := in.DB.AppendChanges(events); err != nil {
			return err
		}
	}
	sort.Strings(keys)
	return in.DB.PutCrawlState(kv.CrawlState{Domain: dc.domain, Sources: keys, CrawledAt: now})
}

// stabilize keeps the stored body of an entry whose new body differs only
// in volatile metadata (fetch times and hashes), so that an unchanged
// document yields no change events, and returns the MCP tools whose pinned
// description hash changed.
func (dc *domainCrawl) stabilize(st *staged) ([]ToolChange, error) {
	ids := make([]string, len(st.l.entries))
	for i, e := range st.l.entries {
		ids[i] = e.ID
	}
	old, err := dc.in.DB.GetEntries(ids)
	if err != nil {
		return nil, err
	}
	var changes []ToolChange
	for i, e := range st.l.entries {
		o, ok := old[e.ID]
		if !ok {
			continue
		}
		oldKey, oldHash := stableForm(o.Body)
		newKey, newHash := stableForm(e.Body)
		if oldKey != nil && bytes.Equal(oldKey, newKey) {
			st.l.entries[i].Body = o.Body
		}
		if oldHash != "" && newHash != "" && oldHash != newHash {
			changes = append(changes, ToolChange{Identifier: e.ID, OldHash: oldHash, NewHash: newHash})
		}
	}
	return changes, nil
}

// stableForm is body without its volatile metadata, in canonical key order,
// and the pinned description hash when it has one.
func stableForm(body json.RawMessage) ([]byte, string) {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return nil, ""
	}
	hash := ""
	if meta, ok := m["metadata"].(map[string]any); ok {
		hash, _ = meta[MetaDescriptionHash].(string)
		for _, k := range volatileMeta {
			delete(meta, k)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, hash
	}
	return b, hash
}

// KnownPublishers returns the domains a background re-crawl revisits: every
// domain crawled before, and the host of every source ingested from a
// domain's well-known manifest path.
func (in *Ingester) KnownPublishers() ([]string, error) {
	states, err := in.DB.CrawlStates()
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, s := range states {
		set[s.Domain] = true
	}
	srcs, err := in.DB.EntrySources()
	if err != nil {
		return nil, err
	}
	for _, s := range srcs {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			continue
		}
		if u.Path == WellKnownARD || u.Path == WellKnownAICatalog {
			if h := hostOnly(u.Hostname()); checkPublisher(h) == "" {
				set[h] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out, nil
}

// StartRecrawl re-crawls the known publishers (KnownPublishers) every
// interval in the background, the first time one interval from now (a
// restart does not hammer every publisher). stop ends it and waits for a
// crawl in progress to notice; it is safe to call more than once.
func (in *Ingester) StartRecrawl(ctx context.Context, interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	log := in.logger().With("job", "recrawl")
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			domains, err := in.KnownPublishers()
			if err != nil {
				log.Error("re-crawl: known publishers", "err", err)
				continue
			}
			if len(domains) == 0 {
				continue
			}
			rep, err := in.Crawl(ctx, domains...)
			if err != nil && ctx.Err() == nil {
				log.Error("re-crawl", "err", err)
			}
			if rep != nil {
				var added, changed, removed, tools int
				for _, d := range rep.Domains {
					added, changed, removed, tools = added+d.Added, changed+d.Changed, removed+d.Removed, tools+len(d.ToolChanges)
				}
				log.Info("re-crawled publishers", "domains", len(rep.Domains), "errors", len(rep.Errors()),
					"added", added, "changed", changed, "removed", removed, "toolChanges", tools, "took", rep.Duration.Round(time.Millisecond))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}
