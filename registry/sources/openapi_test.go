package sources_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/ardx-dev/ardx/registry/sources"
)

func TestReadAPIGolden(t *testing.T) {
	tests := []struct {
		name, file, contentType, host, path, domain string
		wantOps                                     int
	}{
		{"openapi 3.1 yaml", "petstore-3.1.yaml", "application/yaml", "api.petstore.example", "/openapi.yaml", "petstore.example", 6},
		{"openapi 3.0 json", "notes-3.0.json", "application/json", "notes.example", "/specs/openapi.json", "", 3},
		{"swagger 2.0 json", "bank-2.0.json", "application/json", "docs.coinbank.example", "/swagger.json", "coinbank.example", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestReader(t, hostMux{tc.host: serveFile(t, tc.file, tc.contentType)})
			api, res, err := r.ReadAPI(context.Background(), "https://"+tc.host+tc.path, tc.domain)
			if err != nil {
				t.Fatal(err)
			}
			if len(api.Operations) != tc.wantOps || len(res.Entries) != tc.wantOps+1 {
				t.Fatalf("%d operations, %d entries; want %d and %d", len(api.Operations), len(res.Entries), tc.wantOps, tc.wantOps+1)
			}
			for _, e := range res.Entries {
				if e.Metadata["source.url"] != "https://"+tc.host+tc.path || e.Metadata["source.httpStatus"] != http.StatusOK {
					t.Errorf("%s: provenance %v", e.Identifier, e.Metadata)
				}
			}
			checkARD(t, res.Entries)
			scrub(res.Entries)
			checkGolden(t, tc.file+".golden.json", res)
		})
	}
}

func TestParseAPIServers(t *testing.T) {
	tests := []struct {
		name, doc, docURL string
		want              []string // servers of the first operation
	}{
		{"variables take defaults", `{"openapi":"3.1.0","servers":[{"url":"https://{env}.x.example:{port}/v1","variables":{"env":{"default":"prod"},"port":{"default":"8443"}}}],"paths":{"/a":{"get":{}}}}`,
			"https://x.example/openapi.json", []string{"https://prod.x.example:8443/v1"}},
		{"enum when no default", `{"openapi":"3.0.0","servers":[{"url":"https://{env}.x.example","variables":{"env":{"enum":["eu","us"]}}}],"paths":{"/a":{"get":{}}}}`,
			"https://x.example/o.json", []string{"https://eu.x.example"}},
		{"relative resolves against the document", `{"openapi":"3.0.0","servers":[{"url":"/api/"},{"url":"v2"}],"paths":{"/a":{"get":{}}}}`,
			"https://docs.x.example/specs/openapi.json", []string{"https://docs.x.example/api", "https://docs.x.example/specs/v2"}},
		{"no servers means the document's origin", `{"openapi":"3.0.0","paths":{"/a":{"get":{}}}}`,
			"https://x.example/specs/openapi.json", []string{"https://x.example"}},
		{"operation servers win", `{"openapi":"3.0.0","servers":[{"url":"https://a.example"}],"paths":{"/a":{"servers":[{"url":"https://b.example"}],"get":{"servers":[{"url":"https://c.example/"}]}}}}`,
			"https://x.example/o.json", []string{"https://c.example"}},
		{"path servers win over document", `{"openapi":"3.0.0","servers":[{"url":"https://a.example"}],"paths":{"/a":{"servers":[{"url":"https://b.example"}],"get":{}}}}`,
			"https://x.example/o.json", []string{"https://b.example"}},
		{"swagger host basePath schemes", `{"swagger":"2.0","host":"api.x.example:8080","basePath":"/v1","schemes":["http","https","wss"],"paths":{"/a":{"get":{}}}}`,
			"https://docs.x.example/swagger.json", []string{"http://api.x.example:8080/v1", "https://api.x.example:8080/v1"}},
		{"swagger defaults from the document URL", `{"swagger":"2.0","paths":{"/a":{"get":{}}}}`,
			"http://x.example/swagger.json", []string{"http://x.example"}},
		{"swagger operation schemes", `{"swagger":"2.0","host":"x.example","schemes":["http","https"],"paths":{"/a":{"get":{"schemes":["https"]}}}}`,
			"http://x.example/swagger.json", []string{"https://x.example"}},
		{"yaml", "openapi: 3.0.0\nservers:\n  - url: https://y.example/{v}\n    variables: {v: {default: v3}}\npaths:\n  /a:\n    get: {}\n",
			"https://y.example/openapi.yaml", []string{"https://y.example/v3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, err := sources.ParseAPI([]byte(tc.doc), tc.docURL)
			if err != nil {
				t.Fatal(err)
			}
			if len(api.Operations) != 1 {
				t.Fatalf("%d operations", len(api.Operations))
			}
			if got := api.Operations[0].Servers; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("servers %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseAPIAuth(t *testing.T) {
	const schemes = `"components":{"securitySchemes":{
		"key":{"type":"apiKey","in":"query","name":"api_key"},
		"hdr":{"type":"apiKey","in":"header","name":"X-Key"},
		"bearer":{"type":"http","scheme":"Bearer","bearerFormat":"JWT"},
		"basic":{"type":"http","scheme":"basic"},
		"oauth":{"type":"oauth2","flows":{"implicit":{},"clientCredentials":{}}},
		"oidc":{"type":"openIdConnect","openIdConnectUrl":"https://id.example/.well-known/openid-configuration"},
		"mtls":{"type":"mutualTLS"},
		"ref":{"$ref":"#/components/securitySchemes/hdr"}}}`
	none := [][]sources.AuthScheme{{{Type: "none"}}}
	tests := []struct {
		name, global, op string // JSON fragments; "" leaves the member out
		want             [][]sources.AuthScheme
	}{
		{"no security at all", "", "", none},
		{"global applies", `[{"key":[]}]`, "", [][]sources.AuthScheme{{{Type: "apiKey", SchemeName: "key", In: "query", Name: "api_key"}}}},
		{"operation overrides global", `[{"key":[]}]`, `[{"bearer":[]}]`, [][]sources.AuthScheme{{{Type: "http", SchemeName: "bearer", Scheme: "bearer", BearerFormat: "JWT"}}}},
		{"empty operation list means none", `[{"key":[]}]`, `[]`, none},
		{"empty global list means none", `[]`, "", none},
		{"empty requirement makes auth optional", "", `[{},{"basic":[]}]`, [][]sources.AuthScheme{{{Type: "none"}}, {{Type: "http", SchemeName: "basic", Scheme: "basic"}}}},
		{"and within a requirement", "", `[{"hdr":[],"oauth":["read","write"]}]`, [][]sources.AuthScheme{{
			{Type: "apiKey", SchemeName: "hdr", In: "header", Name: "X-Key"},
			{Type: "oauth2", SchemeName: "oauth", Flows: []string{"clientCredentials", "implicit"}, Scopes: []string{"read", "write"}}}}},
		{"openIdConnect", "", `[{"oidc":["openid"]}]`, [][]sources.AuthScheme{{{Type: "openIdConnect", SchemeName: "oidc", OpenIDConnectURL: "https://id.example/.well-known/openid-configuration", Scopes: []string{"openid"}}}}},
		{"mutualTLS", "", `[{"mtls":[]}]`, [][]sources.AuthScheme{{{Type: "mutualTLS", SchemeName: "mtls"}}}},
		{"$ref'd scheme", "", `[{"ref":[]}]`, [][]sources.AuthScheme{{{Type: "apiKey", SchemeName: "ref", In: "header", Name: "X-Key"}}}},
		{"undefined scheme", "", `[{"nope":[]}]`, [][]sources.AuthScheme{{{Type: "unknown", SchemeName: "nope"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"openapi":"3.1.0",` + schemes
			if tc.global != "" {
				doc += `,"security":` + tc.global
			}
			op := `{}`
			if tc.op != "" {
				op = `{"security":` + tc.op + `}`
			}
			doc += `,"paths":{"/a":{"get":` + op + `}}}`
			api, err := sources.ParseAPI([]byte(doc), "https://x.example/openapi.json")
			if err != nil {
				t.Fatal(err)
			}
			if got := api.Operations[0].Auth; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("auth\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseAPISwaggerAuth(t *testing.T) {
	doc := `{"swagger":"2.0","securityDefinitions":{
		"b":{"type":"basic"},
		"k":{"type":"apiKey","in":"header","name":"X-K"},
		"o":{"type":"oauth2","flow":"application","tokenUrl":"https://x.example/t"}},
		"security":[{"b":[]}],
		"paths":{"/a":{"get":{},"post":{"security":[{"o":["w"]},{"k":[]}]},"put":{"security":[]}}}}`
	api, err := sources.ParseAPI([]byte(doc), "https://x.example/swagger.json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][][]sources.AuthScheme{
		"GET":  {{{Type: "http", SchemeName: "b", Scheme: "basic"}}},
		"POST": {{{Type: "oauth2", SchemeName: "o", Flows: []string{"clientCredentials"}, Scopes: []string{"w"}}}, {{Type: "apiKey", SchemeName: "k", In: "header", Name: "X-K"}}},
		"PUT":  {{{Type: "none"}}},
	}
	for _, op := range api.Operations {
		if !reflect.DeepEqual(op.Auth, want[op.Method]) {
			t.Errorf("%s auth %+v, want %+v", op.Method, op.Auth, want[op.Method])
		}
	}
}

func TestParseAPIRejects(t *testing.T) {
	for _, doc := range []string{``, `[]`, `{"openapi":"2.5"}`, `{"swagger":"1.2"}`, `<html></html>`, `{"openapi":"3.0.0"} trailing`, "a: [b\n"} {
		if _, err := sources.ParseAPI([]byte(doc), "https://x.example/o"); !errors.Is(err, sources.ErrNotAPIDescription) {
			t.Errorf("ParseAPI(%q) error %v, want ErrNotAPIDescription", doc, err)
		}
	}
}

func TestParseAPIRecursiveSchema(t *testing.T) {
	doc := `{"openapi":"3.1.0","paths":{"/t":{"post":{"requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Tree"}}}}}}},
		"components":{"schemas":{"Tree":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/components/schemas/Tree"}},"a":{"$ref":"#/components/schemas/A"}}},
		"A":{"$ref":"#/components/schemas/B"},"B":{"$ref":"#/components/schemas/A"}}}}`
	api, err := sources.ParseAPI([]byte(doc), "https://x.example/o.json")
	if err != nil {
		t.Fatal(err)
	}
	schema := api.Operations[0].RequestBody.Schema.(map[string]any)
	props := schema["properties"].(map[string]any)
	items := props["kids"].(map[string]any)["items"]
	if !reflect.DeepEqual(items, map[string]any{"$ref": "#/components/schemas/Tree"}) {
		t.Errorf("recursive reference not kept as $ref: %v", items)
	}
	if a := props["a"].(map[string]any); a["$ref"] != "#/components/schemas/A" {
		t.Errorf("A<->B loop: %v", a)
	}
}

func TestAPIEntriesIdentifiers(t *testing.T) {
	api, err := sources.ParseAPI(mustRead(t, "notes-3.0.json"), "https://notes.example/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := sources.APIEntries(api, "Notes.Example", sources.Provenance{URL: "https://notes.example/openapi.json"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range res.Entries {
		ids = append(ids, e.Identifier)
	}
	want := []string{
		"urn:air:notes.example:openapi:Quicknotes-API",
		"urn:air:notes.example:api:get-notes",     // no operationId: method and path
		"urn:air:notes.example:api:create-note",   // slugged operationId
		"urn:air:notes.example:api:create-note-2", // the same operationId again
	}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("identifiers %q, want %q", ids, want)
	}
	for _, bad := range []string{"localhost", "", "no_dots", "127.0.0.1:8080"} {
		if _, err := sources.APIEntries(api, bad, sources.Provenance{}); err == nil && bad != "" {
			t.Errorf("domain %q accepted", bad)
		}
	}
}
