package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/registry/sources"
	"github.com/ardx-dev/ardx/web"
)

// POST /doctor answers findings about a manifest, never a score. With
// {manifest} only the document is read: every check of the ARD conformance
// tool and of Lighthouse's ARD audit, each finding with a stable code and a
// JSON pointer. With {domain} the manifest is discovered on the domain, the
// entries' URLs are fetched (bounded in number, concurrency and time) to see
// that they answer with what their type says, and the index is consulted
// for what happened when this registry read the domain.
//
// ingest.ParseManifest stays the one validator: after the doctor's own
// checks it runs over the same bytes, and anything it rejects or warns about
// that no finding covers yet is reported too (codes ingest.rejected and
// ingest.warning), so the doctor can never pass what ingestion refuses.

const (
	// StaleAfter is the age of updatedAt past which an entry is reported
	// stale: a year without a change usually means nobody maintains it.
	StaleAfter = 365 * 24 * time.Hour

	doctorTimeout = 30 * time.Second
	// maxURLChecks bounds the entry URLs one doctor run fetches; the rest
	// get one info finding.
	maxURLChecks   = 50
	urlConcurrency = 4
	// maxNested bounds how deep inline nested catalogs are checked.
	maxNested = ingest.MaxNestingDepth
)

// Severities of a finding.
const (
	sevError   = "error"
	sevWarning = "warning"
	sevInfo    = "info"
)

// urnRegex is the ARD conformance tool's identifier pattern.
var urnRegex = regexp.MustCompile(`^urn:air:([a-zA-Z0-9.-]+)(?::([a-zA-Z0-9._:-]+))?:([a-zA-Z0-9._-]+)$`)

// allowedTypes are the media types the ARD conformance tool accepts without
// a warning, plus ardx's own entry types.
var allowedTypes = map[string]bool{
	"application/ai-catalog+json": true, "application/agent-card+json": true,
	"application/a2a-agent-card+json": true, "application/mcp-server-card+json": true,
	"application/agent-skills+zip": true, "application/agent-skills+gzip": true,
	`text/markdown; profile="urn:air:agent-skills"`: true,
	"application/ai-registry":                       true, "application/ai-registry+json": true,
	sources.TypeOpenAPIOperation: true, sources.TypeMCPTool: true, sources.TypeOpenAPI: true,
}

// deprecatedTypes map a deprecated media type to its replacement (ARD
// ADR-0008 and the NID rename of ADR-0009).
var deprecatedTypes = map[string]string{
	"application/mcp-server+json":                  "application/mcp-server-card+json",
	`text/markdown; profile="urn:ai:agent-skills"`: `text/markdown; profile="urn:air:agent-skills"`,
}

// finding is one thing the doctor saw.
type finding struct {
	Severity   string `json:"severity"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Pointer    string `json:"pointer"`
	Identifier string `json:"identifier,omitempty"`
	URL        string `json:"url,omitempty"`
}

// doctorResponse is the body of POST /doctor: findings and how many of each
// severity there are. The counts are not a score.
type doctorResponse struct {
	Target      string         `json:"target"` // domain or manifest
	Domain      string         `json:"domain,omitempty"`
	ManifestURL string         `json:"manifestUrl,omitempty"`
	Mechanism   string         `json:"mechanism,omitempty"` // how the manifest was discovered
	Entries     int            `json:"entries"`
	Counts      map[string]int `json:"counts"`
	Findings    []finding      `json:"findings"`
}

// handleDoctor handles "POST /doctor" with {domain} or {manifest}.
func (s *Service) handleDoctor(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fe fieldErrors
	fe.onlyMembers(m, "", "a doctor request", "domain", "manifest")
	_, hasDomain := m["domain"]
	rawManifest, hasManifest := m["manifest"]
	switch {
	case hasDomain && hasManifest:
		fe.add("", "give either domain or manifest, not both")
	case !hasDomain && !hasManifest:
		fe.add("", "give a domain (its manifest is fetched) or a manifest (only the document is read)")
	}
	var domain string
	var doc []byte
	if hasDomain && !hasManifest {
		domain = domainMember(m, &fe)
	}
	if hasManifest && !hasDomain {
		// An object is the document itself; a string carries the document's
		// text, so that a body that is not JSON at all can still be examined.
		raw := bytes.TrimSpace(rawManifest)
		switch {
		case len(raw) > 0 && raw[0] == '{':
			doc = raw
		case len(raw) > 0 && raw[0] == '"':
			s, _ := rawString(raw)
			doc = []byte(s)
		default:
			fe.add("manifest", "must be the manifest object, or its text as a string")
		}
	}
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), doctorTimeout)
	defer cancel()
	var resp doctorResponse
	if domain != "" {
		resp = s.doctorDomain(ctx, domain)
	} else {
		resp = doctorResponse{Target: "manifest"}
		dc := checkDocument(doc, "", s.cfg.Now())
		resp.Findings, resp.Entries = dc.findings, dc.entries
	}
	resp.Counts = map[string]int{sevError: 0, sevWarning: 0, sevInfo: 0}
	for _, f := range resp.Findings {
		resp.Counts[f.Severity]++
	}
	if resp.Findings == nil {
		resp.Findings = []finding{}
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// doctorDomain discovers and checks a domain's manifest, its entries' URLs
// and what this registry holds of it.
func (s *Service) doctorDomain(ctx context.Context, domain string) doctorResponse {
	resp := doctorResponse{Target: "domain", Domain: domain}
	add := func(f finding) { resp.Findings = append(resp.Findings, f) }

	disc, err := ingest.Discover(ctx, s.fetcher, domain)
	res := disc.Result
	var dc docCheck
	switch {
	case err != nil || res == nil:
		code, msg := "manifest.not-found", "no ARD manifest found by any discovery mechanism (robots.txt Agentmap, rel=\"ard\" link or header, "+ingest.WellKnownARD+", "+ingest.WellKnownAICatalog+")"
		if err != nil && !errors.Is(err, ingest.ErrNoManifest) {
			code, msg = describeFetchError(err)
		}
		add(finding{Severity: sevError, Code: code, Message: msg, Pointer: "", URL: "https://" + domain + ingest.WellKnownARD})
	default:
		resp.ManifestURL = res.URL
		resp.Mechanism = disc.Mechanism
		if disc.Legacy {
			add(finding{Severity: sevWarning, Code: "discovery.legacy-path", Pointer: "", URL: res.URL,
				Message: "the manifest was found only on the predecessor route (" + ingest.WellKnownAICatalog + " or rel=\"ai-catalog\"); ARD v0.91 clients need not support it: serve the same bytes at " + ingest.WellKnownARD})
		}
		for _, w := range disc.Warnings {
			if disc.Legacy && strings.Contains(w, "ai-catalog") {
				continue // said above
			}
			add(finding{Severity: sevWarning, Code: "discovery.warning", Pointer: "", Message: w})
		}
		if ct := res.Header.Get("Content-Type"); ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
				add(finding{Severity: sevInfo, Code: "manifest.content-type", Pointer: "", URL: res.URL,
					Message: "the manifest is served as " + strconv.Quote(ct) + "; application/json is expected"})
			}
		}
		dc = checkDocument(res.Body, domain, s.cfg.Now())
		resp.Findings = append(resp.Findings, dc.findings...)
		resp.Entries = dc.entries
		resp.Findings = append(resp.Findings, s.checkEntryURLs(ctx, dc.urls)...)
	}
	resp.Findings = append(resp.Findings, s.indexFindings(ctx, domain, res, dc.ids)...)
	resp.Findings = append(resp.Findings, s.probeFindings(ctx, domain)...)
	return resp
}

// docCheck is the result of checking one manifest document.
type docCheck struct {
	findings []finding
	entries  int
	urls     []entryURL
	ids      []string // valid identifiers, in document order
}

// entryURL is an entry's url, to fetch in domain mode.
type entryURL struct {
	pointer, id, url, typ string
}

// checker walks one document.
type checker struct {
	domain string
	now    time.Time
	out    docCheck
	seen   map[string]string // identifier -> pointer of first occurrence
}

func (c *checker) add(sev, code, ptr, id, format string, args ...any) {
	c.out.findings = append(c.out.findings, finding{Severity: sev, Code: code, Message: fmt.Sprintf(format, args...), Pointer: ptr, Identifier: id})
}

// checkDocument runs every document check; domain is set in domain mode
// (it enables the squatting check).
func checkDocument(body []byte, domain string, now time.Time) docCheck {
	c := &checker{domain: domain, now: now, seen: map[string]string{}}
	if !json.Valid(bytes.TrimSpace(body)) || len(bytes.TrimSpace(body)) == 0 {
		var v any
		msg := "the manifest is not JSON"
		if err := json.Unmarshal(body, &v); err != nil {
			msg += ": " + err.Error()
		}
		c.add(sevError, "json.invalid", "", "", "%s", msg)
		return c.out
	}
	c.manifest(body, "", 0)
	c.crossCheck(body)
	return c.out
}

func (c *checker) manifest(body []byte, ptr string, depth int) {
	var root map[string]json.RawMessage
	if json.Unmarshal(body, &root) != nil || root == nil {
		c.add(sevError, "manifest.not-object", ptr, "", "a manifest must be a JSON object")
		return
	}
	if depth == 0 {
		if raw, ok := root["specVersion"]; !ok {
			c.add(sevWarning, "spec-version.missing", "/specVersion", "",
				"specVersion is missing: ARD v0.9 consumers (and its conformance tool) require \"1.0\"; v0.91 ignores it, so emitting it costs nothing")
		} else if sv, ok := rawString(raw); !ok || sv != "1.0" {
			c.add(sevWarning, "spec-version.unsupported", "/specVersion", "", "specVersion is %s; ARD v0.9 defines only \"1.0\"", string(raw))
		}
		if raw, ok := root["host"]; ok {
			var host struct {
				DisplayName *string `json:"displayName"`
			}
			if json.Unmarshal(raw, &host) != nil || host.DisplayName == nil || strings.TrimSpace(*host.DisplayName) == "" {
				c.add(sevWarning, "host.invalid", "/host", "", "host must be an object with a non-empty displayName")
			}
		}
	}
	if _, ok := root["collections"]; ok {
		c.add(sevError, "collections.removed", ptr+"/collections", "", "collections was removed from ARD; use nested application/ai-catalog+json entries")
	}
	raw, ok := root["entries"]
	if !ok {
		c.add(sevError, "entries.missing", ptr+"/entries", "", "entries is required")
		return
	}
	var entries []json.RawMessage
	if json.Unmarshal(raw, &entries) != nil || entries == nil {
		c.add(sevError, "entries.not-array", ptr+"/entries", "", "entries must be an array")
		return
	}
	if len(entries) == 0 {
		c.add(sevWarning, "entries.empty", ptr+"/entries", "", "entries is empty: nothing of this publisher can be found")
	}
	for i, e := range entries {
		c.entry(e, ptr+"/entries/"+strconv.Itoa(i), depth)
	}
}

func (c *checker) entry(raw json.RawMessage, ptr string, depth int) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		c.add(sevError, "entry.not-object", ptr, "", "an entry must be a JSON object")
		return
	}
	c.out.entries++
	id := ""
	rawID, hasID := obj["identifier"]
	if idStr, ok := rawString(rawID); !hasID || !ok || strings.TrimSpace(idStr) == "" {
		c.add(sevError, "identifier.missing", ptr+"/identifier", "", "identifier is required and must be a string")
	} else {
		norm, pub, msg := ingest.NormalizeIdentifier(idStr)
		switch {
		case msg != "" || !urnRegex.MatchString(norm):
			c.add(sevError, "identifier.invalid", ptr+"/identifier", idStr, "identifier must match urn:air:<publisher>:<namespace>:<name>: %s", firstOf(msg, "pattern mismatch"))
		default:
			id = norm
			if strings.HasPrefix(strings.ToLower(idStr), "urn:ai:") {
				c.add(sevWarning, "identifier.legacy-prefix", ptr+"/identifier", id, "the urn:ai: prefix was renamed urn:air: (ARD ADR-0009)")
			} else if norm != idStr {
				c.add(sevInfo, "identifier.not-normalised", ptr+"/identifier", id, "registries store this identifier as %s", norm)
			}
			if first, dup := c.seen[id]; dup {
				c.add(sevError, "identifier.duplicate", ptr+"/identifier", id, "duplicate identifier; first at %s", first)
				id = ""
			} else {
				c.seen[id] = ptr
			}
			if id != "" && c.domain != "" && !ingest.PublisherAllowed(pub, c.domain) {
				c.add(sevError, "publisher.squatted", ptr+"/identifier", id,
					"the publisher %s is not %s or one of its subdomains; registries reject entries that claim another domain's name", pub, c.domain)
			}
		}
	}
	if dn, ok := rawString(obj["displayName"]); !ok || strings.TrimSpace(dn) == "" {
		c.add(sevError, "display-name.missing", ptr+"/displayName", id, "displayName is required and must be a non-empty string")
	}
	typ := ""
	if t, ok := rawString(obj["type"]); !ok || strings.TrimSpace(t) == "" {
		c.add(sevError, "type.missing", ptr+"/type", id, "type is required and must be a media type")
	} else {
		lower := strings.ToLower(strings.TrimSpace(t))
		if base, params, err := mime.ParseMediaType(lower); err != nil || !strings.Contains(base, "/") {
			c.add(sevError, "type.invalid", ptr+"/type", id, "%q is not a media type", t)
		} else {
			typ = mime.FormatMediaType(base, params)
			if repl, ok := deprecatedTypes[typ]; ok {
				c.add(sevWarning, "type.deprecated", ptr+"/type", id, "%q is deprecated; use %q", t, repl)
			} else if !allowedTypes[typ] && !strings.HasPrefix(base, "application/") {
				c.add(sevWarning, "type.unrecognised", ptr+"/type", id, "%q is neither an ARD media type nor an application/* type", t)
			} else if !allowedTypes[typ] {
				c.add(sevInfo, "type.nonstandard", ptr+"/type", id, "%q is not one of the media types ARD names; clients may not know it", t)
			}
		}
	}
	hasURL, hasData := !isNull(obj["url"]), !isNull(obj["data"])
	switch {
	case hasURL && hasData:
		c.add(sevError, "url-data.both", ptr, id, "exactly one of url and data is allowed; both are present")
	case !hasURL && !hasData:
		c.add(sevError, "url-data.neither", ptr, id, "exactly one of url and data is required; neither is present")
	case hasURL:
		u, ok := rawString(obj["url"])
		if msg := checkSourceURL(u); !ok || msg != "" {
			c.add(sevError, "url.invalid", ptr+"/url", id, "url must be an absolute http(s) URL")
		} else if typ != "" {
			c.out.urls = append(c.out.urls, entryURL{pointer: ptr + "/url", id: id, url: u, typ: typ})
		}
	}
	for _, member := range []string{"description", "version"} {
		if raw, ok := obj[member]; ok && !isNull(raw) {
			if _, ok := rawString(raw); !ok {
				c.add(sevError, "member.type", ptr+"/"+member, id, "%s must be a string", member)
			}
		}
	}
	for _, member := range []string{"tags", "capabilities"} {
		if raw, ok := obj[member]; ok && !isNull(raw) {
			var ss []string
			if json.Unmarshal(raw, &ss) != nil || ss == nil {
				c.add(sevError, "member.type", ptr+"/"+member, id, "%s must be an array of strings", member)
			}
		}
	}
	if raw, ok := obj["updatedAt"]; ok && !isNull(raw) {
		s, ok := rawString(raw)
		t, err := time.Parse(time.RFC3339, s)
		switch {
		case !ok || err != nil:
			c.add(sevWarning, "updated-at.invalid", ptr+"/updatedAt", id, "updatedAt must be an RFC 3339 date-time")
		case c.now.Sub(t) > StaleAfter:
			c.add(sevWarning, "updated-at.stale", ptr+"/updatedAt", id, "updatedAt is %s, more than %d days ago: is this entry still maintained?", s, int(StaleAfter.Hours()/24))
		case t.Sub(c.now) > 24*time.Hour:
			c.add(sevWarning, "updated-at.future", ptr+"/updatedAt", id, "updatedAt is %s, in the future", s)
		}
	}
	if raw, ok := obj["representativeQueries"]; !ok || isNull(raw) {
		c.add(sevWarning, "representative-queries.missing", ptr+"/representativeQueries", id,
			"no representativeQueries: search engines build their index from them, so the entry may not appear in search")
	} else {
		var qs []string
		if json.Unmarshal(raw, &qs) != nil || qs == nil {
			c.add(sevError, "representative-queries.not-strings", ptr+"/representativeQueries", id, "representativeQueries must be an array of strings")
		} else if len(qs) < 2 || len(qs) > 5 {
			c.add(sevWarning, "representative-queries.count", ptr+"/representativeQueries", id, "representativeQueries should hold 2 to 5 queries, not %d", len(qs))
		}
	}
	if raw, ok := obj["metadata"]; ok && !isNull(raw) {
		var md map[string]json.RawMessage
		if json.Unmarshal(raw, &md) != nil || md == nil {
			c.add(sevError, "metadata.not-flat", ptr+"/metadata", id, "metadata must be an object of scalar values")
		} else {
			keys := make([]string, 0, len(md))
			for k := range md {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				v := bytes.TrimSpace(md[k])
				if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
					c.add(sevError, "metadata.not-flat", ptr+"/metadata/"+escapePointer(k), id, "metadata member %q must be a scalar", k)
				}
			}
		}
	}
	if raw, ok := obj["trustManifest"]; ok && !isNull(raw) {
		var tm map[string]json.RawMessage
		if json.Unmarshal(raw, &tm) != nil || tm == nil {
			c.add(sevError, "trust-manifest.not-object", ptr+"/trustManifest", id, "trustManifest must be an object")
		} else if ident, ok := rawString(tm["identity"]); !ok || strings.TrimSpace(ident) == "" {
			c.add(sevError, "trust-manifest.identity-missing", ptr+"/trustManifest/identity", id, "trustManifest.identity is required")
		}
	}
	if typ == sources.TypeCatalog && hasData && !hasURL {
		if depth+1 > maxNested {
			c.add(sevError, "catalog.too-deep", ptr+"/data", id, "nested catalogs deeper than %d levels are not followed", maxNested)
		} else {
			c.manifest(obj["data"], ptr+"/data", depth+1)
		}
		return
	}
	if id != "" && typ != sources.TypeCatalog {
		c.out.ids = append(c.out.ids, id)
	}
}

// crossCheck runs ingest.ParseManifest over the same bytes and reports what
// it found that no finding covers.
func (c *checker) crossCheck(body []byte) {
	_, problems := ingest.ParseManifest(body)
	for _, p := range problems {
		if c.covered(p) {
			continue
		}
		switch {
		case strings.HasSuffix(p.Pointer, "/trustManifest/identity"):
			c.add(sevWarning, "trust-manifest.identity-mismatch", p.Pointer, p.Identifier, "%s", p.Message)
		case p.Severity == ingest.SeverityError:
			c.add(sevError, "ingest.rejected", p.Pointer, p.Identifier, "ingestion rejects this: %s", p.Message)
		default:
			c.add(sevWarning, "ingest.warning", p.Pointer, p.Identifier, "%s", p.Message)
		}
	}
}

// covered reports whether a finding of at least the problem's severity
// already sits at its pointer or below it.
func (c *checker) covered(p ingest.Problem) bool {
	for _, f := range c.out.findings {
		if p.Severity == ingest.SeverityError && f.Severity != sevError {
			continue
		}
		if f.Pointer == p.Pointer || strings.HasPrefix(f.Pointer, p.Pointer+"/") && p.Pointer != "" {
			return true
		}
	}
	return false
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// checkEntryURLs fetches entry URLs with bounded concurrency and reports
// those that do not answer, or answer with something else than their type.
func (s *Service) checkEntryURLs(ctx context.Context, urls []entryURL) []finding {
	var checks []entryURL
	for _, u := range urls {
		// A registry's url is a base for POST /search, not a document.
		if u.typ == ingest.TypeRegistry || u.typ == "application/ai-registry" {
			continue
		}
		checks = append(checks, u)
	}
	var out []finding
	if len(checks) > maxURLChecks {
		out = append(out, finding{Severity: sevInfo, Code: "url.not-checked", Pointer: "/entries",
			Message: fmt.Sprintf("%d entry URLs; the first %d were fetched", len(checks), maxURLChecks)})
		checks = checks[:maxURLChecks]
	}
	results := make([][]finding, len(checks))
	sem := make(chan struct{}, urlConcurrency)
	var wg sync.WaitGroup
	for i, u := range checks {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			results[i] = s.checkEntryURL(ctx, u)
		})
	}
	wg.Wait()
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// checkEntryURL fetches one entry URL.
func (s *Service) checkEntryURL(ctx context.Context, u entryURL) []finding {
	f := finding{Pointer: u.pointer, Identifier: u.id, URL: u.url}
	accept := u.typ + ", */*;q=0.1"
	if strings.Contains(u.typ, ";") {
		accept = "*/*"
	}
	res, err := s.fetcher.Get(ctx, u.url, accept)
	if err != nil {
		code, msg := describeFetchError(err)
		f.Severity, f.Code, f.Message = sevError, "url.unreachable", "the entry's url does not answer ("+code+"): "+msg
		if code == codeAddressForbidden {
			f.Code = "url.forbidden-address"
		}
		return []finding{f}
	}
	if res.Status >= 400 {
		f.Severity, f.Code, f.Message = sevError, "url.http-status", fmt.Sprintf("the entry's url answers HTTP %d", res.Status)
		if res.Status >= 500 {
			f.Severity = sevWarning
		}
		return []finding{f}
	}
	if msg := mediaMismatch(u.typ, res); msg != "" {
		f.Severity, f.Code, f.Message = sevWarning, "type.mismatch", msg
		return []finding{f}
	}
	return nil
}

// mediaMismatch says how a fetched artifact contradicts the entry's type,
// or returns "".
func mediaMismatch(typ string, res *web.FetchResult) string {
	ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	body := bytes.TrimSpace(res.Body)
	isHTML := ct == "text/html" || bytes.HasPrefix(bytes.ToLower(body), []byte("<!doctype html")) || bytes.HasPrefix(bytes.ToLower(body), []byte("<html"))
	switch {
	case typ == sources.TypeMCPServer:
		if _, err := sources.ParseServerCard(res.Body, res.URL); err != nil {
			return "type says MCP server card, but the url answers " + describeBody(ct, isHTML) + ": " + err.Error()
		}
	case typ == ingest.TypeA2AAgent || typ == "application/agent-card+json":
		var card struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(body, &card) != nil || card.Name == "" {
			return "type says A2A agent card, but the url answers " + describeBody(ct, isHTML) + " without a name"
		}
	case typ == ingest.TypeSkillZip:
		if !bytes.HasPrefix(res.Body, []byte("PK\x03\x04")) {
			return "type says a zip archive, but the url answers " + describeBody(ct, isHTML)
		}
	case typ == "application/agent-skills+gzip":
		if !bytes.HasPrefix(res.Body, []byte{0x1f, 0x8b}) {
			return "type says a gzip archive, but the url answers " + describeBody(ct, isHTML)
		}
	case strings.HasSuffix(strings.SplitN(typ, ";", 2)[0], "+json"):
		if !json.Valid(body) {
			return "type says JSON (" + typ + "), but the url answers " + describeBody(ct, isHTML)
		}
	case strings.HasPrefix(typ, "text/markdown"):
		if isHTML {
			return "type says markdown, but the url answers an HTML page"
		}
	}
	return ""
}

func describeBody(ct string, isHTML bool) string {
	switch {
	case isHTML:
		return "an HTML page"
	case ct != "":
		return "a " + ct + " body"
	}
	return "a body of unknown type"
}

// indexFindings reports what this registry holds of the domain: whether it
// is indexed, when and how each of its sources was last fetched, and which
// valid entries of the manifest just read are not held here.
func (s *Service) indexFindings(ctx context.Context, domain string, manifest *web.FetchResult, ids []string) []finding {
	var out []finding
	held, err := s.heldByPublisher(ctx, domain)
	if err != nil {
		s.log.Warn("doctor: index lookup", "domain", domain, "err", err)
		return []finding{{Severity: sevInfo, Code: "index.unavailable", Pointer: "", Message: "this registry's index could not be consulted"}}
	}
	if len(held) == 0 {
		return []finding{{Severity: sevInfo, Code: "index.not-indexed", Pointer: "",
			Message: "this registry holds no entries of " + domain + " yet"}}
	}
	type srcInfo struct {
		n    int
		prov kv.Provenance
	}
	bySource := map[string]*srcInfo{}
	for _, e := range held {
		si := bySource[e.Source]
		if si == nil {
			si = &srcInfo{prov: e.Provenance}
			bySource[e.Source] = si
		}
		si.n++
	}
	srcs := make([]string, 0, len(bySource))
	for k := range bySource {
		srcs = append(srcs, k)
	}
	sort.Strings(srcs)
	for _, src := range srcs {
		si := bySource[src]
		msg := fmt.Sprintf("%d entries held from %s", si.n, src)
		if !si.prov.FetchedAt.IsZero() {
			msg += ", last read " + si.prov.FetchedAt.UTC().Format(time.RFC3339)
		}
		if si.prov.HTTPStatus != 0 {
			msg += fmt.Sprintf(" (HTTP %d)", si.prov.HTTPStatus)
		}
		out = append(out, finding{Severity: sevInfo, Code: "index.last-fetch", Pointer: "", URL: src, Message: msg})
		if manifest != nil && src == manifest.URL && si.prov.SHA256 != "" && si.prov.SHA256 != manifest.SHA256 {
			out = append(out, finding{Severity: sevInfo, Code: "index.outdated", Pointer: "", URL: src,
				Message: "the manifest changed since this registry last read it; the next crawl picks the change up"})
		}
	}
	for _, id := range ids {
		if _, ok := held[id]; !ok {
			out = append(out, finding{Severity: sevInfo, Code: "index.missing-entry", Pointer: "", Identifier: id,
				Message: "valid in the manifest but not held by this registry yet"})
		}
	}
	return out
}

// heldByPublisher loads every public entry whose URN publisher is domain
// (exactly: publisher is a keyword facet, so subdomains are not included).
func (s *Service) heldByPublisher(ctx context.Context, domain string) (map[string]kv.Entry, error) {
	var ids []string
	var after []string
	for len(ids) < 5000 {
		page, err := s.ix.List(ctx, index.ListRequest{Publishers: []string{domain}, Size: 1000, After: after,
			OrderBy: []index.Order{{Field: index.OrderIdentifier}}})
		if err != nil {
			return nil, err
		}
		ids = append(ids, page.IDs...)
		if page.Next == nil || len(page.IDs) == 0 {
			break
		}
		after = page.Next
	}
	entries, err := s.db.GetEntries(ids)
	if err != nil {
		return nil, err
	}
	for id, e := range entries {
		if e.Owner != "" {
			delete(entries, id)
		}
	}
	return entries, nil
}
