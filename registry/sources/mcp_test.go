package sources_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ardx-dev/ardx/registry/sources"
)

type queryArgs struct {
	Q string `json:"q" jsonschema:"what to look for"`
}

// newSDKServer is a real MCP server (the official Go SDK) with three tools,
// two per page so the client must follow nextCursor.
func newSDKServer(tb testing.TB, stateless, jsonResponse bool) http.Handler {
	tb.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-notes", Title: "SDK Notes", Version: "1.2.3"},
		&mcp.ServerOptions{Instructions: "Always search before you create.", PageSize: 2})
	handler := func(context.Context, *mcp.CallToolRequest, queryArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "search_notes", Title: "Search notes", Description: "Search notes by keyword. Returns at most 20."}, handler)
	mcp.AddTool(s, &mcp.Tool{Name: "create_note", Description: "Create a note.", Annotations: &mcp.ToolAnnotations{Title: "New note", DestructiveHint: ptr(false)}}, handler)
	mcp.AddTool(s, &mcp.Tool{Name: "delete_note", Description: "Delete a note for good."}, handler)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: stateless, JSONResponse: jsonResponse, DisableLocalhostProtection: true})
}

func ptr[T any](v T) *T { return &v }

// recorder notes each JSON-RPC method and a few headers the client sent.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (rec *recorder) wrap(next http.Handler, refuseDiscover bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		rec.mu.Lock()
		rec.calls = append(rec.calls, fmt.Sprintf("%s %s session=%t", r.Method, msg.Method, r.Header.Get("Mcp-Session-Id") != ""))
		rec.mu.Unlock()
		if refuseDiscover && msg.Method == "server/discover" {
			// What a server predating the stateless revision answers.
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, msg.ID)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func toolNames(tl *sources.ToolList) []string {
	var out []string
	for _, t := range tl.Tools {
		out = append(out, t.Name)
	}
	return out
}

func TestListToolsSDK(t *testing.T) {
	tests := []struct {
		name                     string
		stateless, json, refuse  bool
		wantHandshake, wantFirst string
		wantSession              bool
	}{
		{"legacy handshake after -32601, SSE responses", false, false, true, sources.HandshakeInitialize, "POST server/discover session=false", true},
		{"legacy handshake after -32601, JSON responses", false, true, true, sources.HandshakeInitialize, "POST server/discover session=false", true},
		{"stateful SDK server answering discover", false, false, false, sources.HandshakeInitialize, "POST server/discover session=false", true},
		{"stateless SDK server", true, true, false, sources.HandshakeDiscover, "POST server/discover session=false", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			r := newTestReader(t, hostMux{"mcp.notes.example": rec.wrap(newSDKServer(t, tc.stateless, tc.json), tc.refuse)})
			tl, err := r.ListTools(context.Background(), "https://mcp.notes.example/mcp")
			if err != nil {
				t.Fatalf("%v; calls %q", err, rec.calls)
			}
			if tl.Handshake != tc.wantHandshake {
				t.Errorf("handshake %q, want %q; calls %q", tl.Handshake, tc.wantHandshake, rec.calls)
			}
			if got := strings.Join(toolNames(tl), ","); got != "create_note,delete_note,search_notes" {
				t.Errorf("tools %s; calls %q", got, rec.calls)
			}
			if tl.Instructions != "Always search before you create." || tl.ServerName != "sdk-notes" || tl.ServerVersion != "1.2.3" {
				t.Errorf("server %q %q %q", tl.ServerName, tl.ServerVersion, tl.Instructions)
			}
			if rec.calls[0] != tc.wantFirst {
				t.Errorf("first call %q", rec.calls[0])
			}
			var lists, sessions int
			for _, c := range rec.calls {
				if strings.Contains(c, "tools/list") {
					lists++
					if strings.HasSuffix(c, "session=true") {
						sessions++
					}
				}
			}
			if lists < 2 {
				t.Errorf("%d tools/list calls; nextCursor not followed? %q", lists, rec.calls)
			}
			if tc.wantSession != (sessions == lists) || !tc.wantSession && sessions != 0 {
				t.Errorf("session id on %d of %d tools/list calls; want all=%t", sessions, lists, tc.wantSession)
			}
			for _, tool := range tl.Tools {
				if tool.Source.URL != "https://mcp.notes.example/mcp" || tool.Source.Method != "POST tools/list" || len(tool.Source.SHA256) != 64 {
					t.Errorf("%s provenance %+v", tool.Name, tool.Source)
				}
				if len(tool.InputSchema) == 0 {
					t.Errorf("%s has no input schema", tool.Name)
				}
			}
			res, err := sources.MCPEntries(&sources.MCPServer{Live: tl}, "")
			if err != nil {
				t.Fatal(err)
			}
			checkARD(t, res.Entries)
			if got := res.Entries[0].Identifier; got != "urn:air:mcp.notes.example:mcp:sdk-notes" {
				t.Errorf("server identifier %s", got)
			}
		})
	}
}

// discoverServer is a hand-written server of the stateless revision: it
// insists on the revision's headers and _meta, answers in SSE framing with
// a notification before the response, and pages tools/list.
func discoverServer(tb testing.TB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta   map[string]any `json:"_meta"`
				Cursor string         `json:"cursor"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if r.Header.Get("MCP-Protocol-Version") != "2026-07-28" || r.Header.Get("Mcp-Method") != req.Method ||
			req.Params.Meta["io.modelcontextprotocol/protocolVersion"] != "2026-07-28" || r.Header.Get("Mcp-Session-Id") != "" ||
			!strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"headers or _meta missing"}}`, req.ID)
			return
		}
		var result string
		switch {
		case req.Method == "server/discover":
			result = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"instructions":"Prefer <b>metric</b> units.","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"weather","title":"Weather","version":"1.4.0"}}}`
		case req.Method == "tools/list" && req.Params.Cursor == "":
			result = `{"tools":[{"name":"get_forecast","title":"Get forecast","description":"Daily forecast for a city. Up to 10 days ahead.","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"annotations":{"readOnlyHint":true,"openWorldHint":true}}],"nextCursor":"p2"}`
		case req.Method == "tools/list" && req.Params.Cursor == "p2":
			result = `{"tools":[{"name":"get_alerts","description":"Severe-weather alerts for a region","inputSchema":{"type":"object"},"outputSchema":{"type":"object"}}]}`
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, req.ID)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": keep-alive\r\n\r\n")
		fmt.Fprint(w, "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"hi\"}}\r\n\r\n")
		fmt.Fprintf(w, "id: 7\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":%s,\ndata:\"result\":%s}\n\n", req.ID, result)
	})
}

func TestReadMCPGolden(t *testing.T) {
	r := newTestReader(t, hostMux{
		"weather.example":     serveFile(t, "server-card.json", "application/mcp-server-card+json"),
		"mcp.weather.example": discoverServer(t),
	})
	srv, res, err := r.ReadMCP(context.Background(), "weather.example", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if srv.Card == nil || srv.Card.Source.URL != "https://weather.example/.well-known/mcp/server-card.json" {
		t.Fatalf("card %+v", srv.Card)
	}
	if srv.Live == nil || srv.Live.Handshake != sources.HandshakeDiscover || len(srv.Live.Tools) != 2 {
		t.Fatalf("live %+v", srv.Live)
	}
	if srv.Live.Instructions != "Prefer <b>metric</b> units." {
		t.Errorf("instructions %q", srv.Live.Instructions)
	}
	checkARD(t, res.Entries)
	tool := entryByID(t, res.Entries, "urn:air:weather.example:mcp:example.weather-forecast:get_forecast")
	data := tool.Data.(*sources.ToolData)
	if data.Server.Endpoint != "https://mcp.weather.example/mcp" || data.Server.Transport != "streamable-http" || data.Server.Tool != "get_forecast" ||
		data.Server.Identifier != "urn:air:weather.example:mcp:example.weather-forecast" {
		t.Errorf("tool link %+v", data.Server)
	}
	if tool.Metadata["source.request"] != "POST tools/list" || tool.Metadata["mcp.readOnlyHint"] != true {
		t.Errorf("tool metadata %v", tool.Metadata)
	}
	scrub(res.Entries)
	checkGolden(t, "mcp-weather.golden.json", res)
}

func TestListToolsAuthRequired(t *testing.T) {
	const challenge = `Bearer resource_metadata="https://mcp.locked.example/.well-known/oauth-protected-resource"`
	r := newTestReader(t, hostMux{"mcp.locked.example": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})})
	tl, err := r.ListTools(context.Background(), "https://mcp.locked.example/mcp")
	if err != nil {
		t.Fatalf("a 401 is a finding, not an error: %v", err)
	}
	if !tl.AuthRequired || tl.WWWAuthenticate != challenge || len(tl.Tools) != 0 {
		t.Errorf("%+v", tl)
	}
	res, err := sources.MCPEntries(&sources.MCPServer{Live: tl}, "locked.example")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 1 || res.Entries[0].Metadata["mcp.authRequired"] != true {
		t.Errorf("entries %+v", res.Entries)
	}
	checkARD(t, res.Entries)
}

func TestListToolsErrors(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"server error", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }},
		{"not JSON-RPC", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) }},
		{"initialize fails too", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + map[bool]string{true: "1", false: "2"}[strings.Contains(readAll(r), "server/discover")] + `,"error":{"code":-32601,"message":"no"}}`))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestReader(t, hostMux{"mcp.broken.example": tc.handler})
			if tl, err := r.ListTools(context.Background(), "https://mcp.broken.example/mcp"); err == nil {
				t.Errorf("no error; got %+v", tl)
			}
		})
	}
}

func readAll(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

func TestReadMCPLegacyCard(t *testing.T) {
	r := newTestReader(t, hostMux{"notes.example": http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/.well-known/mcp.json" {
			serveFile(t, "mcp-legacy.json", "application/json").ServeHTTP(w, req)
			return
		}
		http.NotFound(w, req) // no SEP-2127 card, and the endpoint is down
	})})
	srv, res, err := r.ReadMCP(context.Background(), "notes.example", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if srv.Live != nil || len(srv.Warnings) == 0 {
		t.Errorf("live %+v warnings %q", srv.Live, srv.Warnings)
	}
	if len(res.Entries) != 2 {
		t.Fatalf("%d entries", len(res.Entries))
	}
	server, tool := res.Entries[0], res.Entries[1]
	if server.Identifier != "urn:air:notes.example:mcp:legacy-notes" || server.DisplayName != "Legacy Notes" || server.Version != "0.9.1" {
		t.Errorf("server %+v", server)
	}
	var card map[string]any
	_ = json.Unmarshal(server.Data.(json.RawMessage), &card)
	obs := card["_meta"].(map[string]any)["dev.ardx/observed"].(map[string]any)
	if obs["instructions"] != "Use search_notes before creating a note." || obs["endpoint"] != "https://notes.example/mcp" {
		t.Errorf("observed %v", obs)
	}
	if tool.Metadata["source.kind"] != "mcp-card" || tool.Capabilities[0] != "search_notes" {
		t.Errorf("tool %+v", tool)
	}
	checkARD(t, res.Entries)
}

func TestParseServerCard(t *testing.T) {
	card, err := sources.ParseServerCard(mustRead(t, "server-card.json"), "https://weather.example/.well-known/mcp/server-card.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := card.StreamableHTTPEndpoint(); got != "https://mcp.weather.example/mcp" {
		t.Errorf("endpoint %q", got)
	}
	if len(card.Remotes) != 2 || card.Remotes[1].Type != "sse" {
		t.Errorf("remotes %+v", card.Remotes)
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"name":""}`, `{"name":"a"} x`, `null`} {
		if _, err := sources.ParseServerCard([]byte(bad), ""); err == nil {
			t.Errorf("ParseServerCard(%q) accepted", bad)
		}
	}
}
