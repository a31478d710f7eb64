package index_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/internal/shareddata"
)

// toolsdkDocs maps the toolsdk MCP package list to docs: one per package
// (named after it, described by its tools) and one per tool. It skips the
// benchmark when the shared data is absent.
func toolsdkDocs(tb testing.TB) []index.Doc {
	tb.Helper()
	pkgs := shareddata.Toolsdk(tb)
	var docs []index.Doc
	for i, p := range pkgs {
		n := p.Name
		publisher := strings.TrimPrefix(strings.SplitN(n, "/", 2)[0], "@") + ".example"
		short := n[strings.LastIndex(n, "/")+1:]
		created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour)
		pkg := index.Doc{
			ID: "urn:ai:" + publisher + ":" + short, Name: short, DisplayName: short,
			Tags: []string{p.Category}, Capabilities: []string{"tools"},
			Publisher: publisher, Type: "mcp", Version: "1.0.0", CreatedAt: created, UpdatedAt: created,
		}
		var descs []string
		for _, t := range p.Tools {
			pkg.Text = append(pkg.Text, t.Name)
			descs = append(descs, t.Description)
			docs = append(docs, index.Doc{
				ID: pkg.ID + ":" + t.Key, Name: t.Name, DisplayName: t.Name, Description: t.Description,
				Tags: []string{p.Category}, Capabilities: []string{"tools"}, Publisher: publisher,
				Type: "mcp-tool", Version: "1.0.0", CreatedAt: created, UpdatedAt: created,
			})
		}
		pkg.Description = strings.Join(descs, " ")
		if len(pkg.Description) > 600 {
			pkg.Description = pkg.Description[:600]
		}
		docs = append(docs, pkg)
	}
	return docs
}

// corpus returns n docs: the toolsdk docs, then perturbed copies (new IDs
// and name suffixes, descriptions recombined from two docs, a tag swapped)
// until n is reached.
func corpus(tb testing.TB, n int) []index.Doc {
	base := toolsdkDocs(tb)
	out := make([]index.Doc, 0, n)
	suffixes := []string{"pro", "lite", "cloud", "next", "plus", "hub", "kit", "go"}
	for i := 0; len(out) < n; i++ {
		d := base[i%len(base)]
		if round := i / len(base); round > 0 {
			other := base[(i*7+round)%len(base)]
			sfx := suffixes[round%len(suffixes)]
			d.ID = fmt.Sprintf("%s-%d", d.ID, round)
			d.Name = d.Name + "-" + sfx
			d.DisplayName = d.Name
			dw, ow := strings.Fields(d.Description), strings.Fields(other.Description)
			d.Description = strings.Join(append(dw[:len(dw)/2:len(dw)/2], ow[len(ow)/2:]...), " ")
			d.Tags = append(slices.Clone(d.Tags), other.Tags...)
		}
		out = append(out, d)
	}
	return out
}

// benchQueries draws 1-3 consecutive description words from docs spread
// over the corpus, as users type them.
func benchQueries(docs []index.Doc, n int) []string {
	var qs []string
	for i := 0; len(qs) < n && i < len(docs)*4; i++ {
		w := strings.Fields(docs[(i*7919)%len(docs)].Description)
		if len(w) < 4 {
			continue
		}
		k := 1 + i%3
		start := (i * 31) % (len(w) - k)
		qs = append(qs, strings.Join(w[start:start+k], " "))
	}
	return qs
}

func BenchmarkPut(b *testing.B) {
	docs := corpus(b, 20000)
	ix, _, err := index.OpenWith(filepath.Join(b.TempDir(), "index"), index.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	const perOp = 1000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		chunk := slices.Clone(docs[(i*perOp)%len(docs) : (i*perOp)%len(docs)+perOp])
		for j := range chunk {
			chunk[j].ID = fmt.Sprintf("%s#%d", chunk[j].ID, i)
		}
		if err := ix.Put(chunk); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*perOp)/b.Elapsed().Seconds(), "docs/s")
}

// benchIndex indexes docs on disk, as ingestion does, in chunks of 1,000,
// and waits for the segment merges the load leaves behind, so searches are
// measured in the steady state.
func benchIndex(b *testing.B, docs []index.Doc) *index.Index {
	b.Helper()
	ix, _, err := index.OpenWith(filepath.Join(b.TempDir(), "index"), index.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	for start := 0; start < len(docs); start += 1000 {
		if err := ix.Put(docs[start:min(start+1000, len(docs))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := ix.Settle(b.Context(), time.Second); err != nil {
		b.Fatal(err)
	}
	return ix
}

// BenchmarkSearch measures Search in process. queries=repeated cycles 1000
// queries (answered from the result cache after their first time);
// queries=unique appends a word no doc has to each, so every search is
// scored afresh.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		for _, unique := range []bool{false, true} {
			mode := map[bool]string{false: "repeated", true: "unique"}[unique]
			b.Run(fmt.Sprintf("docs=%d/queries=%s", n, mode), func(b *testing.B) { benchSearch(b, n, unique) })
		}
	}
}

func benchSearch(b *testing.B, n int, unique bool) {
	docs := corpus(b, n)
	ix := benchIndex(b, docs)
	qs := benchQueries(docs, 1000)
	ctx := b.Context()
	for _, q := range qs[:100] { // warm up, and calibrate once
		if _, err := ix.Search(ctx, index.SearchRequest{Text: q}); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		text := qs[i%len(qs)]
		if unique {
			text = fmt.Sprintf("%s zq%dx", text, i)
		}
		if _, err := ix.Search(ctx, index.SearchRequest{Text: text, Size: 10}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(s))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkMetaToolAtScale hides MetaTool's 199 tools among 100k toolsdk
// docs and runs 2,000 of its labelled queries, each scored afresh: the
// relevance a ranking change keeps (nDCG@10, Recall@10) and what it costs
// (mean and percentile latency) on the natural-language queries real users
// type, at the size the latency targets speak of.
func BenchmarkMetaToolAtScale(b *testing.B) {
	tools, labelled := loadMetaTool(b)
	ix := benchIndex(b, append(corpus(b, 100_000), tools...))
	// Every 10th labelled query: all tools, a tenth of the time.
	var qs []labelledQuery
	for i := 0; i < len(labelled); i += 10 {
		qs = append(qs, labelled[i])
	}
	ctx := b.Context()
	if _, err := ix.Search(ctx, index.SearchRequest{Text: "calibrate"}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		var ndcg, recall float64
		lat := make([]time.Duration, 0, len(qs))
		var total time.Duration
		for i, q := range qs {
			// A word no doc has keeps the result cache out of the measure.
			text := fmt.Sprintf("%s zq%dx", q.text, i)
			s := time.Now()
			res, err := ix.Search(ctx, index.SearchRequest{Text: text, Size: 10})
			d := time.Since(s)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, d)
			total += d
			for rank, h := range res.Hits {
				if h.ID == q.want {
					ndcg += 1 / math.Log2(float64(rank)+2)
					recall++
					break
				}
			}
		}
		slices.Sort(lat)
		n := float64(len(qs))
		b.ReportMetric(ndcg/n, "nDCG@10")
		b.ReportMetric(recall/n, "Recall@10")
		b.ReportMetric(float64(total.Microseconds())/n/1000, "mean-ms")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkOneSentenceAtScale hides the toolsdk operations among 100k
// docs and asks for two or three of them in one sentence ("A, b and c",
// oneSentence): the relevance clause parts keep (nDCG@10, Recall@10) where
// the right answers compete with 100k others, and what such requests cost.
func BenchmarkOneSentenceAtScale(b *testing.B) {
	ops := toolsdkOperations(b)
	ix := benchIndex(b, append(slices.Clone(ops.docs), corpus(b, 100_000-len(ops.docs))...))
	ctx := b.Context()
	for _, k := range []int{2, 3} {
		set := oneSentence(ops, 2000, k)
		b.Run(fmt.Sprintf("intents=%d", k), func(b *testing.B) {
			for i := range b.N {
				var lat []time.Duration
				var total time.Duration
				search := func(q string) []string {
					// A word no doc has keeps the result cache out of the measure.
					s := time.Now()
					res, err := ix.Search(ctx, index.SearchRequest{Text: fmt.Sprintf("%s zq%dx", q, i), Size: 10})
					d := time.Since(s)
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, d)
					total += d
					ids := make([]string, 0, len(res.Hits))
					for _, h := range res.Hits {
						ids = append(ids, h.ID)
					}
					return ids
				}
				ndcg, recall := evaluate(set, search).all()
				slices.Sort(lat)
				b.ReportMetric(ndcg, "nDCG@10")
				b.ReportMetric(recall, "Recall@10")
				b.ReportMetric(float64(total.Microseconds())/float64(len(lat))/1000, "mean-ms")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}

// BenchmarkSearchWhileWriting runs MetaTool's requests (each new to the
// process) against 100k docs, with writes=none nothing else, with
// writes=every50 a publisher republishing one entry before every 50
// searches: each write makes a new snapshot, whose decoded postings are
// carried over from the one before (carry.go) rather than decoded afresh.
func BenchmarkSearchWhileWriting(b *testing.B) {
	tools, labelled := loadMetaTool(b)
	docs := append(corpus(b, 100_000), tools...)
	ix := benchIndex(b, docs)
	ctx := b.Context()
	search := func(text string) time.Duration {
		s := time.Now()
		if _, err := ix.Search(ctx, index.SearchRequest{Text: text, Size: 10}); err != nil {
			b.Fatal(err)
		}
		return time.Since(s)
	}
	for i := 0; i < len(labelled); i += 7 { // the posting cache as a running server's
		search(labelled[i].text)
	}
	next := 1
	for _, every := range []int{0, 50} {
		name := "writes=none"
		if every > 0 {
			name = fmt.Sprintf("writes=every%d", every)
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				lat := make([]time.Duration, 0, 2000)
				var total time.Duration
				for i := range 2000 {
					if every > 0 && i%every == 0 {
						d := docs[(next*7919)%len(docs)]
						d.Description += fmt.Sprintf(" (revision %d)", next)
						if err := ix.Put([]index.Doc{d}); err != nil {
							b.Fatal(err)
						}
					}
					// Requests not seen before: every 7th was the warm-up's.
					next++
					q := labelled[(next*3+1)%len(labelled)]
					d := search(fmt.Sprintf("%s zq%dx", q.text, next))
					lat = append(lat, d)
					total += d
				}
				slices.Sort(lat)
				b.ReportMetric(float64(total.Microseconds())/float64(len(lat))/1000, "mean-ms")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
