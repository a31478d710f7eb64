package sources

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// ErrNotServerCard means a document is not an MCP server card.
var ErrNotServerCard = errors.New("not an MCP server card")

// Well-known locations of an MCP server card, in the order FindServerCard
// tries them after the endpoint's own <endpoint>/server-card.
const (
	WellKnownServerCard       = "/.well-known/mcp/server-card.json"
	WellKnownServerCardLegacy = "/.well-known/mcp.json" // early SEP-1649 text
)

// ServerCard is an MCP server card (SEP-2127), also read from the legacy
// SEP-1649 shape (serverInfo, transport.endpoint, instructions, tools).
type ServerCard struct {
	Schema      string   `json:"$schema,omitempty"`
	Name        string   `json:"name"`
	Title       string   `json:"title,omitempty"`
	Version     string   `json:"version,omitempty"`
	Description string   `json:"description,omitempty"`
	WebsiteURL  string   `json:"websiteUrl,omitempty"`
	Remotes     []Remote `json:"remotes,omitempty"`
	// Instructions and Tools come only from legacy cards; a SEP-2127 card
	// enumerates no tools (they are read live).
	Instructions string `json:"-"`
	Tools        []Tool `json:"-"`
	// Raw is the card as published, kept for the entry's data.
	Raw json.RawMessage `json:"-"`
}

// Remote is one way to reach the server.
type Remote struct {
	Type                      string   `json:"type"` // streamable-http or sse
	URL                       string   `json:"url"`  // variables substituted, absolute
	SupportedProtocolVersions []string `json:"supportedProtocolVersions,omitempty"`
}

// StreamableHTTPEndpoint is the first streamable-http remote, or "".
func (c *ServerCard) StreamableHTTPEndpoint() string {
	for _, r := range c.Remotes {
		if r.Type == "streamable-http" {
			return r.URL
		}
	}
	return ""
}

// ParseServerCard reads a server card. cardURL resolves relative remote
// URLs (legacy cards give "/mcp").
func ParseServerCard(body []byte, cardURL string) (*ServerCard, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrNotServerCard)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON value", ErrNotServerCard)
	}
	c := &ServerCard{
		Schema:       str(raw, "$schema"),
		Name:         strings.TrimSpace(str(raw, "name")),
		Title:        collapseSpace(str(raw, "title")),
		Version:      str(raw, "version"),
		Description:  strings.TrimSpace(str(raw, "description")),
		WebsiteURL:   str(raw, "websiteUrl"),
		Instructions: str(raw, "instructions"),
		Raw:          json.RawMessage(bytes.TrimSpace(body)),
	}
	if si := obj(raw["serverInfo"]); si != nil { // SEP-1649
		c.Name = firstNonEmpty(c.Name, str(si, "name"))
		c.Title = firstNonEmpty(c.Title, collapseSpace(str(si, "title")))
		if v := str(si, "version"); v != "" {
			c.Version = v
		}
	}
	if c.Name == "" {
		return nil, fmt.Errorf("%w: no name", ErrNotServerCard)
	}
	for _, r := range arr(raw["remotes"]) {
		m := obj(r)
		u := str(m, "url")
		vars := obj(m["variables"])
		for _, name := range sortedKeys(vars) {
			if def := str(obj(vars[name]), "default"); def != "" {
				u = strings.ReplaceAll(u, "{"+name+"}", def)
			}
		}
		if u == "" || strings.ContainsAny(u, "{}") {
			continue // a URL the client must fill in: not listable by us
		}
		abs, err := resolveAbs(cardURL, u)
		if err != nil {
			continue
		}
		c.Remotes = append(c.Remotes, Remote{Type: str(m, "type"), URL: abs, SupportedProtocolVersions: stringList(m["supportedProtocolVersions"])})
	}
	if t := obj(raw["transport"]); t != nil { // SEP-1649
		if ep := str(t, "endpoint"); ep != "" {
			if abs, err := resolveAbs(cardURL, ep); err == nil {
				typ := str(t, "type")
				if typ == "" || typ == "http" {
					typ = "streamable-http"
				}
				c.Remotes = append(c.Remotes, Remote{Type: typ, URL: abs})
			}
		}
	}
	for _, t := range arr(raw["tools"]) {
		b, err := json.Marshal(t)
		if err != nil {
			continue
		}
		if tool, ok := parseTool(b); ok {
			c.Tools = append(c.Tools, tool)
		}
	}
	return c, nil
}

// resolveAbs resolves ref against base and requires an http(s) result.
func resolveAbs(base, ref string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(ref))
	if err != nil {
		return "", err
	}
	if !u.IsAbs() {
		b, err := url.Parse(base)
		if err != nil || !b.IsAbs() {
			return "", errors.New("relative URL without an absolute base")
		}
		u = b.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("scheme %q", u.Scheme)
	}
	if u.Host == "" || u.User != nil {
		return "", errors.New("no host, or user information")
	}
	return u.String(), nil
}
