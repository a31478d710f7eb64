package registry_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/ingest"
)

type buildResp struct {
	Domain   string          `json:"domain"`
	Manifest json.RawMessage `json:"manifest"`
	Sources  []struct {
		URL    string `json:"url"`
		Kind   string `json:"kind"`
		Status int    `json:"status"`
		SHA256 string `json:"sha256"`
		Error  string `json:"error"`
	} `json:"sources"`
	Warnings []string `json:"warnings"`
}

func TestManifestBuildFromDomain(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, nil)
	status, body := f.do(t, http.MethodPost, "/manifest/build", `{"domain":"Fixture.test"}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp buildResp
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	m, problems := ingest.ParseManifest(resp.Manifest)
	for _, p := range problems {
		if p.Severity == ingest.SeverityError {
			t.Errorf("built manifest does not validate: %s", p)
		}
	}
	kinds := map[string]int{}
	for _, e := range m.Entries {
		if !strings.HasPrefix(e.ID, "urn:air:fixture.test:") {
			t.Errorf("identifier %s is not anchored at fixture.test", e.ID)
		}
		var body struct {
			Metadata              map[string]any `json:"metadata"`
			RepresentativeQueries []string       `json:"representativeQueries"`
		}
		_ = json.Unmarshal(e.Body, &body)
		for _, k := range []string{"source.url", "source.fetchedAt", "source.httpStatus", "source.sha256"} {
			if body.Metadata[k] == nil {
				t.Errorf("%s: metadata lacks %s (every entry cites its fetch)", e.ID, k)
			}
		}
		if len(body.RepresentativeQueries) > 5 {
			t.Errorf("%s: %d representative queries", e.ID, len(body.RepresentativeQueries))
		}
		kinds[e.Type]++
	}
	// The MCP server and its two tools, the API and its two operations.
	if kinds["application/mcp-tool+json"] != 2 || kinds["application/openapi-operation+json"] != 2 || kinds["application/mcp-server-card+json"] != 1 {
		t.Fatalf("entry types %v", kinds)
	}
	// Representative queries come from the source text: the operation's
	// summary is one of them, nothing is invented.
	if !strings.Contains(string(resp.Manifest), `"Send an email"`) {
		t.Errorf("operation summary not among the queries: %s", resp.Manifest)
	}
	checkGolden(t, "manifest-build-fixture.json", body)

	// Nothing was stored.
	if n, _ := f.db.CountEntries(); n != 0 {
		t.Fatalf("build stored %d entries", n)
	}
}

func TestManifestBuildFromSources(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, nil)
	status, body := f.do(t, http.MethodPost, "/manifest/build",
		`{"domain":"fixture.test","sources":["https://fixture.test/openapi.json","https://mcp.fixture.test/mcp"]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp buildResp
	_ = json.Unmarshal(body, &resp)
	m, _ := ingest.ParseManifest(resp.Manifest)
	var ops, tools int
	for _, e := range m.Entries {
		switch e.Type {
		case "application/openapi-operation+json":
			ops++
		case "application/mcp-tool+json":
			tools++
		}
	}
	if ops != 2 || tools != 2 {
		t.Fatalf("ops %d tools %d from an API description and an MCP endpoint: %s", ops, tools, resp.Manifest)
	}
}

func TestManifestBuildBadInput(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, nil)
	tests := []struct {
		name, body string
		want       int
		field      string
		detail     string
	}{
		{"no domain", `{}`, 422, "domain", ""},
		{"domain not a string", `{"domain":7}`, 422, "domain", ""},
		{"URL not domain", `{"domain":"https://fixture.test/"}`, 422, "domain", ""},
		{"IP address", `{"domain":"10.0.0.1"}`, 422, "domain", ""},
		{"localhost", `{"domain":"localhost"}`, 422, "domain", ""},
		{"single label", `{"domain":"intranet"}`, 422, "domain", ""},
		{"unknown member", `{"domain":"fixture.test","x":1}`, 422, "x", ""},
		{"sources not URLs", `{"domain":"fixture.test","sources":["ftp://x"]}`, 422, "sources[0]", ""},
		{"sources not array", `{"domain":"fixture.test","sources":"https://fixture.test/"}`, 422, "sources", ""},
		{"private address", `{"domain":"private.test"}`, 422, "domain", "address"},
		{"unknown domain", `{"domain":"unknown.test"}`, 422, "domain", "resolve"},
		{"publishes nothing", `{"domain":"empty.test"}`, 422, "domain", "publishes no"},
		{"source is not a description", `{"domain":"fixture.test","sources":["https://fixture.test/page.html"]}`, 422, "", "none of the sources"},
		{"not JSON", `{"domain":`, 400, "", ""},
		{"not an object", `["fixture.test"]`, 422, "", ""},
		{"oversized", `{"domain":"fixture.test","pad":"` + strings.Repeat("x", 1<<20) + `"}`, 413, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, http.MethodPost, "/manifest/build", tc.body)
			if status != tc.want {
				t.Fatalf("status %d, want %d: %s", status, tc.want, body)
			}
			p := decodeProblem(t, body)
			if tc.field != "" && !p.hasField(tc.field) {
				t.Errorf("no error for %s: %s", tc.field, body)
			}
			if tc.detail != "" && !strings.Contains(p.Detail+string(body), tc.detail) {
				t.Errorf("detail lacks %q: %s", tc.detail, body)
			}
		})
	}
	if n, _ := f.db.CountEntries(); n != 0 {
		t.Fatalf("bad input stored %d entries", n)
	}
}

type doctorResp struct {
	Target      string         `json:"target"`
	ManifestURL string         `json:"manifestUrl"`
	Counts      map[string]int `json:"counts"`
	Findings    []struct {
		Severity   string `json:"severity"`
		Code       string `json:"code"`
		Pointer    string `json:"pointer"`
		Identifier string `json:"identifier"`
		Message    string `json:"message"`
	} `json:"findings"`
}

func (d doctorResp) has(code, pointer string) bool {
	for _, f := range d.Findings {
		if f.Code == code && (pointer == "*" || f.Pointer == pointer) {
			return true
		}
	}
	return false
}

func doctor(t *testing.T, f *fixture, body string) (doctorResp, []byte) {
	t.Helper()
	status, out := f.do(t, http.MethodPost, "/doctor", body)
	if status != http.StatusOK {
		t.Fatalf("doctor %s: status %d: %s", body, status, out)
	}
	var d doctorResp
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	return d, out
}

func TestDoctorManifest(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, nil)
	// One manifest breaking every document rule, entry by entry.
	bad := `{"manifest":{"specVersion":"0.9","host":{},"collections":[],"entries":[
	  {"identifier":"not-a-urn","displayName":"A","type":"application/mcp-server-card+json","url":"https://a.test/c.json","representativeQueries":["q1","q2"]},
	  {"identifier":"urn:ai:b.test:x","type":"application/mcp-server+json","url":"https://b.test/c.json","data":{},"representativeQueries":"one"},
	  {"identifier":"urn:air:c.test:x","displayName":"C","type":"not a type","representativeQueries":["only one"],"updatedAt":"yesterday"},
	  {"identifier":"urn:air:c.test:x","displayName":"C again","type":"application/agent-skills+zip","url":"https://c.test/s.zip","trustManifest":{"identityType":"did"},"metadata":{"nested":{"a":1}}},
	  {"identifier":"urn:air:d.test:y","displayName":"D","type":"image/png","url":"ftp://d.test/y","representativeQueries":[1,2]},
	  "not an object"
	]}}`
	d, body := doctor(t, f, bad)
	want := []struct{ code, pointer string }{
		{"spec-version.unsupported", "/specVersion"},
		{"host.invalid", "/host"},
		{"collections.removed", "/collections"},
		{"identifier.invalid", "/entries/0/identifier"},
		{"identifier.legacy-prefix", "/entries/1/identifier"},
		{"display-name.missing", "/entries/1/displayName"},
		{"type.deprecated", "/entries/1/type"},
		{"url-data.both", "/entries/1"},
		{"representative-queries.not-strings", "/entries/1/representativeQueries"},
		{"type.invalid", "/entries/2/type"},
		{"url-data.neither", "/entries/2"},
		{"representative-queries.count", "/entries/2/representativeQueries"},
		{"updated-at.invalid", "/entries/2/updatedAt"},
		{"identifier.duplicate", "/entries/3/identifier"},
		{"trust-manifest.identity-missing", "/entries/3/trustManifest/identity"},
		{"metadata.not-flat", "/entries/3/metadata/nested"},
		{"representative-queries.missing", "/entries/3/representativeQueries"},
		{"type.unrecognised", "/entries/4/type"},
		{"url.invalid", "/entries/4/url"},
		{"representative-queries.not-strings", "/entries/4/representativeQueries"},
		{"entry.not-object", "/entries/5"},
	}
	for _, w := range want {
		if !d.has(w.code, w.pointer) {
			t.Errorf("no %s at %s", w.code, w.pointer)
		}
	}
	if d.Target != "manifest" || d.Counts["error"] == 0 {
		t.Errorf("target %q counts %v", d.Target, d.Counts)
	}
	// A manifest body is only read: no squatting check without a domain,
	// no fetches, nothing stored.
	if d.has("publisher.squatted", "*") || d.has("url.unreachable", "*") {
		t.Errorf("manifest mode fetched or judged publishers: %s", body)
	}
	checkGolden(t, "doctor-manifest.json", body)

	t.Run("not JSON", func(t *testing.T) {
		d, _ := doctor(t, f, `{"manifest":"{\"entries\": [ oops"}`)
		if !d.has("json.invalid", "") || len(d.Findings) != 1 {
			t.Fatalf("%+v", d)
		}
	})
	t.Run("clean manifest", func(t *testing.T) {
		d, body := doctor(t, f, `{"manifest":{"specVersion":"1.0","entries":[{"identifier":"urn:air:a.test:x","displayName":"X","type":"application/mcp-server-card+json","url":"https://a.test/x.json","representativeQueries":["find x","use x"]}]}}`)
		if d.Counts["error"] != 0 || d.Counts["warning"] != 0 {
			t.Fatalf("clean manifest has findings: %s", body)
		}
	})
	t.Run("entries missing", func(t *testing.T) {
		d, _ := doctor(t, f, `{"manifest":{"specVersion":"1.0"}}`)
		if !d.has("entries.missing", "/entries") {
			t.Fatalf("%+v", d)
		}
	})
}

func TestDoctorDomain(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, nil)
	d, body := doctor(t, f, `{"domain":"fixture.test"}`)
	for _, w := range []struct{ code, pointer string }{
		{"url.http-status", "/entries/1/url"},
		{"type.mismatch", "/entries/2/url"},
		{"publisher.squatted", "/entries/3/identifier"},
		{"updated-at.stale", "/entries/4/updatedAt"},
		{"type.deprecated", "/entries/4/type"},
		{"representative-queries.missing", "/entries/4/representativeQueries"},
		{"identifier.duplicate", "/entries/5/identifier"},
		{"index.not-indexed", ""},
	} {
		if !d.has(w.code, w.pointer) {
			t.Errorf("no %s at %s", w.code, w.pointer)
		}
	}
	if d.has("url.unreachable", "/entries/0/url") || d.has("type.mismatch", "/entries/0/url") {
		t.Errorf("the good card was reported: %s", body)
	}
	checkGolden(t, "doctor-domain.json", body)

	tests := []struct {
		name, body, code string
	}{
		{"legacy path only", `{"domain":"legacy.test"}`, "discovery.legacy-path"},
		{"publishes nothing", `{"domain":"empty.test"}`, "manifest.not-found"},
		{"private address", `{"domain":"private.test"}`, "fetch.address-forbidden"},
		{"unknown domain", `{"domain":"unknown.test"}`, "fetch.host-unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, body := doctor(t, f, tc.body)
			if !d.has(tc.code, "*") {
				t.Fatalf("no %s: %s", tc.code, body)
			}
		})
	}
}

func TestDoctorDomainConsultsIndex(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, []string{
		`{"identifier":"urn:air:fixture.test:mcp:notes","displayName":"Fixture Notes MCP","type":"application/mcp-server-card+json","url":"https://fixture.test/.well-known/mcp/server-card.json","representativeQueries":["take a note","search my notes"]}`,
	})
	d, body := doctor(t, f, `{"domain":"fixture.test"}`)
	if !d.has("index.last-fetch", "") || d.has("index.not-indexed", "*") {
		t.Fatalf("index not consulted: %s", body)
	}
	// Valid entries of the manifest that are not held are named.
	found := false
	for _, fi := range d.Findings {
		if fi.Code == "index.missing-entry" && fi.Identifier == "urn:air:fixture.test:mcp:page" {
			found = true
		}
		if fi.Code == "index.missing-entry" && fi.Identifier == "urn:air:fixture.test:mcp:notes" {
			t.Errorf("a held entry is reported missing")
		}
	}
	if !found {
		t.Errorf("missing entry not reported: %s", body)
	}
}

func TestDoctorBadInput(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, nil)
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"neither", `{}`, 422},
		{"both", `{"domain":"fixture.test","manifest":{}}`, 422},
		{"manifest a number", `{"manifest":5}`, 422},
		{"bad domain", `{"domain":"a b"}`, 422},
		{"unknown member", `{"manifest":{},"score":1}`, 422},
		{"oversized", `{"manifest":"` + strings.Repeat("x", 1<<20) + `"}`, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, http.MethodPost, "/doctor", tc.body)
			if status != tc.want {
				t.Fatalf("status %d: %s", status, body)
			}
		})
	}
}
