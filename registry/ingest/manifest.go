package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Media types with a special meaning to ingestion.
const (
	// TypeCatalog is a nested manifest: its entries are flattened into the
	// parent, it is never stored itself.
	TypeCatalog = "application/ai-catalog+json"
	// TypeRegistry is a peer registry (a federation upstream).
	TypeRegistry = "application/ai-registry+json"
	// TypeMCPServer is an MCP Server Card.
	TypeMCPServer = "application/mcp-server-card+json"
	// TypeA2AAgent is an A2A Agent Card.
	TypeA2AAgent = "application/a2a-agent-card+json"
	// TypeSkillZip is an Agent Skills archive.
	TypeSkillZip = "application/agent-skills+zip"
	// TypeSkillMarkdown is a single-file Agent Skill.
	TypeSkillMarkdown = `text/markdown; profile="urn:air:agent-skills"`
	// TypeOpenAPIOperation is one callable operation of a publisher's
	// OpenAPI description; its data carries method, path, servers, auth and
	// summary. ARD names no type for it; this is ardx's choice.
	TypeOpenAPIOperation = "application/openapi-operation+json"
	// TypeOpenAPI is a whole API description, the parent of its
	// operations (the OpenAPI Initiative's registered media type).
	TypeOpenAPI = "application/vnd.oai.openapi+json"
	// TypeMCPTool is one tool of an MCP server, linked to its server; its
	// data carries the endpoint, transport and tool name. ARD names no
	// type for it; this is ardx's choice.
	TypeMCPTool = "application/mcp-tool+json"
)

// MaxNestingDepth bounds how deep nested application/ai-catalog+json entries
// are followed; the top-level manifest is depth 0.
const MaxNestingDepth = 4

// maxIdentifierLen keeps identifiers usable as keys and query parameters
// (GET /reliability caps its entry parameter at 400 characters).
const maxIdentifierLen = 400

// typeAliases maps deprecated or variant media types to the one ardx stores,
// so that filters and facets on type see one value (ARD ADR-0008; field data
// in ard-spec issue #88 on media-type fragmentation).
var typeAliases = map[string]string{
	"application/mcp-server+json":                  TypeMCPServer,
	"application/ai-registry":                      TypeRegistry,
	"application/agent-card+json":                  TypeA2AAgent,
	`text/markdown; profile="urn:ai:agent-skills"`: TypeSkillMarkdown,
}

// knownTypes are accepted without a warning (the ARD conformance allow-list
// plus ardx's operation type).
var knownTypes = map[string]bool{
	TypeCatalog: true, TypeRegistry: true, TypeMCPServer: true, TypeA2AAgent: true,
	TypeSkillZip: true, "application/agent-skills+gzip": true, TypeSkillMarkdown: true,
	TypeOpenAPIOperation: true, TypeOpenAPI: true, TypeMCPTool: true,
}

// urnPattern is the ARD conformance regex: publisher, optional multi-segment
// namespace, name.
var urnPattern = regexp.MustCompile(`^urn:air:([a-zA-Z0-9.-]+)(?::([a-zA-Z0-9._:-]+))?:([a-zA-Z0-9._-]+)$`)

// Severity says what a Problem did to the thing it points at.
type Severity string

// Severities of a Problem.
const (
	// SeverityError: the entry (or, at the manifest level, the whole
	// document) was rejected.
	SeverityError Severity = "error"
	// SeverityWarning: kept, but the publisher should fix it.
	SeverityWarning Severity = "warning"
)

// Problem is one finding about a manifest document.
type Problem struct {
	Document   string   `json:"document,omitempty"`   // the manifest's path or URL, when reported by an ingest
	Pointer    string   `json:"pointer"`              // JSON pointer into the document ("" is the document)
	Identifier string   `json:"identifier,omitempty"` // the entry's identifier, when it has a usable one
	Severity   Severity `json:"severity"`
	Message    string   `json:"message"`
}

// String formats the problem for logs and summaries.
func (p Problem) String() string {
	s := string(p.Severity) + " at " + p.Pointer
	if p.Pointer == "" {
		s = string(p.Severity) + " at document root"
	}
	if p.Identifier != "" {
		s += " (" + p.Identifier + ")"
	}
	return s + ": " + p.Message
}

// Parsed is one valid entry of a manifest, normalised.
type Parsed struct {
	ID        string          // normalised identifier (urn:air:, lower-case publisher)
	Publisher string          // the identifier's publisher segment
	Type      string          // normalised media type
	Body      json.RawMessage // the entry object with identifier and type normalised, keys sorted
	Pointer   string          // where it sits in the document
}

// CatalogLink is a nested application/ai-catalog+json entry given by url,
// to be fetched as a manifest when ingesting from the web.
type CatalogLink struct {
	URL     string
	Pointer string
	Depth   int // nesting depth of the linked manifest
}

// Manifest is the result of parsing one manifest document.
type Manifest struct {
	// Shape is "ard" (v0.91 ard.json, no specVersion) or "ai-catalog"
	// (v0.9, with specVersion).
	Shape       string
	SpecVersion string
	HostName    string // host.displayName of a v0.9 manifest
	Entries     []Parsed
	Links       []CatalogLink
}

// ParseManifest validates and normalises one manifest document. Invalid
// entries are reported as error problems and left out; the valid rest is
// returned. Nested catalogs given inline (data) are flattened up to
// MaxNestingDepth; those given by url are returned as Links. A document that
// is not a manifest at all yields no entries and an error problem at the
// root or at /entries.
func ParseManifest(body []byte) (Manifest, []Problem) {
	p := &parser{seen: map[string]string{}}
	m := p.manifest(body, "", 0)
	return m, p.problems
}

type parser struct {
	problems []Problem
	seen     map[string]string // identifier -> pointer of its first occurrence
	out      Manifest
}

func (p *parser) add(sev Severity, ptr, id, format string, args ...any) {
	p.problems = append(p.problems, Problem{Pointer: ptr, Identifier: id, Severity: sev, Message: fmt.Sprintf(format, args...)})
}

func (p *parser) manifest(body []byte, ptr string, depth int) Manifest {
	var root map[string]json.RawMessage
	if err := strictObject(body, &root); err != nil {
		p.add(SeverityError, ptr, "", "manifest is not a JSON object: %v", err)
		return p.out
	}
	if depth == 0 {
		p.out.Shape = "ard"
	}
	if raw, ok := root["specVersion"]; ok {
		var sv string
		if json.Unmarshal(raw, &sv) != nil {
			p.add(SeverityWarning, ptr+"/specVersion", "", "specVersion must be a string")
		} else if sv != "1.0" {
			p.add(SeverityWarning, ptr+"/specVersion", "", "specVersion is %q; ARD v0.9 defines only \"1.0\"", sv)
		}
		if depth == 0 {
			p.out.Shape, p.out.SpecVersion = "ai-catalog", sv
		}
	}
	if raw, ok := root["host"]; ok {
		var host struct {
			DisplayName *string `json:"displayName"`
		}
		if json.Unmarshal(raw, &host) != nil || host.DisplayName == nil || strings.TrimSpace(*host.DisplayName) == "" {
			p.add(SeverityWarning, ptr+"/host", "", "host must be an object with a non-empty displayName")
		} else if depth == 0 {
			p.out.HostName = *host.DisplayName
		}
	}
	if _, ok := root["collections"]; ok {
		p.add(SeverityWarning, ptr+"/collections", "", "collections was removed from ARD; use nested application/ai-catalog+json entries (ignored)")
	}
	raw, ok := root["entries"]
	if !ok {
		p.add(SeverityError, ptr+"/entries", "", "entries is required")
		return p.out
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
		p.add(SeverityError, ptr+"/entries", "", "entries must be an array")
		return p.out
	}
	for i, e := range entries {
		p.entry(e, fmt.Sprintf("%s/entries/%d", ptr, i), depth)
	}
	return p.out
}

// strictObject decodes an object and refuses trailing data, so that a
// concatenation of documents is not silently half-read.
func strictObject(data []byte, v *map[string]json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if *v == nil {
		return fmt.Errorf("null")
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON value")
	}
	if _, err := dec.Token(); err == nil {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

func (p *parser) entry(raw json.RawMessage, ptr string, depth int) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		p.add(SeverityError, ptr, "", "entry must be a JSON object")
		return
	}
	reject := func(id, format string, args ...any) { p.add(SeverityError, ptr, id, format, args...) }
	warn := func(member, id, format string, args ...any) { p.add(SeverityWarning, ptr+member, id, format, args...) }

	rawID, ok := str(obj, "identifier")
	if !ok {
		reject("", "identifier is required and must be a string")
		return
	}
	id, pub, msg := NormalizeIdentifier(rawID)
	if msg != "" {
		reject(strings.TrimSpace(rawID), "identifier: %s", msg)
		return
	}
	if id != rawID {
		warn("/identifier", id, "identifier normalised from %q", rawID)
	}
	if first, dup := p.seen[id]; dup {
		reject(id, "duplicate identifier; first at %s", first)
		return
	}
	if dn, ok := str(obj, "displayName"); !ok || strings.TrimSpace(dn) == "" {
		reject(id, "displayName is required and must be a non-empty string")
		return
	}
	rawType, ok := str(obj, "type")
	if !ok || strings.TrimSpace(rawType) == "" {
		reject(id, "type is required and must be a non-empty string")
		return
	}
	typ, msg := NormalizeType(rawType)
	if msg != "" {
		reject(id, "type: %s", msg)
		return
	}
	if typ != rawType {
		if alias := typeAliases[strings.ToLower(strings.TrimSpace(rawType))]; alias != "" {
			warn("/type", id, "deprecated media type %q; use %q", rawType, typ)
		}
	}
	if !knownTypes[typ] && !strings.HasPrefix(typ, "application/") {
		warn("/type", id, "unrecognised media type %q", typ)
	}
	hasURL, hasData := present(obj, "url"), present(obj, "data")
	switch {
	case hasURL && hasData:
		reject(id, "exactly one of url and data is allowed; both are present")
		return
	case !hasURL && !hasData:
		reject(id, "exactly one of url and data is required; neither is present")
		return
	}
	var entryURL string
	if hasURL {
		u, ok := str(obj, "url")
		if !ok {
			reject(id, "url must be a string")
			return
		}
		if msg := checkHTTPURL(u); msg != "" {
			reject(id, "url: %s", msg)
			return
		}
		entryURL = u
	}
	for _, member := range []string{"description", "version"} {
		if present(obj, member) {
			if _, ok := str(obj, member); !ok {
				reject(id, "%s must be a string", member)
				return
			}
		}
	}
	if present(obj, "updatedAt") {
		if s, ok := str(obj, "updatedAt"); !ok {
			reject(id, "updatedAt must be a string")
			return
		} else if _, err := time.Parse(time.RFC3339, s); err != nil {
			warn("/updatedAt", id, "updatedAt is not an RFC 3339 date-time")
		}
	}
	for _, member := range []string{"tags", "capabilities"} {
		if present(obj, member) {
			if _, ok := stringArray(obj[member]); !ok {
				reject(id, "%s must be an array of strings", member)
				return
			}
		}
	}
	if present(obj, "representativeQueries") {
		qs, ok := stringArray(obj["representativeQueries"])
		if !ok {
			reject(id, "representativeQueries must be an array of strings")
			return
		}
		if len(qs) < 2 || len(qs) > 5 {
			warn("/representativeQueries", id, "representativeQueries should hold 2 to 5 queries, not %d", len(qs))
		}
	} else {
		warn("/representativeQueries", id, "no representativeQueries: search engines build their index from them")
	}
	if present(obj, "metadata") {
		if msg := checkMetadata(obj["metadata"]); msg != "" {
			reject(id, "metadata: %s", msg)
			return
		}
	}
	if present(obj, "trustManifest") {
		msg, mismatch := checkTrustManifest(obj["trustManifest"], pub)
		if msg != "" {
			reject(id, "trustManifest: %s", msg)
			return
		}
		if mismatch != "" {
			warn("/trustManifest/identity", id, "%s", mismatch)
		}
	}
	if atID, ok := str(obj, "@id"); ok && atID != rawID && atID != id {
		warn("/@id", id, "@id %q differs from identifier", atID)
	}
	p.seen[id] = ptr

	if typ == TypeCatalog {
		if depth+1 > MaxNestingDepth {
			reject(id, "nested catalog deeper than %d levels", MaxNestingDepth)
			return
		}
		if hasData {
			p.manifest(obj["data"], ptr+"/data", depth+1)
		} else {
			p.out.Links = append(p.out.Links, CatalogLink{URL: entryURL, Pointer: ptr, Depth: depth + 1})
		}
		return
	}

	idJSON, _ := json.Marshal(id)
	typeJSON, _ := json.Marshal(typ)
	obj["identifier"], obj["type"] = idJSON, typeJSON
	body, err := marshalNoEscape(obj)
	if err != nil {
		reject(id, "entry cannot be re-encoded: %v", err)
		return
	}
	p.out.Entries = append(p.out.Entries, Parsed{ID: id, Publisher: pub, Type: typ, Body: body, Pointer: ptr})
}

// NormalizeIdentifier checks an entry identifier against the ARD URN rules
// and returns it normalised: surrounding space trimmed, the legacy urn:ai:
// prefix (and any letter case of "urn:air:") rewritten to urn:air:, and the
// publisher lower-cased because domain names are case-insensitive. msg is
// non-empty when the identifier is invalid.
func NormalizeIdentifier(raw string) (id, publisher, msg string) {
	s := strings.TrimSpace(raw)
	if len(s) > maxIdentifierLen {
		return "", "", fmt.Sprintf("longer than %d characters", maxIdentifierLen)
	}
	lower := strings.ToLower(s)
	switch {
	case strings.HasPrefix(lower, "urn:air:"):
		s = "urn:air:" + s[len("urn:air:"):]
	case strings.HasPrefix(lower, "urn:ai:"):
		s = "urn:air:" + s[len("urn:ai:"):]
	default:
		return "", "", fmt.Sprintf("%q is not a urn:air:<publisher>:<namespace>:<name> URN", s)
	}
	m := urnPattern.FindStringSubmatch(s)
	if m == nil {
		return "", "", fmt.Sprintf("%q is not a urn:air:<publisher>:<namespace>:<name> URN", s)
	}
	publisher = strings.ToLower(m[1])
	if msg := checkPublisher(publisher); msg != "" {
		return "", "", msg
	}
	if m[2] != "" && (strings.Contains(m[2], "::") || strings.HasSuffix(m[2], ":")) {
		return "", "", "empty namespace segment"
	}
	return "urn:air:" + publisher + s[len("urn:air:")+len(m[1]):], publisher, ""
}

// checkPublisher requires a fully qualified domain name: dot-separated
// labels of letters, digits and inner hyphens, and never localhost
// (ARD ADR-0003).
func checkPublisher(pub string) string {
	if pub == "localhost" {
		return "publisher localhost is not allowed; use a domain you control (or *.localhost for sandboxes)"
	}
	labels := strings.Split(pub, ".")
	if len(labels) < 2 {
		return fmt.Sprintf("publisher %q is not a fully qualified domain name", pub)
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return fmt.Sprintf("publisher %q is not a valid domain name", pub)
		}
	}
	return ""
}

// NormalizeType lower-cases and trims a media type, puts its parameters in
// canonical form, and maps aliases to the type ardx stores. msg is non-empty
// when the value is not a media type at all.
func NormalizeType(raw string) (typ, msg string) {
	s := strings.ToLower(strings.TrimSpace(raw))
	base, params, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(base, "/") {
		return "", fmt.Sprintf("%q is not a media type", raw)
	}
	s = mime.FormatMediaType(base, params)
	if s == "" {
		return "", fmt.Sprintf("%q is not a media type", raw)
	}
	if alias, ok := typeAliases[s]; ok {
		s = alias
	}
	return s, ""
}

func checkHTTPURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "not a URL"
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Sprintf("scheme %q; an absolute http(s) URL is required", u.Scheme)
	}
	if u.Host == "" {
		return "no host"
	}
	return ""
}

func checkMetadata(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return "must be an object"
	}
	for k, v := range m {
		v = bytes.TrimSpace(v)
		if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
			return fmt.Sprintf("member %q must be a scalar (string, number, boolean or null)", k)
		}
	}
	return ""
}

// checkTrustManifest validates the shape; mismatch is set when the identity's
// trust domain does not align with the URN publisher (a warning: ARD says
// registries SHOULD verify, and ardx cannot verify signatures yet).
func checkTrustManifest(raw json.RawMessage, publisher string) (msg, mismatch string) {
	var tm map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tm); err != nil || tm == nil {
		return "must be an object", ""
	}
	identity, ok := str(tm, "identity")
	if !ok || strings.TrimSpace(identity) == "" {
		return "identity is required and must be a non-empty string", ""
	}
	if present(tm, "identityType") {
		if _, ok := str(tm, "identityType"); !ok {
			return "identityType must be a string", ""
		}
	}
	if present(tm, "attestations") {
		var atts []map[string]json.RawMessage
		if err := json.Unmarshal(tm["attestations"], &atts); err != nil {
			return "attestations must be an array of objects", ""
		}
		for i, a := range atts {
			if t, ok := str(a, "type"); !ok || t == "" {
				return fmt.Sprintf("attestations[%d].type is required and must be a string", i), ""
			}
		}
	}
	if host := identityDomain(identity); host != "" && !domainWithin(host, publisher) && !domainWithin(publisher, host) {
		mismatch = fmt.Sprintf("identity trust domain %q does not align with publisher %q", host, publisher)
	}
	return "", mismatch
}

// identityDomain extracts the trust domain of a SPIFFE ID, did:web DID or
// HTTPS URI; "" when the form is not one of those.
func identityDomain(identity string) string {
	switch {
	case strings.HasPrefix(identity, "did:web:"):
		host, _, _ := strings.Cut(strings.TrimPrefix(identity, "did:web:"), ":")
		host, _ = url.PathUnescape(host)
		h, _, _ := strings.Cut(host, "%3A")
		return hostOnly(h)
	case strings.HasPrefix(identity, "spiffe://"), strings.HasPrefix(identity, "https://"), strings.HasPrefix(identity, "http://"):
		u, err := url.Parse(identity)
		if err != nil {
			return ""
		}
		return hostOnly(u.Hostname())
	}
	return ""
}

func hostOnly(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// domainWithin reports whether name is domain or one of its subdomains.
func domainWithin(name, domain string) bool {
	name, domain = hostOnly(name), hostOnly(domain)
	return domain != "" && (name == domain || strings.HasSuffix(name, "."+domain))
}

func present(obj map[string]json.RawMessage, key string) bool {
	v, ok := obj[key]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func str(obj map[string]json.RawMessage, key string) (string, bool) {
	v, ok := obj[key]
	if !ok {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

func stringArray(raw json.RawMessage) ([]string, bool) {
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil || ss == nil {
		return nil, false
	}
	return ss, true
}

// marshalNoEscape encodes v without HTML escaping so that text such as
// "<tool>" is stored as the publisher wrote it.
func marshalNoEscape(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
