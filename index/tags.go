package index

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Categories.
//
// An entry's tags say what it is about ("weather", "music", "finance"),
// and the entries of one tag share a vocabulary: a request for "songs for
// the party" shares "song" with some music entries and "party" with some
// shopping ones, and the music entries as a whole share far more of it.
// So after a ranking (and the fusion of a request's parts), its first
// tagDepth hits are re-scored by how well their category answers the
// request: each tag is taken as one document, the entries carrying it (a
// word's frequency there is how many of them hold it, its length how many
// they are), and scored for the request's terms by BM25 over the tags. A
// tag's share is its score over the best tag's, for the request or, where
// higher, for one of its parts times partWeight (each intent's category
// counts, as each intent's answers do); a hit's raw score is multiplied by
// 1 + tagWeight × its best tag's share. This is smoothing a doc's score
// with its cluster's (cluster-based retrieval), the clusters being the
// publishers' own categories.
//
// It applies only when every entry of the index carries a tag: an entry
// without one has no category to be weighed by, and every way of weighing
// it alongside tagged ones ranked it by what it lacks (docs/decisions.md).
// Only the first tagDepth hits move, among themselves, and no factor is
// under 1, so they still outscore every hit after them: a page of any
// size starts the same ranking. A hit's factor depends on the request and
// the index alone, so filters change no score. Measured in
// docs/decisions.md (issue 19, categories).
const (
	tagDepth  = pairDepth
	tagWeight = 0.2
	// BM25 over tags.
	tagK1 = 1.2
	tagB  = 0.75
	// tagCountsBytes bounds the per-term tag counts one snapshot keeps;
	// past it they are dropped and counted again as requests need them.
	tagCountsBytes = 32 << 20
)

// tagTable is one snapshot's tags: which docs carry which, and per term
// how many docs of each tag hold it. Doc numbers are the snapshot's own,
// so a table serves one snapshot only.
type tagTable struct {
	snap  string
	once  sync.Once
	err   error
	start []uint32 // doc d's tags are tags[start[d]:start[d+1]]
	tags  []uint32 // indexes into size
	size  []uint32 // per tag, the docs carrying it
	avg   float64  // docs per tag, on average
	used  int      // tags some doc carries
	every bool     // every doc carries a tag

	mu    sync.Mutex
	terms map[string][]tagCount // per term: per tag holding it, how many of its docs do
	bytes int                   // what terms holds, about
}

// tagCount is how many docs of the tag at tag hold a term.
type tagCount struct {
	tag, n uint32
}

// tagsOf is the table of the snapshot p was planned on (r), built on
// first use, or nil when p names no snapshot (a search that raced a
// write: its result is not cached either, and building a table for one
// search would cost it more than its ranking). One table is kept: the
// current snapshot's.
func (ix *Index) tagsOf(ctx context.Context, r bleveindex.IndexReader, p *textPlan) (*tagTable, error) {
	if p.snap == "" {
		return nil, nil
	}
	ix.tagMu.Lock()
	if ix.tagTable == nil || ix.tagTable.snap != p.snap {
		ix.tagTable = &tagTable{snap: p.snap}
	}
	t := ix.tagTable
	ix.tagMu.Unlock()
	t.once.Do(func() { t.err = t.build(context.WithoutCancel(ctx), r) })
	return t, t.err
}

// build reads which docs carry which tags from the tags field. Where the
// dictionary's counts (an upper bound: they may count deleted docs) say
// some doc has no tag, categories cannot apply and nothing more is read.
func (t *tagTable) build(ctx context.Context, r bleveindex.IndexReader) error {
	docs, err := r.DocCount()
	if err != nil {
		return fmt.Errorf("index: search: %w", err)
	}
	dict, err := r.FieldDict(fieldTags)
	if err != nil {
		return fmt.Errorf("index: search: %w", err)
	}
	defer dict.Close()
	var names []string
	var assigned uint64
	for {
		e, err := dict.Next()
		if err != nil {
			return fmt.Errorf("index: search: %w", err)
		}
		if e == nil {
			break
		}
		names = append(names, e.Term)
		assigned += e.Count
	}
	if docs == 0 || assigned < docs {
		return nil
	}
	// Each tag's docs, then grouped by doc.
	type pair struct{ doc, tag uint32 }
	pairs := make([]pair, 0, assigned)
	var maxDoc uint32
	t.size = make([]uint32, len(names))
	for ti, name := range names {
		tagged, err := docsOf(ctx, r, name, fieldTags)
		if err != nil {
			return err
		}
		for _, d := range tagged {
			pairs = append(pairs, pair{d, uint32(ti)})
			maxDoc = max(maxDoc, d)
		}
		t.size[ti] = uint32(len(tagged))
		if len(tagged) > 0 {
			t.used++
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(a.doc, b.doc); c != 0 {
			return c
		}
		return cmp.Compare(a.tag, b.tag)
	})
	t.start = make([]uint32, maxDoc+2)
	t.tags = make([]uint32, len(pairs))
	for i, p := range pairs {
		t.tags[i] = p.tag
		t.start[p.doc+1]++
	}
	tagged := uint64(0)
	for d := 1; d < len(t.start); d++ {
		if t.start[d] > 0 {
			tagged++
		}
		t.start[d] += t.start[d-1]
	}
	t.every = tagged == docs
	if t.used > 0 {
		t.avg = float64(len(pairs)) / float64(t.used)
	}
	t.terms = map[string][]tagCount{}
	return nil
}

// of is the tags of doc d.
func (t *tagTable) of(d uint64) []uint32 {
	if d+1 >= uint64(len(t.start)) {
		return nil
	}
	return t.tags[t.start[d]:t.start[d+1]]
}

// counts is, per tag, how many of docs (a term's, sorted) carry it.
func (t *tagTable) counts(docs []uint32) []tagCount {
	n := make(map[uint32]uint32)
	for _, d := range docs {
		for _, tag := range t.of(uint64(d)) {
			n[tag]++
		}
	}
	out := make([]tagCount, 0, len(n))
	for tag, c := range n {
		out = append(out, tagCount{tag, c})
	}
	slices.SortFunc(out, func(a, b tagCount) int { return cmp.Compare(a.tag, b.tag) })
	return out
}

// termCounts is counts for the term of qt, from the ranker's list when the
// postings cache holds it, else from the index.
func (ix *Index) termCounts(ctx context.Context, r bleveindex.IndexReader, p *textPlan, t *tagTable, qt *queryTerm) ([]tagCount, error) {
	t.mu.Lock()
	c, ok := t.terms[qt.term]
	t.mu.Unlock()
	if ok {
		return c, nil
	}
	var docs []uint32
	if list := ix.postings.get(p.snap, listKeys(qt, false)[0]); list != nil {
		docs = list.docs // the ranker's: one list, a union where both fields hold the term
	} else {
		var err error
		if docs, err = termDocs(ctx, r, qt); err != nil {
			return nil, err
		}
	}
	c = t.counts(docs)
	t.mu.Lock()
	size := len(qt.term) + 8*len(c) + 64
	if t.bytes+size > tagCountsBytes {
		clear(t.terms)
		t.bytes = 0
	}
	t.terms[qt.term] = c
	t.bytes += size
	t.mu.Unlock()
	return c, nil
}

// termDocs is the docs holding the term of qt in any text field, sorted.
func termDocs(ctx context.Context, r bleveindex.IndexReader, qt *queryTerm) ([]uint32, error) {
	var docs []uint32
	for _, fi := range qt.fields {
		d, err := docsOf(ctx, r, qt.term, textFields[fi].name)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	slices.Sort(docs)
	return slices.Compact(docs), nil
}

// docsOf is the docs holding term in field, in order.
func docsOf(ctx context.Context, r bleveindex.IndexReader, term, field string) ([]uint32, error) {
	var docs []uint32
	err := walkPostings(ctx, r, term, field, false, func(n uint64, doc uint32, _ *bleveindex.TermFieldDoc) {
		if docs == nil {
			docs = make([]uint32, 0, n)
		}
		docs = append(docs, doc)
	})
	return docs, err
}

// rescoreTags re-scores the first tagDepth of hits, ranked for the plan p
// (and its parts, for a request of several) and ordered best first, by
// their categories (see above) and orders them again; the hits after them
// stay as they are.
func (ix *Index) rescoreTags(ctx context.Context, r bleveindex.IndexReader, p *textPlan, parts []textPlan, hits []Hit) ([]Hit, error) {
	top := hits[:min(len(hits), tagDepth)]
	if len(top) == 0 || ix.bleveScoring {
		return hits, nil
	}
	t, err := ix.tagsOf(ctx, r, p)
	if err != nil {
		return nil, err
	}
	if t == nil || !t.every {
		return hits, nil
	}
	// Each tag's score over the best tag's, for the request or, where
	// higher, for one of its parts (weighed as the parts' answers are).
	share := make([]float64, len(t.size))
	scores := make([]float64, len(t.size))
	var touched []uint32
	for i := -1; i < len(parts); i++ {
		plan, w := p, 1.0
		if i >= 0 {
			plan, w = &parts[i], partWeight
		}
		var err error
		if touched, err = ix.tagScores(ctx, r, plan, t, scores, touched[:0]); err != nil {
			return nil, err
		}
		best := 0.0
		for _, tag := range touched {
			best = max(best, scores[tag])
		}
		for _, tag := range touched {
			if best > 0 {
				share[tag] = max(share[tag], w*scores[tag]/best)
			}
			scores[tag] = 0
		}
	}
	for i := range top {
		s := 0.0
		for _, tag := range t.of(top[i].doc) {
			s = max(s, share[tag])
		}
		top[i].Raw *= 1 + tagWeight*s
	}
	slices.SortFunc(top, byRank)
	return hits, nil
}

// tagScores adds each tag's BM25 score for the plan's terms, the tag being
// one document of the entries carrying it (see above), to scores (by tag,
// all 0), and appends the tags it scored to touched.
func (ix *Index) tagScores(ctx context.Context, r bleveindex.IndexReader, p *textPlan, t *tagTable, scores []float64, touched []uint32) ([]uint32, error) {
	nt := float64(t.used)
	for ti := range p.terms {
		c, err := ix.termCounts(ctx, r, p, t, &p.terms[ti])
		if err != nil {
			return nil, err
		}
		if len(c) == 0 {
			continue
		}
		df := float64(len(c))
		idf := math.Log(1 + (nt-df+0.5)/(df+0.5))
		for _, tc := range c {
			f := float64(tc.n)
			norm := 1 - tagB + tagB*float64(t.size[tc.tag])/t.avg
			if scores[tc.tag] == 0 {
				touched = append(touched, tc.tag)
			}
			scores[tc.tag] += idf * f * (tagK1 + 1) / (f + tagK1*norm)
		}
	}
	return touched, nil
}
