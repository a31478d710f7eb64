package registry_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/internal/shareddata"
	"github.com/ardx-dev/ardx/registry"
)

// BenchmarkMetaToolRelevanceHTTP indexes MetaTool's 199 tools as entries
// (no representative queries: the labelled queries must not leak into the
// index) and sends every labelled query through POST /search, reporting
// nDCG@10 and Recall@10 as measured through the public surface.
func BenchmarkMetaToolRelevanceHTTP(b *testing.B) {
	tools, queries := shareddata.MetaTool(b)
	urnOf := map[string]string{}
	bodies := make([]string, 0, len(tools))
	for _, t := range tools {
		id := "urn:air:metatool.example:tools:" + shareddata.URNPart(t.Name)
		urnOf[t.Name] = id
		body, _ := json.Marshal(map[string]any{
			"identifier": id, "displayName": t.Name, "type": "application/mcp-server-card+json",
			"url": "https://metatool.example/" + shareddata.URNPart(t.Name), "description": t.Description,
		})
		bodies = append(bodies, string(body))
	}
	f := newTestServer(b, registry.Config{}, bodies)
	client := &http.Client{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ndcg, recall float64
		n := 0
		for _, lq := range queries {
			want, ok := urnOf[lq.Tool]
			if !ok {
				continue
			}
			q, _ := json.Marshal(map[string]any{"query": map[string]any{"text": lq.Text}, "limit": 10, "federation": "none"})
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
