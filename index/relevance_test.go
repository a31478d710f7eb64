package index_test

import (
	"math"
	"sort"
	"testing"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/internal/shareddata"
)

type labelledQuery struct{ text, want string }

// loadMetaTool reads the MetaTool tools as docs (name and description only:
// the labelled queries are never indexed) and its labelled queries.
func loadMetaTool(tb testing.TB) ([]index.Doc, []labelledQuery) {
	tb.Helper()
	tools, queries := shareddata.MetaTool(tb)
	docs := make([]index.Doc, 0, len(tools))
	for _, t := range tools {
		docs = append(docs, index.Doc{ID: "urn:metatool:" + t.Name, Name: t.Name, Description: t.Description, Type: "plugin"})
	}
	qs := make([]labelledQuery, 0, len(queries))
	for _, q := range queries {
		qs = append(qs, labelledQuery{text: q.Text, want: "urn:metatool:" + q.Tool})
	}
	return docs, qs
}

// TestMetaToolRelevance measures nDCG@10 and Recall@10 of Search over the
// MetaTool tool descriptions with its 20,614 labelled queries. Plain BM25
// reaches nDCG@10 0.456; the test fails below 0.50 so regressions show.
func TestMetaToolRelevance(t *testing.T) {
	if testing.Short() {
		t.Skip("relevance evaluation is slow; skipped with -short")
	}
	docs, qs := loadMetaTool(t)
	ix := mustOpenMemory(t)
	mustPut(t, ix, docs)
	var ndcg, recall float64
	perTool := map[string][2]float64{}
	for _, q := range qs {
		res, err := ix.Search(t.Context(), index.SearchRequest{Text: q.text, Size: 10})
		if err != nil {
			t.Fatalf("search %q: %v", q.text, err)
		}
		g := 0.0
		for i, h := range res.Hits {
			if h.ID == q.want {
				g = 1 / math.Log2(float64(i)+2)
				recall++
				break
			}
		}
		ndcg += g
		pt := perTool[q.want]
		perTool[q.want] = [2]float64{pt[0] + g, pt[1] + 1}
	}
	n := float64(len(qs))
	ndcg, recall = ndcg/n, recall/n
	t.Logf("MetaTool: %d docs, %d queries: nDCG@10 %.4f, Recall@10 %.4f", len(docs), len(qs), ndcg, recall)
	if testing.Verbose() {
		type worst struct {
			id   string
			ndcg float64
		}
		var ws []worst
		for id, v := range perTool {
			ws = append(ws, worst{id, v[0] / v[1]})
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i].ndcg < ws[j].ndcg })
		for _, w := range ws[:min(10, len(ws))] {
			t.Logf("weakest: %s nDCG@10 %.3f", w.id, w.ndcg)
		}
	}
	if ndcg < 0.50 {
		t.Errorf("nDCG@10 %.4f below the 0.50 floor", ndcg)
	}
}
