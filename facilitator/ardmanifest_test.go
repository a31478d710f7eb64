package facilitator_test

import (
	"encoding/json"
	"testing"

	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/registry/sources"
)

func TestARDManifest(t *testing.T) {
	env := newTestEnv(t)
	a := do(t, "GET", env.URL+"/.well-known/ard.json", nil, nil)
	if a.Status != 200 {
		t.Fatalf("status %d", a.Status)
	}
	var top struct {
		SpecVersion string `json:"specVersion"`
	}
	if err := json.Unmarshal(a.Body, &top); err != nil || top.SpecVersion != "1.0" {
		t.Fatalf("specVersion %q (%v), want \"1.0\" (ARD v0.9 requires it; the doctor warns without it)", top.SpecVersion, err)
	}
	m, problems := ingest.ParseManifest(a.Body)
	if len(problems) != 0 {
		t.Fatalf("manifest problems: %v", problems)
	}
	want := map[string]string{
		"urn:air:pay.example.test:x402:facilitator": ingest.TypeOpenAPI,
		"urn:air:pay.example.test:x402:mcp":         ingest.TypeMCPServer,
	}
	if len(m.Entries) != len(want) {
		t.Fatalf("entries %+v", m.Entries)
	}
	for _, e := range m.Entries {
		if want[e.ID] != e.Type {
			t.Errorf("entry %s of type %s", e.ID, e.Type)
		}
		var body struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(e.Body, &body); err != nil {
			t.Fatal(err)
		}
		if e.Type != ingest.TypeMCPServer {
			continue
		}
		card, err := sources.ParseServerCard(body.Data, publicURL+"/.well-known/ard.json")
		if err != nil {
			t.Fatalf("server card: %v", err)
		}
		if got := card.StreamableHTTPEndpoint(); got != publicURL+"/mcp" {
			t.Errorf("MCP endpoint %q, want %s/mcp", got, publicURL)
		}
	}
}
