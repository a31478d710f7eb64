package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/web"
)

const benchTools = `{"tools":[{"name":"get_forecast","description":"Forecast for a city.","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}},{"name":"get_alerts","description":"Weather alerts.","inputSchema":{"type":"object"}}]}`

// probeBenchEndpoints stores n MCP server entries on hosts loopback hosts
// (h<i>.bench.test, pinned to one loopback MCP server) under their own
// source, and returns the fetcher that reaches them. The entries are in kv
// only, not in the index: they are probed, never searched.
func probeBenchEndpoints(b *testing.B, db *kv.DB, n, hosts int) *web.Fetcher {
	b.Helper()
	srv := httptest.NewServer(mcpHandler(benchTools))
	b.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	resolve := map[string]string{}
	for h := range hosts {
		resolve[fmt.Sprintf("h%d.bench.test", h)] = u.Host
	}
	entries := make([]kv.Entry, 0, n)
	for i := range n {
		id := fmt.Sprintf("urn:air:h%d.bench.test:mcp:s%d", i%hosts, i)
		body, _ := json.Marshal(map[string]any{"identifier": id, "type": "application/mcp-server-card+json", "displayName": "Bench server",
			"data": map[string]any{"remotes": []map[string]string{{"type": "streamable-http", "url": fmt.Sprintf("https://h%d.bench.test/mcp/%d", i%hosts, i)}}}})
		entries = append(entries, kv.Entry{ID: id, Body: body})
	}
	if _, err := db.ReplaceSource("probe-bench", entries, time.Now()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = db.ReplaceSource("probe-bench", nil, time.Now()) })
	return newFetcher(resolve)
}

// BenchmarkSearchWhileProbing measures POST /search p99 (10,000 entries,
// repeated queries, 8 clients) idle and while 10,000 MCP endpoints on 1,000
// hosts are probed with the default politeness (one probe per host at a
// time, 2 s apart, 600 a minute). The corpus's own 10,000 card URLs are
// probe targets too; their hosts do not resolve, so each costs one failed
// lookup. Compare the two p99-ms.
func BenchmarkSearchWhileProbing(b *testing.B) {
	for _, mode := range []string{"idle", "probing"} {
		b.Run("entries=10000/"+mode, func(b *testing.B) {
			c := loadBenchCorpus(b, 10_000)
			cfg := registry.Config{PublicURL: publicURL}
			probing := mode == "probing"
			if probing {
				cfg.Fetcher = probeBenchEndpoints(b, c.db, 10_000, 1_000)
				// A short interval keeps the budget, not the interval, the
				// limit for the whole run.
				cfg.Probe = registry.ProbeConfig{Interval: 20 * time.Second}
			}
			svc, err := registry.New(cfg, c.db, c.ix)
			if err != nil {
				b.Fatal(err)
			}
			var before int64
			if probing {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				svc.StartProbes(ctx)
				time.Sleep(3 * time.Second) // probing under way
				before = probeCount(b, c.db)
			}
			start := time.Now()
			measureSearchHTTP(b, c, svc, false)
			if probing {
				if err := svc.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(probeCount(b, c.db)-before)/time.Since(start).Seconds(), "probes/s")
			}
		})
	}
}

// probeCount sums every probe recorded today.
func probeCount(b *testing.B, db *kv.DB) int64 {
	var n int64
	err := db.ForEachProbeTarget("", time.Now(), time.Now(), func(_ string, days []kv.ProbeDay, _ kv.ProbeResult) bool {
		for _, d := range days {
			n += d.Total
		}
		return true
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkProbeStorage probes 50 MCP endpoints every 10 minutes for one
// simulated day and reports what kv keeps per endpoint: the day record
// (key and value bytes, the growth per endpoint per day), the last result
// (overwritten in place, not growth), and the data file's growth.
func BenchmarkProbeStorage(b *testing.B) {
	const endpoints, perDay = 50, 144
	for range b.N {
		dir := b.TempDir()
		db, err := kv.Open(dir, kv.Options{})
		if err != nil {
			b.Fatal(err)
		}
		fetcher := probeBenchEndpoints(b, db, endpoints, 10)
		clk := &testClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
		svc, err := registry.New(registry.Config{PublicURL: publicURL, Fetcher: fetcher, Now: clk.Now}, db, emptyIndex(b))
		if err != nil {
			b.Fatal(err)
		}
		size0 := fileSize(b, db.Path())
		for range perDay {
			svc.ProbeRound(context.Background())
			clk.Add(10 * time.Minute)
		}
		var dayBytes, lastBytes, n int64
		_ = db.ForEachProbeTarget("mcp ", clk.now.Add(-24*time.Hour), clk.now, func(target string, days []kv.ProbeDay, last kv.ProbeResult) bool {
			for _, d := range days {
				v, _ := json.Marshal(d)
				dayBytes += int64(len(target) + 1 + 9 + len(v))
			}
			v, _ := json.Marshal(last)
			lastBytes += int64(len(target) + 5 + len(v))
			n++
			return true
		})
		_ = svc.Close(context.Background())
		size1 := fileSize(b, db.Path())
		db.Close()
		b.ReportMetric(float64(dayBytes)/float64(n), "day-record-B/endpoint/day")
		b.ReportMetric(float64(lastBytes)/float64(n), "last-record-B/endpoint")
		b.ReportMetric(float64(size1-size0)/float64(n), "file-B/endpoint/day")
		os.RemoveAll(filepath.Join(dir))
	}
	b.ReportMetric(0, "ns/op")
}

func fileSize(b *testing.B, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

func emptyIndex(b *testing.B) *index.Index {
	ix, err := index.OpenMemory()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	return ix
}
