//go:build unix

package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/internal/procstat"
	"github.com/ardx-dev/ardx/internal/shareddata"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/ingest"
)

// generatedManifest builds a v0.91 manifest of n realistic entries.
func generatedManifest(tb testing.TB, n int) []byte {
	tb.Helper()
	words := strings.Fields("weather forecast invoice shipping parcel translate calendar meeting sql query database vector memory image resize pdf convert email send stock quote route geocode review pull request security scan recipe flight hotel")
	entries := make([]map[string]any, n)
	for i := range entries {
		w1, w2, w3 := words[i%len(words)], words[(i/3)%len(words)], words[(i/7)%len(words)]
		entries[i] = map[string]any{
			"identifier":            fmt.Sprintf("urn:air:pub%d.bench.test:tools:%s-%s-%d", i%200, w1, w2, i),
			"displayName":           fmt.Sprintf("%s %s server %d", w1, w2, i),
			"type":                  "application/mcp-server-card+json",
			"url":                   fmt.Sprintf("https://pub%d.bench.test/cards/%d.json", i%200, i),
			"description":           fmt.Sprintf("Tools to %s and %s with %s support; handles pagination, retries and rate limits for entry %d.", w1, w2, w3, i),
			"version":               "1.0.0",
			"tags":                  []string{w1, w2},
			"capabilities":          []string{w1 + "_" + w2, w3},
			"representativeQueries": []string{w1 + " " + w2, "how do I " + w3, w2 + " api"},
			"metadata":              map[string]any{"tier": "free", "rank": i},
		}
	}
	b, err := json.Marshal(map[string]any{"entries": entries})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var nonURN = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// toolsdkManifest maps the toolsdk MCP package list (shared test data, not
// shipped) to a manifest: one MCP server entry per package, its tools inline.
func toolsdkManifest(tb testing.TB) ([]byte, int) {
	tb.Helper()
	var entries []map[string]any
	seen := map[string]bool{}
	for _, p := range shareddata.Toolsdk(tb) {
		name := p.Name
		slug := strings.Trim(nonURN.ReplaceAllString(name, "-"), "-.")
		id := "urn:air:toolsdk.example:" + nonURN.ReplaceAllString(p.Category, "-") + ":" + slug
		if slug == "" || seen[id] {
			continue
		}
		seen[id] = true
		var tools []map[string]string
		var descs []string
		for _, t := range p.Tools {
			tools = append(tools, map[string]string{"name": t.Name, "description": t.Description})
			descs = append(descs, t.Name)
		}
		e := map[string]any{
			"identifier":  id,
			"displayName": name,
			"type":        "application/mcp-server+json",
			"description": fmt.Sprintf("MCP server %s (%s). Tools: %s", name, p.Category, strings.Join(descs, ", ")),
			"tags":        []string{p.Category},
		}
		if len(tools) > 0 {
			e["data"] = map[string]any{"name": name, "tools": tools}
		} else {
			e["url"] = "https://toolsdk.example/packages/" + slug
		}
		entries = append(entries, e)
	}
	b, err := json.Marshal(map[string]any{"entries": entries})
	if err != nil {
		tb.Fatal(err)
	}
	return b, len(entries)
}

// benchIngest measures one end-to-end ingest of a manifest file (read,
// validate, one kv transaction, index on disk) into a fresh data dir. check,
// when set, looks at each run's report and data dir outside the timer.
func benchIngest(b *testing.B, body []byte, want int, check func(rep *ingest.Report, dir string)) {
	path := filepath.Join(b.TempDir(), "ard.json")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	cpu0 := procstat.CPUTime()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		db, err := kv.Open(dir, kv.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ix, _, err := index.Open(filepath.Join(dir, "index"))
		if err != nil {
			b.Fatal(err)
		}
		in := &ingest.Ingester{DB: db, Index: ix}
		b.StartTimer()
		rep, err := in.Ingest(context.Background(), path)
		b.StopTimer()
		if err != nil || rep.Stored() != want || rep.Rejected() != 0 {
			b.Fatalf("stored %d of %d, rejected %d, err %v", rep.Stored(), want, rep.Rejected(), err)
		}
		ix.Close()
		db.Close()
		if check != nil {
			check(rep, dir)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(want)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	// On a shared machine wall time mostly measures the neighbours; CPU
	// seconds of this process (setup included, so this is a lower bound)
	// show what the ingest itself costs.
	b.ReportMetric(float64(want)*float64(b.N)/(procstat.CPUTime()-cpu0).Seconds(), "entries/cpu-s")
}

func BenchmarkIngestGenerated(b *testing.B) {
	const n = 5000
	benchIngest(b, generatedManifest(b, n), n, nil)
}

func BenchmarkIngestToolsdk(b *testing.B) {
	body, n := toolsdkManifest(b)
	benchIngest(b, body, n, nil)
}

// BenchmarkParseManifest isolates validation from storage.
func BenchmarkParseManifest(b *testing.B) {
	const n = 10000
	body := generatedManifest(b, n)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if m, _ := ingest.ParseManifest(body); len(m.Entries) != n {
			b.Fatalf("%d entries", len(m.Entries))
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
