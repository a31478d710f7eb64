package index_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/internal/shareddata"
)

// relSet is a labelled relevance set: docs to index and queries, each with
// the IDs of the docs that answer it. The query text is never indexed.
type relSet struct {
	name    string
	docs    []index.Doc
	queries []relQuery
}

type relQuery struct {
	text     string
	relevant []string
	group    string // the tool (publisher) the query is about: the cross-validation split
}

// toolsdkOperations is an API-operation set built from the toolsdk tools,
// shaped like a registry of operations: per tool an entry whose display
// name is "package: tool name", whose one capability is the tool name and
// whose one tag is the package's category. The tool's description is split:
// its first sentence becomes the query (so the query is text the index never
// holds) and the rest, when there is any, the entry's description.
func toolsdkOperations(tb testing.TB) relSet {
	tb.Helper()
	set := relSet{name: "toolsdk operations"}
	for _, p := range shareddata.Toolsdk(tb) {
		short := p.Name[strings.LastIndex(p.Name, "/")+1:]
		publisher := strings.TrimPrefix(strings.SplitN(p.Name, "/", 2)[0], "@") + ".example"
		for _, t := range p.Tools {
			id := "urn:ai:" + publisher + ":" + short + ":" + t.Key
			query, rest := firstSentence(t.Description)
			set.docs = append(set.docs, index.Doc{
				ID: id, Name: t.Key, DisplayName: short + ": " + t.Name, Description: rest,
				Capabilities: []string{t.Name}, Tags: []string{p.Category}, Publisher: publisher, Type: "mcp-tool",
			})
			if len(strings.Fields(query)) >= 3 {
				set.queries = append(set.queries, relQuery{text: query, relevant: []string{id}, group: p.Name})
			}
		}
	}
	return set
}

// smallSlice is set cut down to the docs of its first groups, about n docs:
// a registry the size of one team's operations.
func smallSlice(set relSet, n int) relSet {
	out := relSet{name: set.name + " (small)"}
	keep := map[string]bool{}
	for _, d := range set.docs[:min(n, len(set.docs))] {
		out.docs = append(out.docs, d)
		keep[d.ID] = true
	}
	for _, q := range set.queries {
		if keep[q.relevant[0]] {
			out.queries = append(out.queries, q)
		}
	}
	return out
}

var sentenceEnd = regexp.MustCompile(`[.!?](\s|$)|\n\s*\n`)

// firstSentence splits s after its first sentence (at most 30 words).
func firstSentence(s string) (first, rest string) {
	s = strings.TrimSpace(s)
	if loc := sentenceEnd.FindStringIndex(s); loc != nil {
		first, rest = s[:loc[1]], s[loc[1]:]
	} else {
		first = s
	}
	if w := strings.Fields(first); len(w) > 30 {
		first = strings.Join(w[:30], " ")
	}
	return strings.TrimSpace(first), strings.TrimSpace(rest)
}

// multiIntent is set's queries joined in twos into requests that ask for
// two things ("Q1 Also, Q2"), both answers relevant: the shape of the
// multi-tool requests of agent benchmarks, where a doc that scatters over
// the generic words of both halves must not outrank the ones each half is
// about. Partners are queries about another group in the same
// cross-validation half, chosen by a fixed stride; at most n queries.
func multiIntent(set relSet, n int) relSet {
	out := relSet{name: set.name + " (two intents)", docs: set.docs}
	for h, qs := range byHalf(set) {
		step := max(1, len(qs)/(n/2+1))
		for i := 0; i+len(qs)/2 < len(qs) && len(out.queries) < n*(h+1)/2; i += step {
			a, b := qs[i], qs[i+len(qs)/2]
			if a.group == b.group {
				continue
			}
			out.queries = append(out.queries, relQuery{
				text:     strings.TrimRight(a.text, ".?! ") + ". Also, " + b.text,
				relevant: append(slices.Clone(a.relevant), b.relevant...),
				group:    a.group,
			})
		}
	}
	return out
}

// oneSentence is set's queries joined k at a time into one sentence ("A,
// b and c"), every answer relevant: the shape of concise requests for two
// or three tools, which name no sentence apart. Partners are queries
// about other groups in the same cross-validation half, chosen by a
// fixed stride; at most n queries.
func oneSentence(set relSet, n, k int) relSet {
	out := relSet{name: fmt.Sprintf("%s (%d intents, one sentence)", set.name, k), docs: set.docs}
	clause := func(s string, lower bool) string {
		s = strings.TrimRight(strings.TrimSpace(s), ".?! ")
		if r, size := utf8.DecodeRuneInString(s); lower && r != utf8.RuneError {
			s = string(unicode.ToLower(r)) + s[size:]
		}
		return s
	}
	for h, qs := range byHalf(set) {
		part := len(qs) / k
		step := max(1, part/(n/2+1))
	next:
		for i := 0; i < part && len(out.queries) < n*(h+1)/2; i += step {
			q := relQuery{group: qs[i].group}
			var texts, groups []string
			for j := range k {
				p := qs[i+j*part]
				if slices.Contains(groups, p.group) {
					continue next
				}
				groups = append(groups, p.group)
				texts = append(texts, clause(p.text, j > 0))
				q.relevant = append(q.relevant, p.relevant...)
			}
			q.text = strings.Join(texts[:k-1], ", ") + " and " + texts[k-1]
			out.queries = append(out.queries, q)
		}
	}
	return out
}

// byHalf is set's queries per cross-validation half, in set order.
func byHalf(set relSet) [2][]relQuery {
	var out [2][]relQuery
	for _, q := range set.queries {
		out[half(q.group)] = append(out[half(q.group)], q)
	}
	return out
}

// metaToolSet is MetaTool as a relSet.
func metaToolSet(tb testing.TB) relSet {
	docs, qs := loadMetaTool(tb)
	set := relSet{name: "MetaTool", docs: docs}
	for _, q := range qs {
		set.queries = append(set.queries, relQuery{text: q.text, relevant: []string{q.want}, group: q.want})
	}
	return set
}

// externalSets reads labelled sets from the JSON file named by
// ARDX_RELEVANCE_SETS (offline tuning against public sets kept outside the
// project; never in CI): [{"name", "docs": [{"id", "displayName",
// "description", "capabilities", "tags"}], "queries": [{"text",
// "relevant"}]}].
func externalSets(tb testing.TB) []relSet {
	path := os.Getenv("ARDX_RELEVANCE_SETS")
	if path == "" {
		return nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var in []struct {
		Name string
		Docs []struct {
			ID, DisplayName, Description string
			Capabilities, Tags           []string
		}
		Queries []struct {
			Text     string
			Relevant []string
		}
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		tb.Fatal(err)
	}
	var out []relSet
	for _, s := range in {
		set := relSet{name: s.Name}
		for _, d := range s.Docs {
			tool, _, _ := strings.Cut(d.DisplayName, ":")
			set.docs = append(set.docs, index.Doc{
				ID: d.ID, Name: d.ID[strings.LastIndex(d.ID, ":")+1:], DisplayName: d.DisplayName, Description: d.Description,
				Capabilities: d.Capabilities, Tags: d.Tags, Publisher: strings.ToLower(tool) + ".example",
			})
		}
		for _, q := range s.Queries {
			set.queries = append(set.queries, relQuery{text: q.Text, relevant: q.Relevant, group: q.Relevant[0]})
		}
		out = append(out, set)
	}
	return out
}

// relScore is nDCG@10 and Recall@10 (binary gains) per cross-validation
// half, and the number of queries in each.
type relScore struct {
	ndcg, recall [2]float64
	n            [2]float64
}

// all is the mean over every query, as a client asking them all would
// measure: halves of unequal size weigh by their queries.
func (s relScore) all() (ndcg, recall float64) {
	n := max(s.n[0]+s.n[1], 1)
	return (s.ndcg[0]*s.n[0] + s.ndcg[1]*s.n[1]) / n, (s.recall[0]*s.n[0] + s.recall[1]*s.n[1]) / n
}

// half assigns a query's group to cross-validation half 0 or 1.
func half(group string) int {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int(h.Sum32() & 1)
}

// evaluate scores rank (the top 10 IDs per query) over set's queries.
func evaluate(set relSet, rank func(string) []string) relScore {
	var sum, rec, n [2]float64
	for _, q := range set.queries {
		top := rank(q.text)
		var dcg, ideal float64
		found := 0
		for i, id := range top {
			for _, r := range q.relevant {
				if id == r {
					dcg += 1 / math.Log2(float64(i)+2)
					found++
				}
			}
		}
		for i := range min(len(q.relevant), 10) {
			ideal += 1 / math.Log2(float64(i)+2)
		}
		h := half(q.group)
		sum[h] += dcg / ideal
		rec[h] += float64(found) / float64(len(q.relevant))
		n[h]++
	}
	s := relScore{n: n}
	for h := range 2 {
		s.ndcg[h], s.recall[h] = sum[h]/max(n[h], 1), rec[h]/max(n[h], 1)
	}
	return s
}

// plainBM25 is the reference ranking: Okapi BM25 (k1 0.9, b 0.4) over one
// bag of lower-case alphanumeric tokens per doc (every indexed text),
// with a small stop list.
type plainBM25 struct {
	ids      []string
	postings map[string][]plainPosting
	lens     []float64
	avgLen   float64
}

type plainPosting struct {
	doc int
	tf  float64
}

var plainStop = map[string]bool{}

func init() {
	for _, w := range strings.Fields("a an and are as at be by for from has have i in is it its me my of on or that the this to was we were what which will with you your") {
		plainStop[w] = true
	}
}

func plainTokens(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if !plainStop[w] {
			out = append(out, w)
		}
	}
	return out
}

func newPlainBM25(docs []index.Doc) *plainBM25 {
	b := &plainBM25{postings: map[string][]plainPosting{}}
	var total float64
	for i, d := range docs {
		text := strings.Join(append(append([]string{d.Name, d.DisplayName, d.Description, d.Publisher}, d.Tags...), d.Capabilities...), " ")
		toks := plainTokens(text)
		tf := map[string]float64{}
		for _, t := range toks {
			tf[t]++
		}
		for t, f := range tf {
			b.postings[t] = append(b.postings[t], plainPosting{i, f})
		}
		b.ids = append(b.ids, d.ID)
		b.lens = append(b.lens, float64(len(toks)))
		total += float64(len(toks))
	}
	b.avgLen = total / float64(len(docs))
	return b
}

func (b *plainBM25) rank(q string) []string {
	const k1, bb = 0.9, 0.4
	n := float64(len(b.ids))
	scores := map[int]float64{}
	seen := map[string]bool{}
	for _, t := range plainTokens(q) {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := b.postings[t]
		idf := math.Log(1 + (n-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			scores[p.doc] += idf * p.tf * (k1 + 1) / (p.tf + k1*(1-bb+bb*b.lens[p.doc]/b.avgLen))
		}
	}
	docs := make([]int, 0, len(scores))
	for d := range scores {
		docs = append(docs, d)
	}
	sort.Slice(docs, func(i, j int) bool {
		if scores[docs[i]] != scores[docs[j]] {
			return scores[docs[i]] > scores[docs[j]]
		}
		return docs[i] < docs[j]
	})
	out := make([]string, 0, 10)
	for _, d := range docs[:min(10, len(docs))] {
		out = append(out, b.ids[d])
	}
	return out
}

// TestRelevanceSets measures nDCG@10 of Search against a plain BM25 over the
// same fields, per set and per cross-validation half (queries split by the
// tool they are about), on MetaTool (natural-language requests against
// tool descriptions), on toolsdk operations (API-operation entries, the
// shape of an OpenAPI or MCP tool registry), on both with requests of two
// intents (multiIntent), on toolsdk operations with requests for two and
// three things in one sentence (oneSentence), and on any offline sets
// ARDX_RELEVANCE_SETS names (their one-sentence requests, and each of
// those forms with the answers' tool names or whole names cut out of the
// requests: unnamed). The floors
// sit a little under what the ranking measures, so a regression shows:
// MetaTool nDCG@10 0.52 and 1.15× plain BM25, toolsdk operations 1.12×
// plain BM25 (1.2× on its first 500 docs, the size of one team's
// registry), requests of two intents 1.1×, one-sentence requests 1.16×
// (without clause parts they measure 1.12×; docs/decisions.md).
func TestRelevanceSets(t *testing.T) {
	if testing.Short() {
		t.Skip("relevance evaluation is slow; skipped with -short")
	}
	ratio := map[string]float64{"toolsdk operations": 1.12, "toolsdk operations (small)": 1.2, "MetaTool": 1.15,
		"MetaTool (two intents)": 1.1, "toolsdk operations (two intents)": 1.1,
		"toolsdk operations (2 intents, one sentence)": 1.16, "toolsdk operations (3 intents, one sentence)": 1.16}
	ops := toolsdkOperations(t)
	mt := metaToolSet(t)
	sets := []relSet{ops, smallSlice(ops, 500), mt, multiIntent(mt, 4000), multiIntent(ops, 4000), oneSentence(ops, 2000, 2), oneSentence(ops, 2000, 3)}
	for _, set := range externalSets(t) {
		forms := []relSet{set, oneSentence(set, 1000, 2), oneSentence(set, 1000, 3)}
		sets = append(sets, forms...)
		// Requests that do not name what they need; with two or three
		// intents in one sentence, the held-out set's shape whole.
		for _, toolOnly := range []bool{true, false} {
			for _, form := range forms {
				if u, changed := unnamed(form, toolOnly); changed {
					sets = append(sets, u)
				}
			}
		}
	}
	for _, set := range sets {
		set = accepted(set)
		ix := mustOpenMemory(t)
		mustPut(t, ix, set.docs)
		search := func(q string) []string {
			res, err := ix.Search(t.Context(), index.SearchRequest{Text: q, Size: 10})
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			ids := make([]string, 0, len(res.Hits))
			for _, h := range res.Hits {
				ids = append(ids, h.ID)
			}
			return ids
		}
		bm25 := newPlainBM25(set.docs)
		ours := evaluate(set, search)
		plain := evaluate(set, bm25.rank)
		on, or := ours.all()
		pn, pr := plain.all()
		t.Logf("%s: %d docs, %d queries: ours nDCG@10 %.4f (halves %.4f %.4f) Recall@10 %.4f; plain BM25 nDCG@10 %.4f (halves %.4f %.4f) Recall@10 %.4f; ratio %.2f",
			set.name, len(set.docs), len(set.queries), on, ours.ndcg[0], ours.ndcg[1], or, pn, plain.ndcg[0], plain.ndcg[1], pr, on/pn)
		if long := longRequests(set); len(long.queries) > 0 {
			lo, lp := evaluate(long, search), evaluate(long, bm25.rank)
			ln, _ := lo.all()
			lpn, _ := lp.all()
			t.Logf("%s: %d requests of %d+ words: ours nDCG@10 %.4f, plain BM25 %.4f; ratio %.2f",
				set.name, len(long.queries), longRequestWords, ln, lpn, ln/lpn)
		}
		if f, ok := ratio[set.name]; ok && on < f*pn {
			t.Errorf("%s: nDCG@10 %.4f below %.2f× plain BM25 (%.4f)", set.name, on, f, pn)
		}
		if set.name == "MetaTool" && on < 0.52 {
			t.Errorf("MetaTool: nDCG@10 %.4f below the 0.52 floor", on)
		}
	}
}

// unnamed is set with every request cut to words that do not name its
// answers: the words (as written, lower case) of their tools' names
// ("Tool" of the display name "Tool: operation"), or of their whole
// display names. Agent benchmarks write requests that do not name the
// tools they need (ToolLens's were written so, COLT, Qu et al. 2024); the offline
// sets' requests often do ("using the Projects API"), which is why plain
// BM25 scores 0.5-0.9 on them and under 0.3 on the held-out set.
// A request left empty is dropped. changed is false when no request lost a
// word (a set whose entries have no tool names), so the form would measure
// the set again.
func unnamed(set relSet, toolOnly bool) (out relSet, changed bool) {
	names := map[string]string{}
	for _, d := range set.docs {
		names[d.ID] = d.DisplayName
	}
	out = relSet{name: set.name + " (no names)", docs: set.docs}
	if toolOnly {
		out.name = set.name + " (no tool names)"
	}
	for _, q := range set.queries {
		drop := map[string]bool{}
		for _, r := range q.relevant {
			name := names[r]
			if toolOnly {
				tool, _, ok := strings.Cut(name, ":")
				if !ok {
					continue
				}
				name = tool
			}
			for _, w := range plainTokens(name) {
				drop[w] = true
			}
		}
		var kept []string
		for _, w := range strings.Fields(q.text) {
			if toks := plainTokens(w); len(toks) > 0 && drop[toks[0]] {
				changed = true
				continue
			}
			kept = append(kept, w)
		}
		if len(kept) > 0 {
			q.text = strings.Join(kept, " ")
			out.queries = append(out.queries, q)
		}
	}
	return out, changed
}

// maxRequestBytes is the longest query.text POST /search accepts
// (registry's maxTextLen); a longer request is refused there, so its
// ranking says nothing about the service.
const maxRequestBytes = 1024

// accepted is set without the requests POST /search would refuse.
func accepted(set relSet) relSet {
	out := set
	out.queries = slices.DeleteFunc(slices.Clone(set.queries), func(q relQuery) bool { return len(q.text) > maxRequestBytes })
	return out
}

// longRequestWords is where a request counts as long: the held-out
// requests of agent benchmarks ("I'm planning a trip ... can you get X and
// also find Y") run to 40-80 words, and on the offline API-operation sets
// our lead over plain BM25 comes from requests shorter than this.
const longRequestWords = 45

// longRequests is set cut down to its requests of longRequestWords or more.
func longRequests(set relSet) relSet {
	out := relSet{name: set.name + " (long)", docs: set.docs}
	for _, q := range set.queries {
		if len(strings.Fields(q.text)) >= longRequestWords {
			out.queries = append(out.queries, q)
		}
	}
	return out
}

// TestPruningKeepsRanking checks the ranker's pruning against its own

// TestPruningKeepsRanking checks the ranker's pruning against its own
// unpruned ranking (Count scores every match) in the form in use, on
// toolsdk operations (8,010 docs, so the relevance cutoff's rare and common
// groups both occur) with natural-language requests of every length, one
// and two intents: the same page, the same order, the same raw scores. The
// oracle tests check pruning against Bleve in Bleve's form; this one checks
// the BM25F bounds (saturation, square-root coordination).
func TestPruningKeepsRanking(t *testing.T) {
	if testing.Short() {
		t.Skip("relevance evaluation is slow; skipped with -short")
	}
	ops := toolsdkOperations(t)
	ix := mustOpenMemory(t)
	index.SetBlockDocs(ix, 512) // 16 blocks: the ranker prunes
	mustPut(t, ix, ops.docs)
	var texts []string
	for i, q := range metaToolSet(t).queries {
		if i%40 == 0 {
			texts = append(texts, q.text)
		}
	}
	for _, q := range multiIntent(ops, 300).queries {
		texts = append(texts, q.text)
	}
	for i, text := range texts {
		index.SetSplit(ix, 1+2*(i%2)) // one range, or split in up to 3
		for _, size := range []int{1, 10} {
			all, err := ix.Search(t.Context(), index.SearchRequest{Text: text, Size: size, Count: true})
			if err != nil {
				t.Fatal(err)
			}
			pruned, err := ix.Search(t.Context(), index.SearchRequest{Text: text, Size: size})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pruned.Hits, all.Hits) {
				t.Fatalf("%q size %d: pruned %v, unpruned %v", text, size, pruned.Hits, all.Hits)
			}
		}
	}
	t.Logf("%d queries", len(texts))
}
