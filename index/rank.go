package index

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Ranked text search with dynamic pruning.
//
// Bleve scores every doc that matches a query: for a few words that are
// each in a few percent of a 100k-doc index, tens of thousands of docs, to
// return ten. rankText returns the same hits, with the same scores and the
// same order of ties, as Bleve's searchers over the query textQuery builds,
// but skips the docs that cannot reach the page, by MaxScore (Turtle and
// Flood, 1995) over leaves, a leaf being one term in one field: every leaf
// has an upper bound on what it can add to a doc's score; once the page is
// full, the leaves with the smallest bounds, as many as cannot together
// lift a doc to the page's lowest score, are "non-essential": a doc that
// matches only them cannot get in, so their postings are no longer walked,
// only probed at the docs the other leaves propose, and a proposed doc is
// dropped as soon as what it has plus what it could still get falls short.
// Leaves rather than terms: a term's name-field postings are short and can
// score high, its text-field postings long and low, so the long ones are
// what pruning skips.
//
// The score it computes is Bleve's (v2.6.1), term for term:
//
//	leaf(t, f, d)   = idf · sqrt(freq)·k1 / (sqrt(freq) + k1·(1 − b + b·len/avgLen))
//	                  · boost_f · idf · qnorm
//	idf             = ln(1 + (N − df + 0.5) / (df + 0.5))     (df of t in field f)
//	avgLen          = ceil(field cardinality / N)
//	qnorm           = 1 / sqrt(Σ over every leaf of (boost_f · idf)²)
//	term(t, d)      = Σ leaves of t matching d · (leaves matching / leaves of t)
//	group(G, d)     = Σ terms of G matching d · (terms matching / terms of G)
//	score(d)        = group(must, d) + group(should, d)
//
// a doc matching at least one must term. Sums run in the order Bleve's
// disjunction searchers add them (clauses sorted by posting count), so
// scores agree to the bit on amd64; a test compares the two on hundreds of
// queries. A bound is the same sums with every leaf not yet looked at
// counted as matching at its bound, coordination factors included.
//
// A leaf's bound is idf · boost · idf · qnorm times the largest frequency
// part over the term's postings in that field, found by one walk of them
// the first time a term is ranked in an index generation, and cached with
// its document frequencies.

// pruneSlack keeps the bounds, summed in another order than the scores,
// safely above them.
const pruneSlack = 1e-9

// rankText returns the n best docs matching m (m.text non-empty), best
// first, ties in index order, and how many matches it scored. With count
// it prunes nothing, so that is every match.
func (ix *Index) rankText(ctx context.Context, r bleveindex.IndexReader, m matched, n int, count bool) ([]Hit, uint64, error) {
	p := m.text
	rk := ranker{}
	defer rk.close()
	if err := rk.open(ctx, ix, r, p, count, m.filter != nil || m.hidden != nil); err != nil {
		return nil, 0, err
	}
	sctx := &search.SearchContext{DocumentMatchPool: search.NewDocumentMatchPool(16, 0), IndexReader: r}
	var err error
	if m.filter != nil {
		if rk.filter, err = newGate(ctx, sctx, r, ix.bleve.Mapping(), m.filter); err != nil {
			return nil, 0, err
		}
	}
	if m.hidden != nil {
		if rk.hidden, err = newGate(ctx, sctx, r, ix.bleve.Mapping(), m.hidden); err != nil {
			return nil, 0, err
		}
	}
	hits, total, err := rk.run(ctx, n)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Hit, 0, len(hits))
	var id bleveindex.IndexInternalID
	for _, h := range hits {
		id = bleveindex.NewIndexInternalID(id, h.doc)
		ext, err := r.ExternalID(id)
		if err != nil {
			return nil, 0, fmt.Errorf("index: search: %w", err)
		}
		out = append(out, Hit{ID: ext, Raw: h.score})
	}
	return out, total, nil
}

// leaf walks the postings of one term in one field.
type leaf struct {
	tfr   bleveindex.TermFieldReader
	doc   bleveindex.TermFieldDoc
	cur   uint64 // the current doc; exhausted once it is math.MaxUint64
	id    bleveindex.IndexInternalID
	df    uint64
	boost float64
	idf   float64
	avg   float64
	qw    float64 // boost · idf · qnorm
	ub    float64 // bound of score()
	// At the doc being scored: whether the leaf matches it (unknown until
	// looked at) and its score there.
	state leafState
	s     float64
}

type leafState uint8

const (
	miss leafState = iota
	match
	unknown
)

// look scores the leaf at d, its postings being at or after d.
func (l *leaf) look(d uint64) {
	if l.cur == d {
		l.state, l.s = match, l.score()
	} else {
		l.state = miss
	}
}

const exhausted = math.MaxUint64

func (l *leaf) set(d *bleveindex.TermFieldDoc, err error) error {
	if err != nil {
		return fmt.Errorf("index: search: %w", err)
	}
	if d == nil {
		l.cur = exhausted
		return nil
	}
	l.cur = d.ID.Value()
	return nil
}

func (l *leaf) next() error { return l.set(l.tfr.Next(&l.doc)) }

// advance moves to the first doc at or after d.
func (l *leaf) advance(d uint64) error {
	if l.cur >= d {
		return nil
	}
	l.id = bleveindex.NewIndexInternalID(l.id, d)
	return l.set(l.tfr.Advance(l.id, &l.doc))
}

// part is the BM25 frequency part of the current posting, as Bleve's
// TermQueryScorer computes it.
func part(freq uint64, norm, avg float64) float64 {
	tf := math.Sqrt(float64(freq))
	fieldLength := 1 / (norm * norm)
	return (tf * search.BM25_k1) / (tf + search.BM25_k1*(1-search.BM25_b+(search.BM25_b*fieldLength/avg)))
}

// score is the current posting's score, as Bleve's TermQueryScorer.Score
// computes it (idf·tf·k1/... first, then the query weight).
func (l *leaf) score() float64 {
	tf := math.Sqrt(float64(l.doc.Freq))
	fieldLength := 1 / (l.doc.Norm * l.doc.Norm)
	s := l.idf * (tf * search.BM25_k1) /
		(tf + search.BM25_k1*(1-search.BM25_b+(search.BM25_b*fieldLength/l.avg)))
	return s * l.qw
}

// term is one query term: its leaves, in the order Bleve sums them.
type term struct {
	leaves []leaf
}

// score is the term's score at the doc whose leaves were looked at, as
// Bleve's disjunction over the term's fields computes it; with optimistic,
// every leaf not yet looked at counts as matching at its bound. ok is false
// when no leaf matches (or could).
func (t *term) score(optimistic bool) (sum float64, ok bool) {
	n := 0
	for i := range t.leaves {
		l := &t.leaves[i]
		switch {
		case l.state == match:
			sum += l.s
			n++
		case l.state == unknown && optimistic:
			sum += l.ub
			n++
		}
	}
	if n > 0 && len(t.leaves) > 1 {
		sum = sum * (float64(n) / float64(len(t.leaves)))
	}
	return sum, n > 0
}

// ranker is one rankText run.
type ranker struct {
	terms        []term
	must, should []int     // indexes into terms, in the order Bleve sums them
	order        []leafRef // every leaf, by bound ascending
	filter       *gate
	hidden       *gate
	count        bool
}

// leafRef names terms[t].leaves[l].
type leafRef struct{ t, l int }

func (rk *ranker) leaf(r leafRef) *leaf { return &rk.terms[r.t].leaves[r.l] }

func (rk *ranker) close() {
	for i := range rk.terms {
		for j := range rk.terms[i].leaves {
			if tfr := rk.terms[i].leaves[j].tfr; tfr != nil {
				_ = tfr.Close()
			}
		}
	}
	rk.filter.close()
	rk.hidden.close()
}

// open sets up the leaves, their weights and bounds.
func (rk *ranker) open(ctx context.Context, ix *Index, r bleveindex.IndexReader, p *textPlan, count, wrapped bool) error {
	rk.count = count
	br, ok := r.(bleveindex.BM25Reader)
	if !ok {
		return fmt.Errorf("index: search: reader has no BM25 statistics")
	}
	avg := make([]float64, len(textFields))
	for fi, f := range textFields {
		c, err := br.FieldCardinality(f.name)
		if err != nil {
			return fmt.Errorf("index: search: %w", err)
		}
		if p.docs > 0 {
			avg[fi] = math.Ceil(float64(c) / float64(p.docs))
		}
	}
	N := float64(p.docs)
	rk.terms = make([]term, len(p.terms))
	for ti := range p.terms {
		qt := &p.terms[ti]
		if !count && qt.maxPart == nil {
			if err := ix.boundTerm(ctx, r, p, qt, avg); err != nil {
				return err
			}
		}
		t := &rk.terms[ti]
		t.leaves = make([]leaf, len(qt.fields))
		for li, fi := range qt.fields {
			df := float64(qt.df[li])
			l := &t.leaves[li]
			l.df, l.boost, l.avg = qt.df[li], textFields[fi].boost, avg[fi]
			l.idf = math.Log(1 + (N-df+0.5)/(df+0.5))
			if !count {
				l.ub = l.idf * qt.maxPart[li]
			}
			tfr, err := r.TermFieldReader(ctx, []byte(qt.term), textFields[fi].name, true, true, false)
			if err != nil {
				return fmt.Errorf("index: search: %w", err)
			}
			l.tfr = tfr
			if err := l.next(); err != nil {
				return err
			}
		}
	}
	// Bleve's disjunction searchers order their clauses by posting count
	// (sort.Sort, so ties fall as its algorithm leaves them): sums run in
	// that order, here as there.
	counts := make([]uint64, len(rk.terms))
	for ti := range rk.terms {
		t := &rk.terms[ti]
		sort.Sort(leavesByCount(t.leaves))
		for li := range t.leaves {
			counts[ti] += t.leaves[li].df
		}
	}
	rk.must = slices.Clone(p.must)
	sort.Sort(termsByCount{rk.must, counts})
	rk.should = slices.Clone(p.should)
	sort.Sort(termsByCount{rk.should, counts})

	qnorm := rk.queryNorm(wrapped)
	for ti := range rk.terms {
		for li := range rk.terms[ti].leaves {
			l := &rk.terms[ti].leaves[li]
			l.qw = l.boost * l.idf * qnorm
			if qnorm == 0 {
				l.qw = 1
			}
			l.ub *= l.qw
			rk.order = append(rk.order, leafRef{ti, li})
		}
	}
	slices.SortStableFunc(rk.order, func(a, b leafRef) int { return cmpFloat(rk.leaf(a).ub, rk.leaf(b).ub) })
	return nil
}

// queryNorm is 1/sqrt of the sum of the leaves' squared weights
// (boost·idf)², added up as Bleve's searchers add their Weight()s: per term,
// then per group, then must plus should. A query of a single leaf is
// Bleve's bare term searcher, which applies no norm (0 here) unless a
// boolean (filters, hidden docs) wraps it.
func (rk *ranker) queryNorm(wrapped bool) float64 {
	weight := func(ti int) float64 {
		sum := 0.0
		for _, l := range rk.terms[ti].leaves {
			w := l.boost * l.idf
			sum += w * w
		}
		return sum
	}
	groupWeight := func(idx []int) float64 {
		sum := 0.0
		for _, ti := range idx {
			sum += weight(ti)
		}
		return sum
	}
	if !wrapped && len(rk.terms) == 1 && len(rk.terms[0].leaves) == 1 {
		return 0 // no norm: the leaf's query weight is 1
	}
	sum := 0.0 + groupWeight(rk.must)
	if len(rk.should) > 0 {
		sum += groupWeight(rk.should)
	}
	return 1.0 / math.Sqrt(sum)
}

type leavesByCount []leaf

func (s leavesByCount) Len() int           { return len(s) }
func (s leavesByCount) Less(i, j int) bool { return s[i].df < s[j].df }
func (s leavesByCount) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }

type termsByCount struct {
	idx    []int
	counts []uint64
}

func (s termsByCount) Len() int           { return len(s.idx) }
func (s termsByCount) Less(i, j int) bool { return s.counts[s.idx[i]] < s.counts[s.idx[j]] }
func (s termsByCount) Swap(i, j int)      { s.idx[i], s.idx[j] = s.idx[j], s.idx[i] }

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// boundTerm computes qt.maxPart by walking the term's postings once, and
// caches it when the plan's statistics are cacheable.
func (ix *Index) boundTerm(ctx context.Context, r bleveindex.IndexReader, p *textPlan, qt *queryTerm, avg []float64) error {
	parts := make([]float64, len(qt.fields))
	var d bleveindex.TermFieldDoc
	for li, fi := range qt.fields {
		tfr, err := r.TermFieldReader(ctx, []byte(qt.term), textFields[fi].name, true, true, false)
		if err != nil {
			return fmt.Errorf("index: search: %w", err)
		}
		for i := 0; ; i++ {
			if i%4096 == 0 {
				if err := ctx.Err(); err != nil {
					_ = tfr.Close()
					return fmt.Errorf("index: search: %w", err)
				}
			}
			next, err := tfr.Next(&d)
			if err != nil {
				_ = tfr.Close()
				return fmt.Errorf("index: search: %w", err)
			}
			if next == nil {
				break
			}
			parts[li] = max(parts[li], part(next.Freq, next.Norm, avg[fi]))
		}
		_ = tfr.Close()
	}
	bounded := *qt
	bounded.maxPart = parts
	*qt = bounded
	if p.cache && len(qt.term) <= maxCachedTermBytes {
		ix.dfs.put(p.gen, qt.term, bounded)
	}
	return nil
}

// hit is a scored doc.
type hit struct {
	doc   uint64
	score float64
}

// worse orders hits as Bleve's collector drops them: lower score, then
// later in the index.
func worse(a, b hit) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.doc > b.doc
}

// page is a min-heap of the best hits so far, worst on top.
type page []hit

func (h page) Len() int           { return len(h) }
func (h page) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h page) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *page) Push(x any)        { *h = append(*h, x.(hit)) }
func (h *page) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// run walks the candidates in doc order and keeps the n best.
func (rk *ranker) run(ctx context.Context, n int) ([]hit, uint64, error) {
	if n <= 0 && !rk.count {
		return nil, 0, nil
	}
	best := make(page, 0, min(n, 1024))
	theta := math.Inf(-1) // lowest score on a full page
	ne := 0               // rk.order[:ne] are non-essential
	var total uint64
	for iter := 0; ; iter++ {
		if iter%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, 0, fmt.Errorf("index: search: %w", err)
			}
		}
		// The next candidate: the first doc of an essential leaf.
		d := uint64(exhausted)
		for _, r := range rk.order[ne:] {
			d = min(d, rk.leaf(r).cur)
		}
		if d == exhausted {
			break
		}
		// Essential leaves are at or after d: look, then step past d.
		for _, r := range rk.order[ne:] {
			l := rk.leaf(r)
			l.look(d)
			if l.state == match {
				if err := l.next(); err != nil {
					return nil, 0, err
				}
			}
		}
		for _, r := range rk.order[:ne] {
			rk.leaf(r).state = unknown
		}
		// Non-essential leaves, largest bound first, while d can still
		// make the page.
		pruned := false
		for i := ne - 1; i >= 0; i-- {
			if b, ok := rk.score(true); !ok || b*(1+pruneSlack) <= theta {
				pruned = true
				break
			}
			l := rk.leaf(rk.order[i])
			if err := l.advance(d); err != nil {
				return nil, 0, err
			}
			l.look(d)
		}
		if pruned {
			continue
		}
		score, ok := rk.score(false)
		if !ok {
			continue
		}
		if admitted, err := rk.admit(ctx, d); err != nil {
			return nil, 0, err
		} else if !admitted {
			continue
		}
		total++
		h := hit{doc: d, score: score}
		switch {
		case len(best) < n:
			heap.Push(&best, h)
		case n > 0 && worse(best[0], h):
			best[0] = h
			heap.Fix(&best, 0)
		default:
			continue
		}
		if len(best) == n && !rk.count && best[0].score > theta {
			theta = best[0].score
			for ne < len(rk.order) && rk.prefixBound(ne+1)*(1+pruneSlack) <= theta {
				ne++
			}
		}
	}
	out := make([]hit, len(best))
	for i := len(best) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&best).(hit)
	}
	return out, total, nil
}

// prefixBound is the most a doc can score that matches none of the leaves
// but rk.order[:i].
func (rk *ranker) prefixBound(i int) float64 {
	for j, r := range rk.order {
		if j < i {
			rk.leaf(r).state = unknown
		} else {
			rk.leaf(r).state = miss
		}
	}
	b, _ := rk.score(true)
	return b
}

// score adds up the leaves' scores at the doc they were looked at as
// Bleve's disjunction and boolean searchers do: per term, per group, must
// plus should. ok is false when no must term matches. With optimistic,
// leaves not looked at yet count as matching at their bounds, which makes
// it a bound on the score.
func (rk *ranker) score(optimistic bool) (float64, bool) {
	must, ok := rk.groupScore(rk.must, optimistic)
	if !ok {
		return 0, false
	}
	if should, ok := rk.groupScore(rk.should, optimistic); ok {
		return 0 + must + should, true
	}
	return must, true
}

func (rk *ranker) groupScore(idx []int, optimistic bool) (float64, bool) {
	sum, n := 0.0, 0
	for _, ti := range idx {
		if s, ok := rk.terms[ti].score(optimistic); ok {
			sum += s
			n++
		}
	}
	if n > 0 && len(idx) > 1 {
		sum = sum * (float64(n) / float64(len(idx)))
	}
	return sum, n > 0
}

// admit applies the filters and the hidden docs' exclusion to d.
func (rk *ranker) admit(ctx context.Context, d uint64) (bool, error) {
	if rk.filter != nil {
		in, err := rk.filter.holds(d)
		if err != nil || !in {
			return false, err
		}
	}
	if rk.hidden != nil {
		in, err := rk.hidden.holds(d)
		if err != nil || in {
			return false, err
		}
	}
	return true, nil
}

// gate answers "does doc d match q?" for ascending d, by advancing one
// unscored Bleve searcher, as Bleve's own filtering searcher does.
type gate struct {
	s    search.Searcher
	sctx *search.SearchContext
	at   *search.DocumentMatch
	done bool
	id   bleveindex.IndexInternalID
}

func newGate(ctx context.Context, sctx *search.SearchContext, r bleveindex.IndexReader, im mapping.IndexMapping, q query.Query) (*gate, error) {
	s, err := q.Searcher(ctx, r, im, search.SearcherOptions{Score: "none"})
	if err != nil {
		return nil, fmt.Errorf("index: search: %w", err)
	}
	return &gate{s: s, sctx: sctx}, nil
}

func (g *gate) holds(d uint64) (bool, error) {
	if g.done {
		return false, nil
	}
	if g.at != nil && g.at.IndexInternalID.Value() >= d {
		return g.at.IndexInternalID.Value() == d, nil
	}
	if g.at != nil {
		g.sctx.DocumentMatchPool.Put(g.at)
	}
	g.id = bleveindex.NewIndexInternalID(g.id, d)
	at, err := g.s.Advance(g.sctx, g.id)
	if err != nil {
		return false, fmt.Errorf("index: search: %w", err)
	}
	if at == nil {
		g.done, g.at = true, nil
		return false, nil
	}
	g.at = at
	return at.IndexInternalID.Value() == d, nil
}

func (g *gate) close() {
	if g != nil {
		_ = g.s.Close()
	}
}
