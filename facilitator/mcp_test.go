package facilitator_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ardx-dev/ardx/facilitator"
)

// mcpSession connects the official SDK client to env's POST /mcp.
func mcpSession(t *testing.T, env *testEnv) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "ardx-test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: env.URL + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestMCPToolList(t *testing.T) {
	env := newTestEnv(t)
	cs := mcpSession(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s lacks a description or schema", tool.Name)
		}
	}
	want := []string{facilitator.ToolFacilitatorStatus, facilitator.ToolFindPaidResource, facilitator.ToolIntegrationSnippet, facilitator.ToolSettlementPrice}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("tools %v, want %v", names, want)
	}
	checkGolden(t, "mcp_tools.golden.json", res.Tools)
}

func TestMCPTools(t *testing.T) {
	env := statusEnv(t)
	cs := mcpSession(t, env)
	tests := []struct {
		name      string
		tool      string
		args      map[string]any
		wantError bool
		check     func(t *testing.T, structured json.RawMessage, text string)
	}{
		{name: "status", tool: facilitator.ToolFacilitatorStatus, args: map[string]any{},
			check: func(t *testing.T, raw json.RawMessage, _ string) {
				var doc facilitator.StatusDocument
				mustUnmarshal(t, raw, &doc)
				if doc.Status != "degraded" || len(doc.Networks) != 2 || doc.Networks[0].Settlements.Succeeded != 1 || doc.Screening.Size != 2 {
					t.Fatalf("status %s", raw)
				}
				if doc.Networks[0].Observed[0].LowerBound == nil || doc.Networks[0].Observed[1].LowerBound != nil {
					t.Fatalf("availability %s", raw)
				}
			}},
		{name: "price of every network", tool: facilitator.ToolSettlementPrice, args: map[string]any{},
			check: func(t *testing.T, raw json.RawMessage, _ string) {
				var p facilitator.PriceOutput
				mustUnmarshal(t, raw, &p)
				if len(p.Networks) != 2 || p.Currency != "USD" || p.Verify != "0" {
					t.Fatalf("prices %s", raw)
				}
			}},
		{name: "price by v1 name", tool: facilitator.ToolSettlementPrice, args: map[string]any{"network": "dev"},
			check: func(t *testing.T, raw json.RawMessage, _ string) {
				var p facilitator.PriceOutput
				mustUnmarshal(t, raw, &p)
				if len(p.Networks) != 1 || p.Networks[0].Network != "eip155:1337" || !p.Networks[0].Free {
					t.Fatalf("dev price %s", raw)
				}
			}},
		{name: "price of an unknown network", tool: facilitator.ToolSettlementPrice, args: map[string]any{"network": "eip155:1"}, wantError: true},
		{name: "find without catalogue", tool: facilitator.ToolFindPaidResource, args: map[string]any{"query": "weather"},
			check: func(t *testing.T, raw json.RawMessage, _ string) {
				var f facilitator.FindOutput
				mustUnmarshal(t, raw, &f)
				if f.Count != 0 || f.Items == nil {
					t.Fatalf("find %s", raw)
				}
			}},
		{name: "find with a limit over 100", tool: facilitator.ToolFindPaidResource, args: map[string]any{"query": "x", "limit": 101}, wantError: true},
		{name: "find without query", tool: facilitator.ToolFindPaidResource, args: map[string]any{}, wantError: true},
		{name: "snippet go", tool: facilitator.ToolIntegrationSnippet, args: map[string]any{"framework": "go"},
			check: func(t *testing.T, raw json.RawMessage, text string) {
				var sn facilitator.Snippet
				mustUnmarshal(t, raw, &sn)
				if sn.Language != "go" || !strings.Contains(sn.Code, publicURL) || !strings.Contains(sn.Code, "eip155:1337") || !strings.Contains(text, "package main") {
					t.Fatalf("go snippet %s", raw)
				}
			}},
		{name: "snippet express on the other network", tool: facilitator.ToolIntegrationSnippet, args: map[string]any{"framework": "express", "network": "base-sepolia"},
			check: func(t *testing.T, raw json.RawMessage, _ string) {
				var sn facilitator.Snippet
				mustUnmarshal(t, raw, &sn)
				if !strings.Contains(sn.Code, "@x402/express") || !strings.Contains(sn.Code, `"eip155:84532"`) {
					t.Fatalf("express snippet %s", raw)
				}
			}},
		{name: "snippet of an unknown framework", tool: facilitator.ToolIntegrationSnippet, args: map[string]any{"framework": "rails"}, wantError: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				// The SDK refuses arguments its schema rejects as a protocol
				// error; that is an error answer too.
				if tc.wantError {
					return
				}
				t.Fatal(err)
			}
			if res.IsError != tc.wantError {
				t.Fatalf("IsError %v, want %v: %+v", res.IsError, tc.wantError, res.Content)
			}
			if tc.wantError {
				return
			}
			raw, err := json.Marshal(res.StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			text := ""
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text += tc.Text
				}
			}
			tc.check(t, raw, text)
		})
	}
}

func mustUnmarshal(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

func TestMCPMethodsAndErrors(t *testing.T) {
	env := newTestEnv(t)
	for _, method := range []string{"GET", "DELETE"} {
		t.Run(method, func(t *testing.T) {
			a := do(t, method, env.URL+"/mcp", nil, nil)
			wantProblem(t, a, 405, "method-not-allowed")
			if allow := a.Header.Get("Allow"); !strings.Contains(allow, "POST") {
				t.Errorf("Allow %q", allow)
			}
		})
	}
	// A protocol error about a request with an id is a JSON-RPC error for
	// that id (status 200, as MCP clients read it); without an id there is
	// nobody to answer in JSON-RPC, so it stays a problem.
	rpcErrors := []struct {
		name, body, id string
		code           int
	}{
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"no/such"}`, "1", -32601},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"a","method":"tools/list"}`, `"a"`, -32600},
		{"no jsonrpc member", `{"id":3,"method":"tools/list"}`, "3", -32600},
		{"unknown tool", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope"}}`, "4", -32602},
	}
	for _, tc := range rpcErrors {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, "POST", env.URL+"/mcp", []byte(tc.body), map[string]string{"Accept": "application/json, text/event-stream"})
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			mustUnmarshal(t, a.Body, &m)
			if a.Status != 200 || m.JSONRPC != "2.0" || string(m.ID) != tc.id || m.Error == nil || m.Error.Code != tc.code || m.Error.Message == "" {
				t.Fatalf("status %d body %s, want a JSON-RPC error %d for id %s", a.Status, a.Body, tc.code, tc.id)
			}
		})
	}
	t.Run("unknown notification is a problem", func(t *testing.T) {
		a := do(t, "POST", env.URL+"/mcp", []byte(`{"jsonrpc":"2.0","method":"no/such"}`), map[string]string{"Accept": "application/json, text/event-stream"})
		wantProblem(t, a, 400, "bad-request")
	})
	t.Run("not JSON-RPC", func(t *testing.T) {
		a := do(t, "POST", env.URL+"/mcp", []byte("hello"), map[string]string{"Accept": "application/json, text/event-stream"})
		wantProblem(t, a, 400, "bad-request")
	})
	t.Run("body over the limit", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("a", facilitator.MaxBodyBytes) + `"}}`
		a := do(t, "POST", env.URL+"/mcp", []byte(big), map[string]string{"Accept": "application/json, text/event-stream"})
		if a.Status != 413 && a.Status != 400 {
			t.Fatalf("status %d body %s", a.Status, a.Body)
		}
		if ct := a.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("Content-Type %q", ct)
		}
	})
}

// FuzzMCPRequest throws arbitrary bodies at POST /mcp: every answer is a
// JSON-RPC answer or a problem, never a crash or a plain-text error.
func FuzzMCPRequest(f *testing.F) {
	env := newTestEnv(f)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"find_paid_resource","arguments":{"query":"a","limit":-1}}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		a := do(t, "POST", env.URL+"/mcp", body, map[string]string{"Accept": "application/json, text/event-stream"})
		ct := a.Header.Get("Content-Type")
		if a.Status >= 500 {
			t.Fatalf("status %d for %q: %s", a.Status, body, a.Body)
		}
		if a.Status >= 400 && ct != "application/problem+json" {
			t.Fatalf("status %d with %q for %q: %s", a.Status, ct, body, a.Body)
		}
	})
}
