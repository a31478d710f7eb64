//go:build unix

package ingest_test

import (
	"encoding/json"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/internal/shareddata"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/ingest"
)

// toolsdkServersAndTools maps the toolsdk package list (shared test data,
// not shipped) the way a crawl stores MCP servers: one server entry per
// package, and one application/mcp-tool+json entry per tool linked to it,
// carrying the transport and the tool name to call.
func toolsdkServersAndTools(tb testing.TB) (body []byte, servers, tools int) {
	tb.Helper()
	var entries []map[string]any
	seen := map[string]bool{}
	for _, p := range shareddata.Toolsdk(tb) {
		name := p.Name
		slug := strings.Trim(nonURN.ReplaceAllString(name, "-"), "-.")
		serverID := "urn:air:toolsdk.example:mcp:" + slug
		if slug == "" || seen[serverID] {
			continue
		}
		seen[serverID] = true
		servers++
		byName := slices.SortedFunc(slices.Values(p.Tools), func(a, b shareddata.Tool) int { return strings.Compare(a.Name, b.Name) })
		toolNames := make([]string, 0, len(byName))
		for _, t := range byName {
			toolNames = append(toolNames, t.Name)
		}
		entries = append(entries, map[string]any{
			"identifier":   serverID,
			"displayName":  name,
			"type":         ingest.TypeMCPServer,
			"url":          "https://toolsdk.example/packages/" + slug + "/server-card.json",
			"description":  "MCP server " + name + " (" + p.Category + ")",
			"tags":         []string{p.Category},
			"capabilities": toolNames,
		})
		for _, t := range byName {
			ts := strings.Trim(nonURN.ReplaceAllString(t.Name, "-"), "-.")
			id := serverID + ":" + ts
			if ts == "" || seen[id] {
				continue
			}
			seen[id] = true
			tools++
			entries = append(entries, map[string]any{
				"identifier":   id,
				"displayName":  t.Name,
				"type":         ingest.TypeMCPTool,
				"description":  t.Description,
				"capabilities": []string{t.Name},
				"data": map[string]any{
					"name": t.Name, "description": t.Description,
					"server": map[string]any{"identifier": serverID, "transport": "streamable-http", "tool": t.Name},
				},
			})
		}
	}
	body, err := json.Marshal(map[string]any{"entries": entries})
	if err != nil {
		tb.Fatal(err)
	}
	return body, servers, tools
}

// BenchmarkIngestToolsdkServersAndTools imports the whole toolsdk corpus as
// server and tool entries into a fresh data dir (kv and an on-disk index),
// and reports the index size.
func BenchmarkIngestToolsdkServersAndTools(b *testing.B) {
	body, servers, tools := toolsdkServersAndTools(b)
	want := servers + tools
	var indexBytes, kvBytes int64
	benchIngest(b, body, want, func(rep *ingest.Report, dir string) {
		for _, w := range rep.Sources[0].Warnings {
			if strings.Contains(w.Message, "media type") {
				b.Fatalf("type warning: %s", w)
			}
		}
		indexBytes, kvBytes = dirSize(b, filepath.Join(dir, "index")), dirSize(b, filepath.Join(dir, kv.FileName))
	})
	b.ReportMetric(float64(servers), "servers")
	b.ReportMetric(float64(tools), "tools")
	b.ReportMetric(float64(indexBytes)/(1<<20), "index-MiB")
	b.ReportMetric(float64(kvBytes)/(1<<20), "kv-MiB")
}

func dirSize(tb testing.TB, path string) int64 {
	tb.Helper()
	var n int64
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
