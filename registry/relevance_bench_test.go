package registry_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry"
)

// sharedData returns the shared data dir (../shared/data beside the
// repository, or $ARDX_SHARED_DATA), or skips with a message.
func sharedData(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("ARDX_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	if _, err := os.Stat(dir); err != nil {
		tb.Skipf("shared data not found at %s (set ARDX_SHARED_DATA): %v", dir, err)
	}
	return dir
}

// BenchmarkMetaToolRelevanceHTTP indexes MetaTool's 199 tools as entries
// (no representative queries: the labelled queries must not leak into the
// index) and sends every labelled query through POST /search, reporting
// nDCG@10 and Recall@10 as measured through the public surface.
func BenchmarkMetaToolRelevanceHTTP(b *testing.B) {
	dir := sharedData(b)
	raw, err := os.ReadFile(filepath.Join(dir, "metatool", "plugin_des.json"))
	if err != nil {
		b.Fatal(err)
	}
	var tools map[string]string
	if err := json.Unmarshal(raw, &tools); err != nil {
		b.Fatal(err)
	}
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	urnOf := map[string]string{}
	bodies := make([]string, 0, len(names))
	for _, n := range names {
		id := "urn:air:metatool.example:tools:" + urnPart(n)
		urnOf[n] = id
		body, _ := json.Marshal(map[string]any{
			"identifier": id, "displayName": n, "type": "application/mcp-server-card+json",
			"url": "https://metatool.example/" + urnPart(n), "description": tools[n],
		})
		bodies = append(bodies, string(body))
	}
	f := newTestServer(b, registry.Config{}, bodies)

	qf, err := os.Open(filepath.Join(dir, "metatool", "all_clean_data.csv"))
	if err != nil {
		b.Fatal(err)
	}
	defer qf.Close()
	rows, err := csv.NewReader(qf).ReadAll()
	if err != nil {
		b.Fatal(err)
	}
	rows = rows[1:] // header
	client := &http.Client{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ndcg, recall float64
		n := 0
		for _, row := range rows {
			want, ok := urnOf[row[1]]
			if !ok {
				continue
			}
			q, _ := json.Marshal(map[string]any{"query": map[string]any{"text": row[0]}, "limit": 10, "federation": "none"})
			resp, err := client.Post(f.srv.URL+"/search", "application/json", strings.NewReader(string(q)))
			if err != nil {
				b.Fatal(err)
			}
			var res struct {
				Results []struct {
					Identifier string `json:"identifier"`
				} `json:"results"`
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				// A query the decoder refuses (e.g. over the text limit)
				// counts as a miss, as a client would see it.
				n++
				continue
			}
			if err := json.Unmarshal(body, &res); err != nil {
				b.Fatal(err)
			}
			for rank, r := range res.Results {
				if r.Identifier == want {
					ndcg += 1 / math.Log2(float64(rank)+2)
					recall++
					break
				}
			}
			n++
		}
		b.ReportMetric(ndcg/float64(n), "nDCG@10")
		b.ReportMetric(recall/float64(n), "Recall@10")
		b.ReportMetric(float64(n), "queries")
		if i == 0 {
			fmt.Fprintf(os.Stderr, "MetaTool over POST /search: %d queries, nDCG@10 %.3f, Recall@10 %.3f\n", n, ndcg/float64(n), recall/float64(n))
		}
	}
}
