package sources

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ardx-dev/ardx/web"
)

// Protocol versions the client speaks.
const (
	// ProtocolStateless is the stateless revision (SEP-2575): no
	// initialize, no session; server/discover and per-request _meta.
	ProtocolStateless = "2026-07-28"
	// ProtocolLegacy is the version offered in initialize when the server
	// does not speak the stateless revision.
	ProtocolLegacy = "2025-11-25"
)

// Handshakes recorded in ToolList.Handshake.
const (
	HandshakeDiscover   = "server/discover"
	HandshakeInitialize = "initialize"
)

// Bounds on one tool listing.
const (
	maxToolPages = 100
	maxTools     = 5000
)

// Tool is one MCP tool as listed by tools/list.
type Tool struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
}

// ToolAnnotations are the server's hints about a tool's behaviour. They are
// advisory: a server can claim anything.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// parseTool decodes one tool object; a tool without a name is dropped.
func parseTool(b []byte) (Tool, bool) {
	var t Tool
	if json.Unmarshal(b, &t) != nil || strings.TrimSpace(t.Name) == "" {
		return Tool{}, false
	}
	t.Name = strings.TrimSpace(t.Name)
	if bytes.Equal(t.InputSchema, []byte("null")) {
		t.InputSchema = nil
	}
	if bytes.Equal(t.OutputSchema, []byte("null")) {
		t.OutputSchema = nil
	}
	return t, true
}

// ListedTool is a tool and the tools/list exchange it was read from.
type ListedTool struct {
	Tool
	Source Provenance
}

// ToolList is what an MCP server told us about itself over Streamable HTTP.
type ToolList struct {
	Endpoint        string
	Transport       string // always "streamable-http"
	Handshake       string // HandshakeDiscover or HandshakeInitialize
	ProtocolVersion string
	ServerName      string
	ServerTitle     string
	ServerVersion   string
	// Instructions are the server's instructions to the model, kept as
	// sent: the tool-safety scanner reads them.
	Instructions string
	// AuthRequired is set when the server answered 401; WWWAuthenticate is
	// its challenge (with the OAuth protected-resource metadata URL). A
	// server that needs a token is a finding, not a failure.
	AuthRequired    bool
	WWWAuthenticate string
	Tools           []ListedTool
	// Handshake is the exchange that told us the server's identity
	// (server/discover or initialize).
	HandshakeSource Provenance
	Warnings        []string
}

// HTTPStatusError is an MCP exchange answered with an unexpected status and
// no JSON-RPC body.
type HTTPStatusError struct {
	URL    string
	Method string
	Status int
}

func (e *HTTPStatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d", e.Method, e.URL, e.Status)
}

// errAuth carries a 401 through the handshake code.
type errAuth struct {
	challenge string
	source    Provenance
}

func (e *errAuth) Error() string { return "authentication required" }

// mcpSession is the state of one listing.
type mcpSession struct {
	r         *Reader
	endpoint  string
	stateless bool
	version   string // sent in MCP-Protocol-Version once known
	sessionID string
	nextID    int64
}

// ListTools reads an MCP server's tool list over Streamable HTTP. It tries
// the stateless revision's server/discover first and falls back to the
// initialize / notifications/initialized / tools/list lifecycle when the
// server answers -32601 (or otherwise shows it predates the revision),
// following nextCursor. A 401 is returned as a ToolList with AuthRequired,
// not an error.
func (r *Reader) ListTools(ctx context.Context, endpoint string) (*ToolList, error) {
	tl := &ToolList{Endpoint: endpoint, Transport: "streamable-http"}
	s := &mcpSession{r: r, endpoint: endpoint}
	err := s.discover(ctx, tl)
	if err == nil {
		err = s.listTools(ctx, tl)
		var rpcErr *RPCError
		if errors.As(err, &rpcErr) && rpcErr.Code == CodeUnsupportedProtocolVersion {
			// A stateful server may answer discover but refuse stateless
			// requests: use its legacy lifecycle instead.
			tl.Warnings = append(tl.Warnings, "server/discover succeeded but tools/list was refused for "+ProtocolStateless+"; used initialize")
			tl.Tools = nil
			err = errFallback
		}
	}
	if errors.Is(err, errFallback) {
		s = &mcpSession{r: r, endpoint: endpoint, nextID: s.nextID}
		err = s.initialize(ctx, tl)
		if err == nil {
			err = s.listTools(ctx, tl)
			s.close(ctx)
		}
	}
	var auth *errAuth
	if errors.As(err, &auth) {
		tl.AuthRequired, tl.WWWAuthenticate = true, auth.challenge
		if tl.HandshakeSource.URL == "" {
			tl.HandshakeSource = auth.source // the 401 is what we know
		}
		return tl, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sources: list tools of %s: %w", endpoint, err)
	}
	return tl, nil
}

var errFallback = errors.New("fall back to initialize")

// requestMeta is the stateless revision's per-request _meta.
func (r *Reader) requestMeta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    ProtocolStateless,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         r.clientInfo(),
	}
}

func (r *Reader) clientInfo() map[string]any {
	return map[string]any{"name": "ardx", "version": r.version}
}

// discover sends server/discover; errFallback means use initialize.
func (s *mcpSession) discover(ctx context.Context, tl *ToolList) error {
	s.stateless, s.version = true, ProtocolStateless
	resp, prov, err := s.call(ctx, "server/discover", map[string]any{"_meta": s.r.requestMeta()})
	var statusErr *HTTPStatusError
	var rpcErr *RPCError
	switch {
	case errors.As(err, &rpcErr):
		// -32601 is the documented signal; other errors (unsupported
		// version, invalid request) come from servers that validate
		// before dispatching, and mean the same here.
		return errFallback
	case errors.As(err, &statusErr) && statusErr.Status >= 400 && statusErr.Status < 500 &&
		statusErr.Status != http.StatusForbidden && statusErr.Status != http.StatusTooManyRequests:
		// Older servers reject an unknown method or header with a bare 4xx.
		return errFallback
	case err != nil:
		return err
	}
	var res struct {
		SupportedVersions []string       `json:"supportedVersions"`
		Instructions      string         `json:"instructions"`
		ServerInfo        *serverInfo    `json:"serverInfo"`
		Meta              map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return fmt.Errorf("server/discover result: %w", err)
	}
	if !contains(res.SupportedVersions, ProtocolStateless) {
		return errFallback
	}
	si := res.ServerInfo
	if si == nil {
		if b, err := json.Marshal(res.Meta["io.modelcontextprotocol/serverInfo"]); err == nil {
			_ = json.Unmarshal(b, &si)
		}
	}
	tl.Handshake, tl.ProtocolVersion, tl.Instructions, tl.HandshakeSource = HandshakeDiscover, ProtocolStateless, res.Instructions, prov
	if si != nil {
		tl.ServerName, tl.ServerTitle, tl.ServerVersion = si.Name, si.Title, si.Version
	}
	return nil
}

type serverInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title"`
	Version string `json:"version"`
}

// initialize runs the legacy lifecycle up to notifications/initialized.
func (s *mcpSession) initialize(ctx context.Context, tl *ToolList) error {
	s.stateless, s.version = false, ""
	resp, prov, err := s.call(ctx, "initialize", map[string]any{
		"protocolVersion": ProtocolLegacy,
		"capabilities":    map[string]any{},
		"clientInfo":      s.r.clientInfo(),
	})
	if err != nil {
		return err
	}
	var res struct {
		ProtocolVersion string      `json:"protocolVersion"`
		ServerInfo      *serverInfo `json:"serverInfo"`
		Instructions    string      `json:"instructions"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return fmt.Errorf("initialize result: %w", err)
	}
	s.version = firstNonEmpty(res.ProtocolVersion, ProtocolLegacy)
	tl.Handshake, tl.ProtocolVersion, tl.Instructions, tl.HandshakeSource = HandshakeInitialize, s.version, res.Instructions, prov
	if si := res.ServerInfo; si != nil {
		tl.ServerName, tl.ServerTitle, tl.ServerVersion = si.Name, si.Title, si.Version
	}
	return s.notify(ctx, "notifications/initialized")
}

// listTools pages through tools/list.
func (s *mcpSession) listTools(ctx context.Context, tl *ToolList) error {
	cursor := ""
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page == maxToolPages {
			tl.Warnings = append(tl.Warnings, fmt.Sprintf("stopped after %d pages of tools/list", maxToolPages))
			return nil
		}
		params := map[string]any{}
		if s.stateless {
			params["_meta"] = s.r.requestMeta()
		}
		if cursor != "" {
			params["cursor"] = cursor
		}
		resp, prov, err := s.call(ctx, "tools/list", params)
		if err != nil {
			return err
		}
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			return fmt.Errorf("tools/list result: %w", err)
		}
		for _, raw := range res.Tools {
			t, ok := parseTool(raw)
			if !ok {
				tl.Warnings = append(tl.Warnings, "a tool without a name was skipped")
				continue
			}
			if len(tl.Tools) == maxTools {
				tl.Warnings = append(tl.Warnings, fmt.Sprintf("more than %d tools; the rest were skipped", maxTools))
				return nil
			}
			tl.Tools = append(tl.Tools, ListedTool{Tool: t, Source: prov})
		}
		if res.NextCursor == "" {
			return nil
		}
		if seen[res.NextCursor] {
			tl.Warnings = append(tl.Warnings, "tools/list repeated a cursor; stopped")
			return nil
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
}

// call sends one JSON-RPC request and returns its response. A JSON-RPC error
// is returned as *RPCError, a 401 as *errAuth.
func (s *mcpSession) call(ctx context.Context, method string, params any) (*rpcResponse, Provenance, error) {
	s.nextID++
	id := s.nextID
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, Provenance{}, err
	}
	res, err := s.post(ctx, method, body)
	if err != nil {
		return nil, Provenance{}, err
	}
	prov := ProvenanceOf(res, "POST "+method)
	if sid := res.Header.Get("Mcp-Session-Id"); sid != "" && !s.stateless {
		s.sessionID = sid
	}
	if res.Status == http.StatusUnauthorized {
		return nil, prov, &errAuth{challenge: res.Header.Get("WWW-Authenticate"), source: prov}
	}
	resp, decErr := decodeRPCResponse(res.Header.Get("Content-Type"), res.Body, id)
	if res.Status < 200 || res.Status > 299 {
		if decErr == nil && resp.Error != nil {
			return nil, prov, resp.Error // an error object on a 4xx is still the server's answer
		}
		return nil, prov, &HTTPStatusError{URL: s.endpoint, Method: "POST " + method, Status: res.Status}
	}
	if decErr != nil {
		return nil, prov, fmt.Errorf("POST %s: %w", method, decErr)
	}
	if resp.Error != nil {
		return nil, prov, resp.Error
	}
	return resp, prov, nil
}

// notify sends a notification; the server answers 202 with no body.
func (s *mcpSession) notify(ctx context.Context, method string) error {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method})
	res, err := s.post(ctx, method, body)
	if err != nil {
		return err
	}
	if res.Status == http.StatusUnauthorized {
		return &errAuth{challenge: res.Header.Get("WWW-Authenticate"), source: ProvenanceOf(res, "POST "+method)}
	}
	if res.Status < 200 || res.Status > 299 {
		return &HTTPStatusError{URL: s.endpoint, Method: "POST " + method, Status: res.Status}
	}
	return nil
}

func (s *mcpSession) post(ctx context.Context, method string, body []byte) (*web.FetchResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", web.ErrBadURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.version != "" && method != "initialize" {
		req.Header.Set("MCP-Protocol-Version", s.version)
	}
	if s.stateless {
		req.Header.Set("MCP-Protocol-Version", ProtocolStateless)
		req.Header.Set("Mcp-Method", method)
	}
	if s.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", s.sessionID)
	}
	return s.r.fetch.Do(req)
}

// close ends a legacy session; servers that do not allow it answer 405,
// which is fine.
func (s *mcpSession) close(ctx context.Context) {
	if s.sessionID == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.endpoint, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", s.sessionID)
	if s.version != "" {
		req.Header.Set("MCP-Protocol-Version", s.version)
	}
	if _, err := s.r.fetch.Do(req); err != nil {
		s.r.log.Debug("closing MCP session", "endpoint", s.endpoint, "err", err)
	}
}

func contains(ss []string, s string) bool {
	for _, v := range ss {
		if v == s {
			return true
		}
	}
	return false
}
