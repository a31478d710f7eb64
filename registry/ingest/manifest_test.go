package ingest_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry/ingest"
)

// validEntry returns a valid entry object with fields overridden (a nil value
// deletes the member).
func validEntry(over map[string]any) map[string]any {
	e := map[string]any{
		"identifier":            "urn:air:acme.test:tools:weather",
		"displayName":           "Weather",
		"type":                  "application/mcp-server-card+json",
		"url":                   "https://acme.test/card.json",
		"representativeQueries": []string{"weather forecast", "rain tomorrow"},
	}
	for k, v := range over {
		if v == nil {
			delete(e, k)
		} else {
			e[k] = v
		}
	}
	return e
}

func manifestJSON(tb testing.TB, entries ...any) []byte {
	tb.Helper()
	b, err := json.Marshal(map[string]any{"entries": entries})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func problemsText(ps []ingest.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}

func TestParseManifestEntryRules(t *testing.T) {
	tests := []struct {
		name     string
		over     map[string]any
		wantErr  string // substring of the rejection; "" means accepted
		wantWarn string // substring of a warning, when accepted
		wantID   string // normalised identifier, when accepted
		wantType string
	}{
		{name: "valid", wantID: "urn:air:acme.test:tools:weather", wantType: "application/mcp-server-card+json"},
		{name: "no namespace", over: map[string]any{"identifier": "urn:air:acme.test:weather"}, wantID: "urn:air:acme.test:weather"},
		{name: "multi-segment namespace with underscores", over: map[string]any{"identifier": "urn:air:acme.test:a:b_c:my_tool"}, wantID: "urn:air:acme.test:a:b_c:my_tool"},
		{name: "legacy urn:ai: normalised", over: map[string]any{"identifier": "urn:ai:acme.test:tools:weather"},
			wantID: "urn:air:acme.test:tools:weather", wantWarn: "normalised"},
		{name: "upper-case publisher and NID normalised", over: map[string]any{"identifier": " URN:AIR:Acme.TEST:tools:Weather "},
			wantID: "urn:air:acme.test:tools:Weather"},
		{name: "missing identifier", over: map[string]any{"identifier": nil}, wantErr: "identifier is required"},
		{name: "identifier not a string", over: map[string]any{"identifier": 7}, wantErr: "identifier is required"},
		{name: "identifier not a URN", over: map[string]any{"identifier": "acme.test/weather"}, wantErr: "is not a urn:air"},
		{name: "identifier without name", over: map[string]any{"identifier": "urn:air:acme.test"}, wantErr: "is not a urn:air"},
		{name: "underscore in publisher", over: map[string]any{"identifier": "urn:air:ac_me.test:x"}, wantErr: "is not a urn:air"},
		{name: "publisher localhost", over: map[string]any{"identifier": "urn:air:localhost:x"}, wantErr: "localhost"},
		{name: "publisher not a FQDN", over: map[string]any{"identifier": "urn:air:acme:tools:x"}, wantErr: "fully qualified"},
		{name: "publisher bad label", over: map[string]any{"identifier": "urn:air:-acme.test:x"}, wantErr: "valid domain"},
		{name: "empty namespace segment", over: map[string]any{"identifier": "urn:air:acme.test:a::x"}, wantErr: "empty namespace"},
		{name: "identifier too long", over: map[string]any{"identifier": "urn:air:acme.test:" + strings.Repeat("a", 400)}, wantErr: "longer than"},
		{name: "missing displayName", over: map[string]any{"displayName": nil}, wantErr: "displayName is required"},
		{name: "blank displayName", over: map[string]any{"displayName": "  "}, wantErr: "displayName is required"},
		{name: "displayName not a string", over: map[string]any{"displayName": []string{"a"}}, wantErr: "displayName is required"},
		{name: "missing type", over: map[string]any{"type": nil}, wantErr: "type is required"},
		{name: "type not a media type", over: map[string]any{"type": "mcp server"}, wantErr: "not a media type"},
		{name: "mcp alias", over: map[string]any{"type": "application/mcp-server+json"},
			wantType: "application/mcp-server-card+json", wantWarn: "deprecated media type", wantID: "urn:air:acme.test:tools:weather"},
		{name: "registry alias", over: map[string]any{"type": "application/ai-registry"}, wantType: "application/ai-registry+json"},
		{name: "a2a alias", over: map[string]any{"type": "application/agent-card+json"}, wantType: "application/a2a-agent-card+json"},
		{name: "type case and space", over: map[string]any{"type": "  Application/MCP-Server-Card+JSON "}, wantType: "application/mcp-server-card+json"},
		{name: "skill markdown parameters canonical", over: map[string]any{"type": `text/markdown;profile="urn:air:agent-skills"`},
			wantType: `text/markdown; profile="urn:air:agent-skills"`},
		{name: "unknown non-application type warns", over: map[string]any{"type": "image/png"}, wantType: "image/png", wantWarn: "unrecognised media type"},
		{name: "both url and data", over: map[string]any{"data": map[string]any{"a": 1}}, wantErr: "both are present"},
		{name: "neither url nor data", over: map[string]any{"url": nil}, wantErr: "neither is present"},
		{name: "null url counts as absent", over: map[string]any{"url": nil, "data": map[string]any{"x": 1}}, wantType: "application/mcp-server-card+json"},
		{name: "url not http", over: map[string]any{"url": "ftp://acme.test/x"}, wantErr: "url: scheme"},
		{name: "url relative", over: map[string]any{"url": "/card.json"}, wantErr: "url: scheme"},
		{name: "url not a string", over: map[string]any{"url": 3}, wantErr: "url must be a string"},
		{name: "queries not array", over: map[string]any{"representativeQueries": "weather"}, wantErr: "representativeQueries must be an array of strings"},
		{name: "queries not strings", over: map[string]any{"representativeQueries": []any{"a", 2}}, wantErr: "representativeQueries must be an array of strings"},
		{name: "one query warns", over: map[string]any{"representativeQueries": []string{"a"}}, wantWarn: "2 to 5"},
		{name: "six queries warn", over: map[string]any{"representativeQueries": []string{"a", "b", "c", "d", "e", "f"}}, wantWarn: "2 to 5"},
		{name: "no queries warns", over: map[string]any{"representativeQueries": nil}, wantWarn: "no representativeQueries"},
		{name: "trustManifest not object", over: map[string]any{"trustManifest": "yes"}, wantErr: "trustManifest: must be an object"},
		{name: "trustManifest without identity", over: map[string]any{"trustManifest": map[string]any{"identityType": "did"}}, wantErr: "identity is required"},
		{name: "trustManifest attestation without type", over: map[string]any{"trustManifest": map[string]any{"identity": "https://acme.test", "attestations": []any{map[string]any{"uri": "x"}}}}, wantErr: "attestations[0].type"},
		{name: "trustManifest valid", over: map[string]any{"trustManifest": map[string]any{"identity": "spiffe://acme.test/ns/x", "attestations": []any{map[string]any{"type": "SOC2"}}}}},
		{name: "trustManifest foreign identity warns", over: map[string]any{"trustManifest": map[string]any{"identity": "did:web:other.test"}}, wantWarn: "does not align"},
		{name: "metadata nested object", over: map[string]any{"metadata": map[string]any{"a": map[string]any{"b": 1}}}, wantErr: "must be a scalar"},
		{name: "metadata array value", over: map[string]any{"metadata": map[string]any{"a": []int{1}}}, wantErr: "must be a scalar"},
		{name: "metadata not object", over: map[string]any{"metadata": []int{1}}, wantErr: "metadata: must be an object"},
		{name: "metadata scalars", over: map[string]any{"metadata": map[string]any{"a": 1, "b": "x", "c": true, "d": nil}}},
		{name: "tags not strings", over: map[string]any{"tags": []any{1}}, wantErr: "tags must be an array of strings"},
		{name: "capabilities not array", over: map[string]any{"capabilities": "x"}, wantErr: "capabilities must be an array of strings"},
		{name: "description not string", over: map[string]any{"description": 1}, wantErr: "description must be a string"},
		{name: "version not string", over: map[string]any{"version": 1.2}, wantErr: "version must be a string"},
		{name: "updatedAt not date-time warns", over: map[string]any{"updatedAt": "yesterday"}, wantWarn: "RFC 3339"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, problems := ingest.ParseManifest(manifestJSON(t, validEntry(tc.over)))
			text := problemsText(problems)
			if tc.wantErr != "" {
				if len(m.Entries) != 0 {
					t.Fatalf("accepted, want rejection %q", tc.wantErr)
				}
				if !strings.Contains(text, "error at /entries/0") || !strings.Contains(text, tc.wantErr) {
					t.Fatalf("problems %q, want error containing %q", text, tc.wantErr)
				}
				return
			}
			if len(m.Entries) != 1 {
				t.Fatalf("rejected: %s", text)
			}
			if strings.Contains(text, "error") {
				t.Fatalf("accepted with errors: %s", text)
			}
			if tc.wantWarn != "" && !strings.Contains(text, tc.wantWarn) {
				t.Fatalf("warnings %q, want %q", text, tc.wantWarn)
			}
			e := m.Entries[0]
			if tc.wantID != "" && e.ID != tc.wantID {
				t.Fatalf("ID %q, want %q", e.ID, tc.wantID)
			}
			if tc.wantType != "" && e.Type != tc.wantType {
				t.Fatalf("Type %q, want %q", e.Type, tc.wantType)
			}
			// The stored body carries the normalised identifier and type.
			var body struct{ Identifier, Type string }
			if err := json.Unmarshal(e.Body, &body); err != nil || body.Identifier != e.ID || body.Type != e.Type {
				t.Fatalf("body %s does not carry normalised id/type (%v)", e.Body, err)
			}
			if e.Publisher != "acme.test" {
				t.Fatalf("publisher %q", e.Publisher)
			}
		})
	}
}

func TestParseManifestShapes(t *testing.T) {
	entry := `{"identifier":"urn:air:acme.test:x","displayName":"X","type":"application/mcp-server-card+json","url":"https://acme.test/x"}`
	tests := []struct {
		name      string
		doc       string
		wantShape string
		wantN     int
		wantErr   string // a root or /entries error
		wantWarn  string
	}{
		{name: "v0.91 ard.json", doc: `{"entries":[` + entry + `]}`, wantShape: "ard", wantN: 1},
		{name: "v0.91 with extra members", doc: `{"@context":"x","publisher":{"a":1},"entries":[` + entry + `]}`, wantShape: "ard", wantN: 1},
		{name: "v0.9 ai-catalog.json", doc: `{"specVersion":"1.0","host":{"displayName":"Acme"},"entries":[` + entry + `]}`, wantShape: "ai-catalog", wantN: 1},
		{name: "v0.9 other specVersion warns", doc: `{"specVersion":"2.0","entries":[` + entry + `]}`, wantShape: "ai-catalog", wantN: 1, wantWarn: "specVersion"},
		{name: "v0.9 host without displayName warns", doc: `{"specVersion":"1.0","host":{},"entries":[` + entry + `]}`, wantN: 1, wantWarn: "host must be"},
		{name: "collections warns", doc: `{"collections":[],"entries":[` + entry + `]}`, wantN: 1, wantWarn: "collections was removed"},
		{name: "empty entries", doc: `{"entries":[]}`, wantShape: "ard"},
		{name: "no entries", doc: `{"specVersion":"1.0"}`, wantErr: "entries is required"},
		{name: "entries not array", doc: `{"entries":{}}`, wantErr: "entries must be an array"},
		{name: "entries null", doc: `{"entries":null}`, wantErr: "entries must be an array"},
		{name: "not JSON", doc: `<html>`, wantErr: "not a JSON object"},
		{name: "array", doc: `[` + entry + `]`, wantErr: "not a JSON object"},
		{name: "null", doc: `null`, wantErr: "not a JSON object"},
		{name: "trailing data", doc: `{"entries":[]} {"entries":[]}`, wantErr: "not a JSON object"},
		{name: "entry not an object", doc: `{"entries":[1, ` + entry + `]}`, wantN: 1},
		{name: "duplicate identifier", doc: `{"entries":[` + entry + `,` + entry + `]}`, wantN: 1, wantWarn: "duplicate identifier"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, problems := ingest.ParseManifest([]byte(tc.doc))
			text := problemsText(problems)
			if tc.wantErr != "" {
				if len(m.Entries) != 0 || !strings.Contains(text, tc.wantErr) {
					t.Fatalf("entries %d, problems %q; want none and %q", len(m.Entries), text, tc.wantErr)
				}
				return
			}
			if len(m.Entries) != tc.wantN {
				t.Fatalf("got %d entries, want %d: %s", len(m.Entries), tc.wantN, text)
			}
			if tc.wantShape != "" && m.Shape != tc.wantShape {
				t.Fatalf("shape %q, want %q", m.Shape, tc.wantShape)
			}
			if tc.wantWarn != "" && !strings.Contains(text, tc.wantWarn) {
				t.Fatalf("problems %q, want %q", text, tc.wantWarn)
			}
		})
	}
}

// nest wraps entries in n levels of inline nested catalogs.
func nest(n int, inner any) any {
	cur := inner
	for i := range n {
		cur = map[string]any{
			"identifier":  fmt.Sprintf("urn:air:acme.test:catalogs:level%d", n-i),
			"displayName": "Nested", "type": "application/ai-catalog+json",
			"data": map[string]any{"entries": []any{cur}},
		}
	}
	return cur
}

func TestParseManifestNesting(t *testing.T) {
	leaf := validEntry(map[string]any{"identifier": "urn:air:acme.test:deep:leaf"})
	tests := []struct {
		name     string
		levels   int
		wantLeaf bool
	}{
		{"one level", 1, true},
		{"at the depth limit", ingest.MaxNestingDepth, true},
		{"past the depth limit", ingest.MaxNestingDepth + 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			top := validEntry(nil)
			m, problems := ingest.ParseManifest(manifestJSON(t, top, nest(tc.levels, leaf)))
			var ids []string
			for _, e := range m.Entries {
				ids = append(ids, e.ID)
				if e.Type == ingest.TypeCatalog {
					t.Fatalf("catalog entry %s stored instead of flattened", e.ID)
				}
			}
			got := len(ids) == 2 && ids[1] == "urn:air:acme.test:deep:leaf"
			if got != tc.wantLeaf {
				t.Fatalf("entries %v, problems %s", ids, problemsText(problems))
			}
			if !tc.wantLeaf && !strings.Contains(problemsText(problems), "deeper than") {
				t.Fatalf("no depth problem: %s", problemsText(problems))
			}
			if tc.wantLeaf && len(ids) == 2 {
				want := strings.Repeat("/data/entries/0", tc.levels)
				if m.Entries[1].Pointer != "/entries/1"+want {
					t.Fatalf("pointer %q", m.Entries[1].Pointer)
				}
			}
		})
	}
	t.Run("url nested catalog becomes a link", func(t *testing.T) {
		link := validEntry(map[string]any{"identifier": "urn:air:acme.test:cat", "type": "application/ai-catalog+json", "url": "https://acme.test/more.json"})
		m, _ := ingest.ParseManifest(manifestJSON(t, link))
		if len(m.Entries) != 0 || len(m.Links) != 1 || m.Links[0].URL != "https://acme.test/more.json" || m.Links[0].Depth != 1 {
			t.Fatalf("entries %v links %+v", m.Entries, m.Links)
		}
	})
}

func TestParseManifestKeepsValidRest(t *testing.T) {
	good1 := validEntry(map[string]any{"identifier": "urn:air:acme.test:a"})
	bad := validEntry(map[string]any{"identifier": "urn:air:acme.test:b", "displayName": nil})
	good2 := validEntry(map[string]any{"identifier": "urn:air:acme.test:c"})
	m, problems := ingest.ParseManifest(manifestJSON(t, good1, bad, good2))
	if len(m.Entries) != 2 || m.Entries[0].ID != "urn:air:acme.test:a" || m.Entries[1].ID != "urn:air:acme.test:c" {
		t.Fatalf("entries %+v", m.Entries)
	}
	var errs []ingest.Problem
	for _, p := range problems {
		if p.Severity == ingest.SeverityError {
			errs = append(errs, p)
		}
	}
	if len(errs) != 1 || errs[0].Pointer != "/entries/1" || errs[0].Identifier != "urn:air:acme.test:b" {
		t.Fatalf("errors %+v", errs)
	}
}

func TestParseManifestPreservesText(t *testing.T) {
	doc := `{"entries":[{"identifier":"urn:air:acme.test:x","displayName":"X","type":"x/y","url":"https://acme.test",
		"description":"use <b>bold</b> & \"quotes\""}]}`
	m, _ := ingest.ParseManifest([]byte(doc))
	if len(m.Entries) != 1 {
		t.Fatalf("rejected")
	}
	if !strings.Contains(string(m.Entries[0].Body), `use <b>bold</b> & \"quotes\"`) {
		t.Fatalf("body %s", m.Entries[0].Body)
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"entries":[{"identifier":"urn:air:a.test:x","displayName":"X","type":"application/mcp-server+json","url":"https://a.test"}]}`))
	f.Add([]byte(`{"specVersion":"1.0","host":{"displayName":"A"},"entries":[{"identifier":"urn:ai:a.test:n:x","displayName":"X","type":"text/markdown; profile=\"urn:air:agent-skills\"","data":{"a":[1,2]},"metadata":{"k":1.5e3},"trustManifest":{"identity":"did:web:a.test","attestations":[{"type":"t"}]}}]}`))
	f.Add([]byte(`{"entries":[{"identifier":"urn:air:a.test:c","displayName":"C","type":"application/ai-catalog+json","data":{"entries":[{"identifier":"urn:air:a.test:d","displayName":"D","type":"x/y","url":"http://a.test"}]}}]}`))
	f.Add([]byte(`{"entries":[null,1,"x",[],{}]}`))
	f.Add([]byte(`{"entries":[{"identifier":"urn:air:a.test:c","displayName":"C","type":"application/ai-catalog+json","url":"https://a.test/c.json"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, problems := ingest.ParseManifest(body)
		seen := map[string]bool{}
		for _, e := range m.Entries {
			// Every returned entry satisfies the rules it was checked against.
			if id, pub, msg := ingest.NormalizeIdentifier(e.ID); msg != "" || id != e.ID || pub != e.Publisher {
				t.Fatalf("entry %q has a non-normal identifier (%s)", e.ID, msg)
			}
			if typ, msg := ingest.NormalizeType(e.Type); msg != "" || typ != e.Type {
				t.Fatalf("entry %q has a non-normal type %q", e.ID, e.Type)
			}
			if e.Type == ingest.TypeCatalog {
				t.Fatalf("catalog entry returned")
			}
			if seen[e.ID] {
				t.Fatalf("duplicate %q returned", e.ID)
			}
			seen[e.ID] = true
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(e.Body, &obj); err != nil {
				t.Fatalf("body of %q is not an object: %v", e.ID, err)
			}
			_, hasURL := obj["url"]
			_, hasData := obj["data"]
			if hasURL == hasData && string(obj["url"]) != "null" && string(obj["data"]) != "null" {
				t.Fatalf("entry %q has url=%v data=%v", e.ID, hasURL, hasData)
			}
		}
		for _, p := range problems {
			if p.Severity != ingest.SeverityError && p.Severity != ingest.SeverityWarning || p.Message == "" {
				t.Fatalf("bad problem %+v", p)
			}
		}
	})
}

func TestPublisherAllowed(t *testing.T) {
	tests := []struct {
		publisher string
		hosts     []string
		want      bool
	}{
		{"acme.test", []string{"acme.test"}, true},
		{"api.acme.test", []string{"acme.test"}, true},
		{"acme.test", []string{"www.acme.test"}, false},
		{"notacme.test", []string{"acme.test"}, false},
		{"acme.test.evil.test", []string{"acme.test"}, false},
		{"acme.test", []string{"ACME.test."}, true},
		{"acme.test", []string{"other.test", "acme.test"}, true},
		{"acme.test", nil, false},
		{"acme.test", []string{""}, false},
	}
	for _, tc := range tests {
		if got := ingest.PublisherAllowed(tc.publisher, tc.hosts...); got != tc.want {
			t.Errorf("PublisherAllowed(%q, %q) = %v, want %v", tc.publisher, tc.hosts, got, tc.want)
		}
	}
}
