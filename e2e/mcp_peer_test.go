//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The MCP peer is the reference server of the MCP project,
// @modelcontextprotocol/server-everything, pinned in e2e/npm/package.json
// and installed by npmDir with the official clients. It is a server ardx
// did not write: building a manifest from it checks ardx's MCP client
// against the SDK every MCP server is built on (sessions, SSE answers,
// tools registered only after initialize).
const (
	// peerDomain is the domain the peer is published under; --resolve sends
	// its fetches to the loopback port, so URNs keep this name.
	peerDomain = "everything.test"
	// peerPath is where server-everything's Streamable HTTP transport
	// listens (dist/transports/streamableHttp.js: app.post("/mcp")).
	peerPath   = "/mcp"
	peerScript = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)

// peerPreload runs inside the peer's node process before the server does.
// server-everything listens with app.listen(PORT), which binds every
// interface and, given PORT=0, only ever prints "port 0"; the preload binds
// port-only listens to 127.0.0.1 (the tier starts nothing off loopback) and
// reports the port the kernel chose, so there is no free-port race.
const peerPreload = `import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if ((typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  this.once("listening", () => {
    const a = this.address();
    if (a && typeof a === "object") process.stderr.write("ardx-e2e-peer listening " + a.address + " " + a.port + "\n");
  });
  return listen.apply(this, args);
};
`

var peerListeningRE = regexp.MustCompile(`ardx-e2e-peer listening 127\.0\.0\.1 (\d+)\n`)

// peerProc is the running server-everything process. Its stdout and stderr
// go to one buffer, which is watched for the preload's listening line.
type peerProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, after done

	mu    sync.Mutex
	out   bytes.Buffer
	port  string
	ready chan struct{}
}

// Write collects the peer's output; os/exec calls it from one goroutine at
// a time because stdout and stderr share it.
func (p *peerProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Write(b)
	if p.port == "" {
		if m := peerListeningRE.FindSubmatch(p.out.Bytes()); m != nil {
			p.port = string(m[1])
			close(p.ready)
		}
	}
	return len(b), nil
}

func (p *peerProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startEverything runs server-everything over Streamable HTTP on a loopback
// port the kernel picks, waits until /mcp answers HTTP and registers its
// stop (SIGINT, which the server handles, then SIGKILL) with t.Cleanup.
func startEverything(t *testing.T, dir string) (*peerProc, string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, peerScript)); err != nil {
		t.Fatalf("server-everything is not installed in %s (is it pinned in package.json and the lock?): %v", dir, err)
	}
	p := &peerProc{done: make(chan struct{}), ready: make(chan struct{})}
	preload := "data:text/javascript;base64," + base64.StdEncoding.EncodeToString([]byte(peerPreload))
	p.cmd = exec.Command("node", "--import", preload, peerScript, "streamableHttp")
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), "PORT=0")
	p.cmd.Stdout, p.cmd.Stderr = p, p
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start server-everything: %v", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })

	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("server-everything exited before listening (%v):\n%s", p.err, tailOf(p.log(), 4000))
	case <-time.After(30 * time.Second):
		t.Fatalf("server-everything did not listen within 30 s:\n%s", tailOf(p.log(), 4000))
	}
	base := "http://127.0.0.1:" + p.port
	// A GET without a session is the cheapest request that reaches the MCP
	// route: the server answers 400 with a JSON-RPC error once it serves.
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(base + peerPath)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("server-everything on port %s does not answer: %v\n%s", p.port, err, tailOf(p.log(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("server-everything serving on %s%s %v after start", base, peerPath, time.Since(start).Round(time.Millisecond))
	return p, p.port
}

func (p *peerProc) stop(t *testing.T) {
	if stopProcess(p.cmd, p.done, syscall.SIGINT, 5*time.Second) {
		t.Logf("server-everything ignored SIGINT for 5 s and was killed")
	}
}

// builtEntry is the part of a built manifest entry the test reads.
type builtEntry struct {
	Identifier            string          `json:"identifier"`
	DisplayName           string          `json:"displayName"`
	Type                  string          `json:"type"`
	Description           string          `json:"description"`
	Capabilities          []string        `json:"capabilities"`
	RepresentativeQueries []string        `json:"representativeQueries"`
	Metadata              map[string]any  `json:"metadata"`
	Data                  json.RawMessage `json:"data"`
}

// builtTool is a tool entry's inline data.
type builtTool struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Annotations *struct {
		Title string `json:"title"`
	} `json:"annotations"`
	Server struct {
		Identifier string `json:"identifier"`
		Endpoint   string `json:"endpoint"`
		Transport  string `json:"transport"`
		Tool       string `json:"tool"`
	} `json:"server"`
}

// Media types of the entries a build makes from an MCP server
// (registry/sources).
const (
	typeMCPServer = "application/mcp-server-card+json"
	typeMCPTool   = "application/mcp-tool+json"
)

var sha256HexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestMCPPeer is the check with a real MCP server as a peer:
// server-everything runs over Streamable HTTP on loopback, `ardx registry`
// reaches it as everything.test through --resolve, and POST /manifest/build
// turns it into a manifest that POST /doctor passes, with the server and
// every tool the official SDK client lists, each citing the fetch it came
// from and asked for with queries taken from the tool's own text. The
// manifest is then ingested with `ardx ingest` and GET /tools finds the
// echo tool with its endpoint and name.
func TestMCPPeer(t *testing.T) {
	dir := npmDir(t)
	peer, port := startEverything(t, dir)

	// What the official client sees is the reference the build is held to;
	// mcp-client.mjs also calls the facilitator's tool names, which this
	// server does not have, and records those failures per call.
	var official mcpResult
	took := runNode(t, dir, "mcp-client.mjs", &official, "http://127.0.0.1:"+port+peerPath)
	if official.Error != "" || official.ServerInfo == nil || len(official.Tools) == 0 {
		t.Fatalf("the official client could not list server-everything (%v): %s, %+v", took, official.Error, official.ServerInfo)
	}
	officialDesc := map[string]string{}
	for _, tl := range official.Tools {
		officialDesc[tl.Name] = tl.Description
	}
	if _, ok := officialDesc["echo"]; !ok {
		t.Fatalf("the official client lists no echo tool: %v", slices.Collect(maps.Keys(officialDesc)))
	}
	t.Logf("official client: %s %s lists %d tools (%v)", official.ServerInfo.Name, official.ServerInfo.Version,
		len(official.Tools), took.Round(time.Millisecond))

	reg := startArdx(t, []string{"registry"}, "registry", "--data", t.TempDir(),
		"--registry-addr", "127.0.0.1:0", "--no-default-corpus",
		"--resolve", peerDomain+"="+"127.0.0.1:"+port)
	base := reg.url("registry")

	source := "http://" + peerDomain + peerPath
	before := time.Now().Add(-time.Second).Truncate(time.Second) // fetchedAt has second precision
	start := time.Now()
	status, raw := postJSON(t, base+"/manifest/build", `{"domain":"`+peerDomain+`","sources":["`+source+`"]}`)
	buildTook := time.Since(start)
	if status != http.StatusOK {
		t.Fatalf("POST /manifest/build: %d %s\nardx log:\n%s\nserver-everything log:\n%s", status, raw,
			tailOf(reg.log(), 3000), tailOf(peer.log(), 3000))
	}
	var built struct {
		Domain   string          `json:"domain"`
		Manifest json.RawMessage `json:"manifest"`
		Sources  []struct {
			URL, Request, Kind, SHA256, Code, Error string
			Status                                  int
		} `json:"sources"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(raw, &built); err != nil {
		t.Fatalf("build answer %s: %v", raw, err)
	}
	var manifest struct {
		Entries []builtEntry `json:"entries"`
	}
	if err := json.Unmarshal(built.Manifest, &manifest); err != nil {
		t.Fatalf("built manifest %s: %v", built.Manifest, err)
	}
	t.Logf("POST /manifest/build: %d entries in %v; sources %+v; warnings %q", len(manifest.Entries),
		buildTook.Round(time.Millisecond), built.Sources, built.Warnings)

	// The build reached the peer through --resolve, under the domain's name.
	if len(built.Sources) == 0 {
		t.Fatalf("the build reports no source")
	}
	for _, s := range built.Sources {
		if s.URL != source || s.Kind != "mcp-tools" || s.Status != http.StatusOK || s.Error != "" || !sha256HexRE.MatchString(s.SHA256) {
			t.Errorf("source %+v: want %s read as mcp-tools, 200, with a sha256", s, source)
		}
	}

	t.Run("doctor passes the manifest", func(t *testing.T) {
		status, raw := postJSON(t, base+"/doctor", `{"manifest":`+string(built.Manifest)+`}`)
		var doc struct {
			Entries  int            `json:"entries"`
			Counts   map[string]int `json:"counts"`
			Findings []finding      `json:"findings"`
		}
		if status != http.StatusOK || json.Unmarshal(raw, &doc) != nil {
			t.Fatalf("POST /doctor: %d %s", status, raw)
		}
		if doc.Entries != len(manifest.Entries) {
			t.Errorf("doctor read %d entries, the manifest has %d", doc.Entries, len(manifest.Entries))
		}
		for _, f := range doc.Findings {
			if f.Severity == "error" {
				t.Errorf("doctor error %s at %s: %s", f.Code, f.Pointer, f.Message)
			}
		}
		if doc.Counts["error"] != 0 {
			t.Errorf("doctor counts %v: want no errors", doc.Counts)
		}
		t.Logf("doctor: %d entries, counts %v", doc.Entries, doc.Counts)
	})

	var server *builtEntry
	tools := map[string]builtEntry{}
	for i, e := range manifest.Entries {
		switch e.Type {
		case typeMCPServer:
			if server != nil {
				t.Errorf("second server entry %s", e.Identifier)
			}
			server = &manifest.Entries[i]
		case typeMCPTool:
			var d builtTool
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatalf("tool entry %s data %s: %v", e.Identifier, e.Data, err)
			}
			tools[d.Name] = e
		default:
			t.Errorf("entry %s has type %q; an MCP server yields only %s and %s", e.Identifier, e.Type, typeMCPServer, typeMCPTool)
		}
	}
	if server == nil {
		t.Fatalf("no %s entry among %d", typeMCPServer, len(manifest.Entries))
	}

	t.Run("server entry", func(t *testing.T) {
		prefix := "urn:air:" + peerDomain + ":mcp:"
		if !strings.HasPrefix(server.Identifier, prefix) {
			t.Errorf("server identifier %q, want %s...", server.Identifier, prefix)
		}
		checkCitation(t, *server, source, before)
		if got := server.Metadata["mcp.endpoint"]; got != source {
			t.Errorf("server mcp.endpoint %v, want %s", got, source)
		}
		var card struct {
			Name    string `json:"name"`
			Remotes []struct {
				Type, URL string
			} `json:"remotes"`
		}
		if err := json.Unmarshal(server.Data, &card); err != nil {
			t.Fatalf("server data %s: %v", server.Data, err)
		}
		if card.Name != official.ServerInfo.Name {
			t.Errorf("server card name %q, the server calls itself %q", card.Name, official.ServerInfo.Name)
		}
		if len(card.Remotes) != 1 || card.Remotes[0].URL != source || card.Remotes[0].Type != "streamable-http" {
			t.Errorf("server card remotes %+v, want one streamable-http remote at %s", card.Remotes, source)
		}
		for name := range officialDesc {
			if !slices.Contains(server.Capabilities, name) {
				t.Errorf("server capabilities lack %s: %v", name, server.Capabilities)
			}
		}
	})

	t.Run("tool entries", func(t *testing.T) {
		// ardx may see more tools than the official client (server-everything
		// registers some only for clients with sampling, roots or
		// elicitation), never fewer.
		for name, desc := range officialDesc {
			e, ok := tools[name]
			if !ok {
				t.Errorf("tool %s, listed by the official client, has no entry", name)
				continue
			}
			var d builtTool
			_ = json.Unmarshal(e.Data, &d)
			if d.Description != desc {
				t.Errorf("tool %s description %q, the server lists %q", name, d.Description, desc)
			}
		}
		for name, e := range tools {
			t.Run(name, func(t *testing.T) {
				var d builtTool
				_ = json.Unmarshal(e.Data, &d)
				if want := server.Identifier + ":"; !strings.HasPrefix(e.Identifier, want) {
					t.Errorf("identifier %q, want %s...", e.Identifier, want)
				}
				if d.Server.Identifier != server.Identifier || d.Server.Endpoint != source || d.Server.Tool != name ||
					d.Server.Transport != "streamable-http" {
					t.Errorf("data.server %+v, want %s at %s calling %s", d.Server, server.Identifier, source, name)
				}
				if !slices.Equal(e.Capabilities, []string{name}) {
					t.Errorf("capabilities %v, want [%s]", e.Capabilities, name)
				}
				checkCitation(t, e, source, before)
				if e.Metadata["mcp.tool"] != name || e.Metadata["mcp.server"] != server.Identifier {
					t.Errorf("metadata mcp.tool %v mcp.server %v", e.Metadata["mcp.tool"], e.Metadata["mcp.server"])
				}
				// Queries come from the tool's own words: its title, the
				// first sentence of its description, its annotation title.
				if len(e.RepresentativeQueries) == 0 && (d.Title != "" || d.Description != "") {
					t.Errorf("no representative queries from title %q, description %q", d.Title, d.Description)
				}
				text := strings.ToLower(strings.Join(strings.Fields(d.Title+" \n "+d.Description+" \n "+annotationTitleOf(d)), " "))
				for _, q := range e.RepresentativeQueries {
					if !strings.Contains(text, strings.ToLower(q)) {
						t.Errorf("query %q is not in the tool's title or description %q", q, text)
					}
				}
			})
		}
		echo := tools["echo"]
		if !slices.Contains(echo.RepresentativeQueries, firstSentenceOf(officialDesc["echo"])) {
			t.Errorf("echo queries %q lack its description's first sentence %q", echo.RepresentativeQueries, firstSentenceOf(officialDesc["echo"]))
		}
	})

	// The build stores nothing: the echo tool is unknown to this registry.
	if status, raw := getURL(t, base+"/tools?q=echo"); status != http.StatusOK || strings.Contains(string(raw), tools["echo"].Identifier) {
		t.Errorf("GET /tools?q=echo after a build: %d %s; want 200 without the built entry", status, raw)
	}

	t.Run("ingest and find the echo tool", func(t *testing.T) {
		echoID := tools["echo"].Identifier
		if echoID == "" {
			t.Fatal("no echo entry to look for")
		}
		file := filepath.Join(t.TempDir(), "ard.json")
		if err := os.WriteFile(file, built.Manifest, 0o644); err != nil {
			t.Fatal(err)
		}
		data := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, binary(t), "ingest", "--data", data, file)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ardx ingest of the built manifest: %v\n%s\n%s", err, out, tailOf(stderr.String(), 3000))
		}
		t.Logf("ardx ingest: %v\n%s", time.Since(start).Round(time.Millisecond), bytes.TrimSpace(out))

		p := startArdx(t, []string{"registry"}, "registry", "--data", data, "--registry-addr", "127.0.0.1:0", "--no-default-corpus")
		status, raw := getURL(t, p.url("registry")+"/tools?q=echo")
		var res struct {
			Total   uint64 `json:"total"`
			Results []struct {
				Identifier string `json:"identifier"`
				Kind       string `json:"kind"`
				Call       struct {
					Endpoint, Transport, Tool, Server string
				} `json:"call"`
			} `json:"results"`
		}
		if status != http.StatusOK || json.Unmarshal(raw, &res) != nil || len(res.Results) == 0 {
			t.Fatalf("GET /tools?q=echo: %d %s", status, raw)
		}
		top := res.Results[0]
		if top.Identifier != echoID || top.Kind != "mcp-tool" || top.Call.Endpoint != source || top.Call.Tool != "echo" ||
			top.Call.Transport != "streamable-http" {
			t.Errorf("top tool for echo %+v, want %s (mcp-tool) calling echo at %s over streamable-http", top, echoID, source)
		}
		if top.Call.Server != "" && top.Call.Server != server.Identifier {
			t.Errorf("echo's server %q, want %s", top.Call.Server, server.Identifier)
		}
	})
}

// checkCitation checks an entry's metadata cites the fetch it came from:
// the URL, the HTTP status, the body's sha256 and when, within this test.
func checkCitation(t *testing.T, e builtEntry, source string, after time.Time) {
	t.Helper()
	m := e.Metadata
	if m["source.url"] != source {
		t.Errorf("%s source.url %v, want %s", e.Identifier, m["source.url"], source)
	}
	if st, _ := m["source.httpStatus"].(float64); st != http.StatusOK {
		t.Errorf("%s source.httpStatus %v, want 200", e.Identifier, m["source.httpStatus"])
	}
	if h, _ := m["source.sha256"].(string); !sha256HexRE.MatchString(h) {
		t.Errorf("%s source.sha256 %v is not a sha256", e.Identifier, m["source.sha256"])
	}
	at, _ := m["source.fetchedAt"].(string)
	ts, err := time.Parse(time.RFC3339, at)
	if err != nil || ts.Before(after) || ts.After(time.Now().Add(time.Second)) {
		t.Errorf("%s source.fetchedAt %q, want a time during this build (%v)", e.Identifier, at, err)
	}
	if req, _ := m["source.request"].(string); !strings.HasPrefix(req, "POST") {
		t.Errorf("%s source.request %q, want the MCP POST exchange", e.Identifier, req)
	}
}

// firstSentenceOf is the text up to the first ". " (what the builder takes
// from a description), without the trailing punctuation it trims.
func firstSentenceOf(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, ".:;, ")
}

func annotationTitleOf(d builtTool) string {
	if d.Annotations == nil {
		return ""
	}
	return d.Annotations.Title
}

// finding is one doctor finding.
type finding struct {
	Severity string `json:"severity"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Pointer  string `json:"pointer"`
}
