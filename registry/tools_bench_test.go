package registry_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/internal/shareddata"
	"github.com/ardx-dev/ardx/registry"
)

// BenchmarkToolsQuery measures GET /tools?q= over HTTP on loopback against
// every tool of the toolsdk corpus (8,010 MCP tools of 815 servers, each an
// application/mcp-tool+json entry beside the generic fixtures), one client,
// and reports latency percentiles. Queries are the first words of tool
// descriptions, so most have matches.
func BenchmarkToolsQuery(b *testing.B) {
	var bodies, queries []string
	for _, p := range shareddata.Toolsdk(b) {
		server := shareddata.URNPart(p.Name)
		if server == "" || len(p.Tools) == 0 {
			continue
		}
		serverID := "urn:air:toolsdk.test:" + server
		for _, t := range p.Tools {
			tool := shareddata.URNPart(t.Name)
			if tool == "" {
				continue
			}
			e := map[string]any{
				"identifier":  serverID + ":" + tool,
				"displayName": t.Name,
				"type":        "application/mcp-tool+json",
				"description": t.Description,
				"tags":        []string{p.Category},
				"data": map[string]any{"name": t.Name, "description": t.Description,
					"server": map[string]any{"identifier": serverID, "endpoint": "https://toolsdk.test/" + server + "/mcp", "transport": "streamable-http", "tool": t.Name}},
			}
			body, _ := json.Marshal(e)
			bodies = append(bodies, string(body))
			if w := strings.Fields(t.Description); len(queries) < 300 && len(w) >= 3 {
				queries = append(queries, strings.Join(w[:min(4, len(w))], " "))
			}
		}
	}
	f := newPublisherServer(b, registry.Config{}, append(bodies, fixtureEntries...))
	client := &http.Client{Timeout: 10 * time.Second}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := queries[i%len(queries)]
		t0 := time.Now()
		resp, err := client.Get(f.srv.URL + "/tools?limit=20&q=" + url.QueryEscape(q))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(bodies)), "tools")
}
