package sources

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func addFixtures(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseAPI: any bytes give a description or an error, never a panic,
// and whatever is parsed turns into entries that encode as JSON.
func FuzzParseAPI(f *testing.F) {
	addFixtures(f, "petstore-3.1.yaml", "notes-3.0.json", "bank-2.0.json")
	f.Add([]byte(`{"openapi":"3.1.0","paths":{"/a":{"get":{"requestBody":{"$ref":"#/x"},"security":[{"a":[]}]}}},"x":{"$ref":"#/x"}}`))
	f.Add([]byte("openapi: 3.0.0\na: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		api, err := ParseAPI(body, "https://x.example/openapi.json")
		if err != nil {
			return
		}
		res, err := APIEntries(api, "x.example", Provenance{URL: "https://x.example/openapi.json"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(res.Entries); err != nil {
			t.Fatalf("entries do not encode: %v", err)
		}
	})
}

// FuzzParseLLMsTxt: never a panic; every kept link is absolute http(s).
func FuzzParseLLMsTxt(f *testing.F) {
	addFixtures(f, "llms.txt")
	f.Add([]byte("# T\n## S\n- [a](b): c\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := ParseLLMsTxt(body, "https://x.example/llms.txt")
		if err != nil {
			return
		}
		for _, s := range doc.Sections {
			for _, l := range s.Links {
				if !isHTTPURL(l.URL) {
					t.Fatalf("link %q kept", l.URL)
				}
			}
		}
		if _, err := LLMsTxtEntries(doc, "x.example", Provenance{}); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDecodeRPCResponse: the JSON-RPC/SSE decoder never panics and only
// returns a response carrying a result or an error.
func FuzzDecodeRPCResponse(f *testing.F) {
	f.Add("application/json", []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`))
	f.Add("application/json", []byte(`[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":"1","error":{"code":-32601,"message":"m"}}]`))
	f.Add("text/event-stream", []byte(": c\r\n\r\nevent: message\rdata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":{}}\n\n"))
	f.Add("text/event-stream; charset=utf-8", []byte("data: {\"id\":1,\"result\":{}}"))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		resp, err := decodeRPCResponse(contentType, body, 1)
		if err != nil {
			return
		}
		if resp.Error == nil && len(resp.Result) == 0 {
			t.Fatal("a response with neither result nor error")
		}
	})
}

// FuzzParseServerCard: never a panic; a card always has a name.
func FuzzParseServerCard(f *testing.F) {
	addFixtures(f, "server-card.json", "mcp-legacy.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ParseServerCard(body, "https://x.example/.well-known/mcp/server-card.json")
		if err != nil {
			return
		}
		if c.Name == "" {
			t.Fatal("card without a name")
		}
	})
}
