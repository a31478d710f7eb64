package sources

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ardx-dev/ardx/web"
)

// Media types of generated entries. The first four equal the constants of
// registry/ingest; the others are ardx's choices where ARD names no type.
const (
	// TypeOpenAPIOperation is one callable operation of an API description.
	TypeOpenAPIOperation = "application/openapi-operation+json"
	// TypeOpenAPI is a whole API description (the parent of its
	// operations); it is the OpenAPI Initiative's registered media type.
	TypeOpenAPI = "application/vnd.oai.openapi+json"
	// TypeMCPServer is an MCP server card.
	TypeMCPServer = "application/mcp-server-card+json"
	// TypeMCPTool is one tool of a live MCP server, linked to its server.
	TypeMCPTool = "application/mcp-tool+json"
	// TypeA2AAgent is an A2A agent card.
	TypeA2AAgent = "application/a2a-agent-card+json"
	// TypeCatalog is an ARD manifest (nested catalog).
	TypeCatalog = "application/ai-catalog+json"
	// TypeSkillZip is an Agent Skills archive.
	TypeSkillZip = "application/agent-skills+zip"
	// TypeSkillMarkdown is a single-file Agent Skill.
	TypeSkillMarkdown = `text/markdown; profile="urn:air:agent-skills"`
)

// Bounds on generated text, so one verbose publisher cannot produce entries
// that dominate the index.
const (
	maxSlugLen        = 120
	maxQueryLen       = 200
	maxQueries        = 5
	maxDescriptionLen = 4000
)

// Entry is one generated ARD entry. It marshals to the ARD entry shape; Data
// holds a typed value (*OperationData, *ToolData, ...) or a raw card.
type Entry struct {
	Identifier            string         `json:"identifier"`
	DisplayName           string         `json:"displayName"`
	Type                  string         `json:"type"`
	URL                   string         `json:"url,omitempty"`
	Data                  any            `json:"data,omitempty"`
	Description           string         `json:"description,omitempty"`
	Version               string         `json:"version,omitempty"`
	Tags                  []string       `json:"tags,omitempty"`
	Capabilities          []string       `json:"capabilities,omitempty"`
	RepresentativeQueries []string       `json:"representativeQueries,omitempty"`
	Metadata              map[string]any `json:"metadata,omitempty"`
}

// Provenance is the fetch that produced an entry.
type Provenance struct {
	URL        string    // the final URL fetched, after redirects
	Method     string    // "GET", or the JSON-RPC method for MCP exchanges ("POST tools/list")
	FetchedAt  time.Time // when the response was read
	HTTPStatus int
	SHA256     string // hex SHA-256 of the response body
}

// ProvenanceOf records a completed fetch.
func ProvenanceOf(res *web.FetchResult, method string) Provenance {
	if method == "" {
		method = "GET"
	}
	return Provenance{URL: res.URL, Method: method, FetchedAt: res.FetchedAt, HTTPStatus: res.Status, SHA256: res.SHA256}
}

// metadata is the provenance as flat ARD metadata scalars, plus the kind of
// source read ("openapi", "mcp-card", "mcp-tools", "llms.txt").
func (p Provenance) metadata(kind string) map[string]any {
	m := map[string]any{
		"source.kind":    kind,
		"source.url":     p.URL,
		"source.sha256":  p.SHA256,
		"source.request": p.Method,
	}
	if !p.FetchedAt.IsZero() {
		m["source.fetchedAt"] = p.FetchedAt.UTC().Format(time.RFC3339)
	}
	if p.HTTPStatus != 0 {
		m["source.httpStatus"] = p.HTTPStatus
	}
	return m
}

// Result is what an *Entries function produces: entries in document order
// (the parent first) and notes about what the source lacked, such as fewer
// than two representative queries.
type Result struct {
	Entries  []Entry
	Warnings []string
}

// normalizeDomain checks that domain can anchor a urn:air: identifier (a
// fully qualified domain name, never localhost) and lower-cases it.
func normalizeDomain(domain string) (string, bool) {
	d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(domain)), ".")
	if d == "" || d == "localhost" || len(d) > 253 {
		return "", false
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return "", false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return "", false
			}
		}
	}
	return d, true
}

// domainOf is the host of rawURL, or "" when it has none.
func domainOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// slug maps s onto the URN name charset [a-zA-Z0-9._-]: other runs become
// one '-', case is kept (operationIds are camelCase by convention and read
// better that way), and the result is bounded.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		if ok && r != '-' {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-.")
	if len(out) > maxSlugLen {
		out = strings.Trim(out[:maxSlugLen], "-.")
	}
	return out
}

// idSet hands out identifiers unique within one generated document: a
// second use of a name gets "-2", "-3", ...
type idSet map[string]bool

func (s idSet) unique(prefix, name string) string {
	if name == "" {
		name = "unnamed"
	}
	id := prefix + name
	for n := 2; s[id]; n++ {
		id = prefix + name + "-" + strconv.Itoa(n)
	}
	s[id] = true
	return id
}

// queries collects representative queries from source text in the order
// given: trimmed, whitespace collapsed, deduplicated without regard to case,
// bounded in length and count. Nothing is made up: a source with one usable
// phrase yields one query.
func queries(candidates ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range candidates {
		c = collapseSpace(c)
		c = strings.TrimRight(c, ".:;, ")
		if c == "" || utf8.RuneCountInString(c) > maxQueryLen {
			continue
		}
		k := strings.ToLower(c)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, c)
		if len(out) == maxQueries {
			break
		}
	}
	return out
}

// firstSentence is the text up to the first sentence end (". ", "! ", "? ",
// or a blank line), without markdown line breaks.
func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	s = collapseSpace(s)
	for i := 0; i+1 < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?') && s[i+1] == ' ' {
			// "e.g. " and "i.e. " do not end a sentence.
			if i >= 3 && (strings.HasSuffix(s[:i+1], "e.g.") || strings.HasSuffix(s[:i+1], "i.e.")) {
				continue
			}
			return s[:i+1]
		}
	}
	return s
}

// collapseSpace trims s and folds every whitespace run into one space;
// control characters are dropped.
func collapseSpace(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r):
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// clip bounds a description at a rune boundary.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + "…"
}

// dedupeStrings drops empty and repeated strings, keeping order.
func dedupeStrings(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// warnQueries notes an entry whose source gave fewer than two queries (ARD
// conformance warns below two; ardx never invents the missing ones).
func warnQueries(r *Result, e Entry) {
	if n := len(e.RepresentativeQueries); n < 2 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: the source text yields %d representative quer%s (ARD asks for 2 to 5); none were invented", e.Identifier, n, map[bool]string{true: "y", false: "ies"}[n == 1]))
	}
}
