package registry_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
)

type toolsResp struct {
	Total   int `json:"total"`
	Results []struct {
		Identifier  string          `json:"identifier"`
		Kind        string          `json:"kind"`
		Type        string          `json:"type"`
		Score       int             `json:"score"`
		Publisher   string          `json:"publisher"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Call        struct {
			Method    string          `json:"method"`
			Path      string          `json:"path"`
			BaseURL   string          `json:"baseUrl"`
			Auth      json.RawMessage `json:"auth"`
			Endpoint  string          `json:"endpoint"`
			Transport string          `json:"transport"`
			Tool      string          `json:"tool"`
		} `json:"call"`
	} `json:"results"`
}

// toolCorpus is fixture.test's built entries plus the generic fixture
// corpus (servers, agents and skills that /tools must never return).
func toolCorpus(t *testing.T) []string {
	return append(builtEntries(t), fixtureEntries...)
}

func TestToolsSearch(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, toolCorpus(t))

	status, body := f.do(t, http.MethodGet, "/tools?q=send+an+email", "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp toolsResp
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) == 0 {
		t.Fatalf("no results: %s", body)
	}
	top := resp.Results[0]
	if top.Identifier != "urn:air:fixture.test:api:sendEmail" || top.Kind != "api-operation" {
		t.Fatalf("top result %+v", top)
	}
	if top.Call.Method != "POST" || top.Call.Path != "/emails" || top.Call.BaseURL != "https://api.fixture.test/v1" ||
		!strings.Contains(string(top.Call.Auth), `"bearer"`) {
		t.Fatalf("the operation is not callable from the result: %+v", top.Call)
	}
	if top.InputSchema != nil {
		t.Errorf("schema without withSchema")
	}
	for _, r := range resp.Results {
		if r.Type != "application/mcp-tool+json" && r.Type != "application/openapi-operation+json" {
			t.Errorf("/tools returned a %s (%s)", r.Type, r.Identifier)
		}
	}

	// An MCP tool carries endpoint, transport and name; withSchema adds its
	// input schema.
	status, body = f.do(t, http.MethodPost, "/tools", `{"q":"store a short note","limit":1,"withSchema":true}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	resp = toolsResp{}
	_ = json.Unmarshal(body, &resp)
	if len(resp.Results) != 1 {
		t.Fatalf("limit 1: %s", body)
	}
	tool := resp.Results[0]
	if tool.Kind != "mcp-tool" || tool.Call.Tool != "add_note" || tool.Call.Endpoint != "https://mcp.fixture.test/mcp" ||
		tool.Call.Transport != "streamable-http" || !strings.Contains(string(tool.InputSchema), `"text"`) {
		t.Fatalf("tool %+v schema %s", tool, tool.InputSchema)
	}

	// withSchema on an operation describes parameters and body.
	_, body = f.do(t, http.MethodGet, "/tools?q=send+an+email&limit=1&withSchema=true", "")
	resp = toolsResp{}
	_ = json.Unmarshal(body, &resp)
	if len(resp.Results) != 1 || !strings.Contains(string(resp.Results[0].InputSchema), `"body"`) {
		t.Fatalf("operation schema: %s", body)
	}

	// A filter narrows within tool types.
	_, body = f.do(t, http.MethodPost, "/tools", `{"q":"email","filter":{"type":"application/mcp-tool+json"}}`)
	resp = toolsResp{}
	_ = json.Unmarshal(body, &resp)
	for _, r := range resp.Results {
		if r.Kind != "mcp-tool" {
			t.Fatalf("filter ignored: %s", body)
		}
	}
}

func TestToolsBadInput(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, nil)
	tests := []struct {
		name, method, path, body string
		want                     int
		field                    string
	}{
		{"limit zero", "GET", "/tools?q=x&limit=0", "", 422, "limit"},
		{"limit too big", "GET", "/tools?q=x&limit=101", "", 422, "limit"},
		{"limit not a number", "GET", "/tools?q=x&limit=ten", "", 422, "limit"},
		{"withSchema not bool", "GET", "/tools?q=x&withSchema=maybe", "", 422, "withSchema"},
		{"unknown parameter", "GET", "/tools?q=x&page=2", "", 422, "page"},
		{"q too long", "GET", "/tools?q=" + strings.Repeat("a", 1025), "", 422, "q"},
		{"post limit", "POST", "/tools", `{"q":"x","limit":500}`, 422, "limit"},
		{"post q type", "POST", "/tools", `{"q":5}`, 422, "q"},
		{"post withSchema type", "POST", "/tools", `{"q":"x","withSchema":"yes"}`, 422, "withSchema"},
		{"post type outside tools", "POST", "/tools", `{"q":"x","filter":{"type":"application/a2a-agent-card+json"}}`, 422, "filter.type"},
		{"post unknown filter key", "POST", "/tools", `{"q":"x","filter":{"colour":"red"}}`, 422, "filter.colour"},
		{"post unknown member", "POST", "/tools", `{"query":"x"}`, 422, "query"},
		{"post not JSON", "POST", "/tools", `{"q":`, 400, ""},
		{"post oversized", "POST", "/tools", `{"q":"` + strings.Repeat("x", 1<<20) + `"}`, 413, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, tc.method, tc.path, tc.body)
			if status != tc.want {
				t.Fatalf("status %d, want %d: %s", status, tc.want, body)
			}
			if tc.field != "" && !decodeProblem(t, body).hasField(tc.field) {
				t.Fatalf("no error for %s: %s", tc.field, body)
			}
		})
	}
}

func TestToolsIndexHTML(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, toolCorpus(t))
	resp, err := f.srv.Client().Get(f.srv.URL + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("content type %q", ct)
	}
	status, page := f.do(t, http.MethodGet, "/tools", "")
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	html := string(page)
	for _, want := range []string{"Capability index", "Send an email", "POST https://api.fixture.test/v1/emails", "add_note", "https://mcp.fixture.test/mcp", `id="cap-email"`} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Servers, agents and skills are not tools.
	if strings.Contains(html, "Weather Forecast") || strings.Contains(html, "Hub Registry") {
		t.Errorf("page lists non-tool entries")
	}
	// The poisoned description is text, escaped, never markup.
	if strings.Contains(html, "<IMPORTANT>") {
		t.Errorf("tool description not escaped")
	}
	if strings.Contains(html, "<script") || strings.Contains(html, "http://") && strings.Contains(html, "<link") {
		t.Errorf("page uses scripts or external assets")
	}
	renderInChromium(t, f.srv.URL+"/tools", []string{"Send an email", "add_note", "Capability index"})
}

// renderInChromium loads url in headless Chromium (Debian package
// "chromium"), asserts the rendered DOM shows want, and saves a screenshot
// to testdata/tools-index.png for a human to look at. It skips, saying so,
// when Chromium is not installed.
func renderInChromium(t *testing.T, url string, want []string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if bin, err = exec.LookPath("chromium-browser"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("chromium not installed; CI installs it (.ci/run: apt-get install -y chromium)")
			}
			t.Skip("chromium not installed (Debian: apt-get install -y chromium); skipping the browser rendering check")
		}
	}
	args := func(extra ...string) []string {
		return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + t.TempDir(), "--window-size=1200,900"}, extra...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := exec.CommandContext(ctx, bin, args("--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, w := range want {
		if !strings.Contains(string(dom), w) {
			t.Errorf("rendered page lacks %q", w)
		}
	}
	shot := filepath.Join(t.TempDir(), "tools.png")
	if out, err := exec.CommandContext(ctx, bin, args("--screenshot="+shot, url)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v: %s", err, out)
	}
	info, err := os.Stat(shot)
	if err != nil || info.Size() < 5000 {
		t.Fatalf("screenshot missing or blank: %v", err)
	}
	if dst := os.Getenv("ARDX_SCREENSHOT"); dst != "" {
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(dst, b, 0o644)
	}
}

func TestToolSafety(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, toolCorpus(t))
	status, body := f.do(t, http.MethodGet, "/tool-safety", "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp struct {
		Tools             int `json:"tools"`
		ToolsWithFindings int `json:"toolsWithFindings"`
		Rules             []struct {
			Rule     string `json:"rule"`
			Findings int    `json:"findings"`
			Examples []struct {
				Tool    string `json:"tool"`
				Excerpt string `json:"excerpt"`
			} `json:"examples"`
		} `json:"rules"`
		RugPulls struct {
			Count int `json:"count"`
			Items []struct {
				Identifier string `json:"identifier"`
			} `json:"items"`
		} `json:"rugPulls"`
		ChangeSeq uint64 `json:"changeSeq"`
	}
	_ = json.Unmarshal(body, &resp)
	if resp.Tools != 2 || resp.ToolsWithFindings != 1 {
		t.Fatalf("tools %d with findings %d: %s", resp.Tools, resp.ToolsWithFindings, body)
	}
	poisoned := false
	for _, r := range resp.Rules {
		for _, e := range r.Examples {
			if e.Tool == "search_notes" && (r.Rule == "instruction-to-model" || r.Rule == "credential-reference") {
				poisoned = true
			}
			if e.Tool == "add_note" {
				t.Errorf("the clean tool was flagged: %+v", e)
			}
		}
	}
	if !poisoned {
		t.Fatalf("poisoned description not shown: %s", body)
	}
	if strings.Contains(string(body), `"score"`) {
		t.Errorf("tool-safety carries a score")
	}
	checkGolden(t, "tool-safety.json", body)

	// A rug pull: the crawler reports a changed description hash. The
	// cached scan is recomputed because the change sequence moved.
	if _, err := f.db.AppendChanges([]kv.Change{{Time: fixedNow, Kind: registry.ChangeToolChanged,
		ID: "urn:air:fixture.test:mcp:test.fixture-notes:search_notes", Publisher: "fixture.test", Source: "crawl"}}); err != nil {
		t.Fatal(err)
	}
	_, body = f.do(t, http.MethodGet, "/tool-safety?domain=fixture.test&rule=credential-reference&limit=1", "")
	resp.RugPulls.Items = nil
	_ = json.Unmarshal(body, &resp)
	if resp.RugPulls.Count != 1 || len(resp.RugPulls.Items) != 1 || resp.RugPulls.Items[0].Identifier != "urn:air:fixture.test:mcp:test.fixture-notes:search_notes" {
		t.Fatalf("rug pull not listed: %s", body)
	}
	if len(resp.Rules) != 1 || resp.Rules[0].Rule != "credential-reference" {
		t.Fatalf("rule filter: %s", body)
	}
	// Another domain sees neither the tools nor the rug pull.
	_, body = f.do(t, http.MethodGet, "/tool-safety?domain=weather.test", "")
	resp.RugPulls.Items = nil
	_ = json.Unmarshal(body, &resp)
	if resp.Tools != 0 || resp.RugPulls.Count != 0 {
		t.Fatalf("domain filter: %s", body)
	}

	for _, tc := range []struct{ name, path, field string }{
		{"unknown rule", "/tool-safety?rule=bad-vibes", "rule"},
		{"bad domain", "/tool-safety?domain=not_a_domain", "domain"},
		{"limit", "/tool-safety?limit=0", "limit"},
		{"unknown parameter", "/tool-safety?score=1", "score"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, http.MethodGet, tc.path, "")
			if status != http.StatusUnprocessableEntity || !decodeProblem(t, body).hasField(tc.field) {
				t.Fatalf("status %d: %s", status, body)
			}
		})
	}
}

// TestSearchScoreIgnoresSafety checks that the safety scan never reaches
// search: the poisoned tool ranks exactly as it did before /tool-safety ran.
func TestSearchScoreIgnoresSafety(t *testing.T) {
	f := newPublisherServer(t, registry.Config{}, toolCorpus(t))
	q := `{"query":{"text":"search notes by keyword"},"federation":"none"}`
	before := f.search(t, q)
	f.do(t, http.MethodGet, "/tool-safety", "")
	after := f.search(t, q)
	if mustJSON(t, before) != mustJSON(t, after) {
		t.Fatalf("search changed after the safety scan")
	}
}
