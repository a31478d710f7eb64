//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeAnswersFromDefaultCorpus starts `ardx serve` on an empty data dir
// and searches the embedded default corpus as a new user would.
func TestServeAnswersFromDefaultCorpus(t *testing.T) {
	data := t.TempDir()
	p := startArdx(t, []string{"registry", "facilitator"}, "serve", "--data", data,
		"--registry-addr", "127.0.0.1:0", "--facilitator-addr", "127.0.0.1:0")
	reg := p.url("registry")

	var first time.Duration
	for {
		status, body := postJSON(t, reg+"/search", `{"query":{"text":"weather forecast"}}`)
		if status == http.StatusOK && strings.Contains(string(body), `"identifier"`) {
			first = time.Since(p.started)
			var res struct {
				Results []map[string]any `json:"results"`
			}
			if err := json.Unmarshal(body, &res); err != nil || len(res.Results) == 0 {
				t.Fatalf("search answered %s", body)
			}
			name, _ := res.Results[0]["displayName"].(string)
			if !strings.Contains(strings.ToLower(name+" "+res.Results[0]["description"].(string)), "weather") {
				t.Errorf("top result for weather forecast is %q", name)
			}
			break
		}
		if time.Since(p.started) > 30*time.Second {
			t.Fatalf("no answer for weather forecast: %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("first answer for %q %v after process start", "weather forecast", first.Round(time.Millisecond))

	t.Run("conformance probes", func(t *testing.T) {
		resp, err := http.Get(reg + "/agents")
		if err != nil {
			t.Fatal(err)
		}
		var list map[string]any
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if _, ok := list["items"].([]any); !ok {
			t.Errorf("GET /agents has no items array: %v", list)
		}

		status, body := postJSON(t, reg+"/search", `{"query":{"text":"weather forecast tools","filter":{"type":["application/mcp-server-card+json"]}},"federation":"none","pageSize":2}`)
		if status != 200 {
			t.Fatalf("probe search: %d %s", status, body)
		}
		var res struct {
			Results []map[string]json.RawMessage `json:"results"`
		}
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Results) == 0 || len(res.Results) > 2 {
			t.Fatalf("probe search returned %d results", len(res.Results))
		}
		for _, r := range res.Results {
			var score float64
			if err := json.Unmarshal(r["score"], &score); err != nil || score != float64(int(score)) || score < 0 || score > 100 {
				t.Errorf("score %s is not an integer 0-100", r["score"])
			}
			for _, k := range []string{"source", "identifier", "displayName", "type"} {
				if len(r[k]) == 0 {
					t.Errorf("result lacks %s", k)
				}
			}
			if (len(r["url"]) == 0) == (len(r["data"]) == 0) {
				t.Errorf("result must have exactly one of url/data")
			}
			if string(r["type"]) != `"application/mcp-server-card+json"` {
				t.Errorf("type filter ignored: %s", r["type"])
			}
		}

		status, body = postJSON(t, reg+"/explore", `{"resultType":{"facets":[{"field":"type"}]}}`)
		var ex map[string]any
		json.Unmarshal(body, &ex)
		if status != 200 || ex["resultType"] != "facets" {
			t.Errorf("explore: %d %s", status, body)
		}
	})
}

// TestIngestCLI ingests manifests with the CLI: a rejected entry makes the
// command exit non-zero while the valid rest is stored and served.
func TestIngestCLI(t *testing.T) {
	data := t.TempDir()
	dir := t.TempDir()
	manifest := `{"entries":[
	  {"identifier":"urn:air:tides.example.test:api:tide-times","displayName":"Tide Times","type":"application/mcp-server-card+json","url":"https://tides.example.test/mcp/card.json","description":"High and low tide predictions for harbours","representativeQueries":["when is high tide","tide table for a harbour"]},
	  {"identifier":"not-a-urn","displayName":"Broken","type":"application/mcp-server-card+json","url":"https://x.example.test/"}
	]}`
	if err := os.WriteFile(filepath.Join(dir, "ard.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "ingest", "--data", data, dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("ingest with a rejected entry exited 0:\n%s", out)
	}
	if !strings.Contains(string(out), "not-a-urn") {
		t.Errorf("ingest output does not name the rejected entry:\n%s", out)
	}

	p := startArdx(t, []string{"registry"}, "registry", "--data", data, "--registry-addr", "127.0.0.1:0", "--no-default-corpus")
	status, body := postJSON(t, p.url("registry")+"/search", `{"query":{"text":"high tide"},"federation":"none"}`)
	if status != 200 || !strings.Contains(string(body), "urn:air:tides.example.test:api:tide-times") {
		t.Fatalf("ingested entry not served: %d %s", status, body)
	}
	p.stop(t)

	out, err = exec.Command(binary(t), "reindex", "--data", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "reindexed 1 entries") {
		t.Fatalf("reindex: %v\n%s", err, out)
	}

	// The index is rebuilt from kv when it is missing.
	if err := os.RemoveAll(filepath.Join(data, "index")); err != nil {
		t.Fatal(err)
	}
	p = startArdx(t, []string{"registry"}, "registry", "--data", data, "--registry-addr", "127.0.0.1:0", "--no-default-corpus")
	status, body = postJSON(t, p.url("registry")+"/search", `{"query":{"text":"high tide"},"federation":"none"}`)
	if status != 200 || !strings.Contains(string(body), "tide-times") {
		t.Fatalf("after index removal: %d %s", status, body)
	}
}
