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

// leaf walks the decoded postings of one term in one field.
type leaf struct {
	list  *decoded
	pos   int
	cur   uint64 // list.docs[pos]; exhausted past the end
	df    uint64
	boost float64
	idf   float64
	qw    float64 // boost · idf · qnorm
	ub    float64 // bound of score()
	// seen is the last doc the leaf matched when looked at, s its score
	// there: at the doc being scored, a leaf matches if seen is that doc.
	seen uint64
	s    float64
}

// look scores the leaf at d, its postings being at or after d, and
// reports whether it matches.
func (l *leaf) look(d uint64) bool {
	if l.cur != d {
		return false
	}
	l.seen, l.s = d, l.score()
	return true
}

const exhausted = math.MaxUint64

func (l *leaf) at() {
	if l.pos < len(l.list.docs) {
		l.cur = uint64(l.list.docs[l.pos])
	} else {
		l.cur = exhausted
	}
}

func (l *leaf) next() {
	l.pos++
	l.at()
}

// advance moves to the first doc at or after d: a galloping search, since
// the target is usually near.
func (l *leaf) advance(d uint64) {
	if l.cur >= d {
		return
	}
	docs := l.list.docs
	lo, step := l.pos+1, 1
	hi := lo
	for hi < len(docs) && uint64(docs[hi]) < d {
		lo = hi + 1
		hi += step
		step *= 2
	}
	hi = min(hi, len(docs))
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if uint64(docs[mid]) < d {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	l.pos = lo
	l.at()
}

// score is the current posting's score, as Bleve's TermQueryScorer.Score
// computes it: the doc score times the query weight.
func (l *leaf) score() float64 { return l.list.s[l.pos] * l.qw }

// term is one query term: its leaves, in the order Bleve sums them.
type term struct {
	leaves []leaf
}

// score is the term's score at d, its leaves having been looked at there,
// as Bleve's disjunction over the term's fields computes it; ok is false
// when no leaf matches.
func (t *term) score(d uint64) (sum float64, ok bool) {
	n := 0
	for i := range t.leaves {
		if l := &t.leaves[i]; l.seen == d {
			sum += l.s
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
	opt          optimist
	filter       *gate
	hidden       *gate
	count        bool
}

// leafRef names terms[t].leaves[l].
type leafRef struct{ t, l int }

func (rk *ranker) leaf(r leafRef) *leaf { return &rk.terms[r.t].leaves[r.l] }

func (rk *ranker) close() {
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
	snap := ""
	if p.cache {
		snap = snapshotKey(r, p.gen)
	}
	rk.terms = make([]term, len(p.terms))
	for ti := range p.terms {
		qt := &p.terms[ti]
		t := &rk.terms[ti]
		t.leaves = make([]leaf, len(qt.fields))
		for li, fi := range qt.fields {
			df := float64(qt.df[li])
			l := &t.leaves[li]
			l.df, l.boost = qt.df[li], textFields[fi].boost
			l.idf = math.Log(1 + (N-df+0.5)/(df+0.5))
			key := leafKey{qt.term, fi}
			if snap != "" {
				l.list = ix.postings.get(snap, key)
			}
			if l.list == nil {
				list, err := decode(ctx, r, qt.term, textFields[fi].name, l.idf, avg[fi])
				if err != nil {
					return err
				}
				l.list = list
				if snap != "" && len(qt.term) <= maxCachedTermBytes {
					ix.postings.put(snap, key, list)
				}
			}
			l.seen = exhausted
			l.at()
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
			l.ub = l.list.max * l.qw
			rk.order = append(rk.order, leafRef{ti, li})
		}
	}
	slices.SortStableFunc(rk.order, func(a, b leafRef) int { return cmpFloat(rk.leaf(a).ub, rk.leaf(b).ub) })
	rk.opt.init(rk)
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
	ess := essentials{rk: rk}
	ess.reset(slices.Clone(rk.order))
	matched := make([]leafRef, 0, len(rk.order))
	var total uint64
	for iter := 0; ; iter++ {
		if iter%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, 0, fmt.Errorf("index: search: %w", err)
			}
		}
		// The next candidate: the first doc of an essential leaf.
		d := ess.first()
		if d == exhausted {
			break
		}
		matched = ess.take(d, matched[:0])
		// Non-essential leaves, largest bound first, while d can still
		// make the page.
		if ne > 0 {
			rk.opt.start(rk, matched)
			pruned := false
			for i := ne - 1; i >= 0; i-- {
				if b, ok := rk.opt.bound(); !ok || b*(1+pruneSlack) <= theta {
					pruned = true
					break
				}
				r := rk.order[i]
				l := rk.leaf(r)
				l.advance(d)
				rk.opt.looked(rk, r, l.look(d))
			}
			if pruned {
				continue
			}
		}
		score, ok := rk.score(d)
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
			grew := false
			for ne < len(rk.order) && rk.opt.prefixBound(rk, ne+1)*(1+pruneSlack) <= theta {
				ne++
				grew = true
			}
			if grew {
				rk.opt.base(rk, ne)
				ess.reset(append(ess.refs[:0], rk.order[ne:]...))
			}
		}
	}
	out := make([]hit, len(best))
	for i := len(best) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&best).(hit)
	}
	return out, total, nil
}

// essentials yields the candidates: the docs of the essential leaves, in
// order. A few leaves are scanned; many (a pasted paragraph) are kept in a
// min-heap by current doc.
type essentials struct {
	rk   *ranker
	refs []leafRef
	heap bool
}

// scanLeaves is the most essential leaves scanned rather than heaped.
const scanLeaves = 12

func (e *essentials) reset(refs []leafRef) {
	e.refs, e.heap = refs, len(refs) > scanLeaves
	if e.heap {
		heap.Init(e)
	}
}

// first is the next candidate; exhausted when there is none.
func (e *essentials) first() uint64 {
	if e.heap {
		if len(e.refs) == 0 {
			return exhausted
		}
		return e.rk.leaf(e.refs[0]).cur
	}
	d := uint64(exhausted)
	for _, r := range e.refs {
		d = min(d, e.rk.leaf(r).cur)
	}
	return d
}

// take looks at d on the leaves there, steps them past it and appends them
// to matched.
func (e *essentials) take(d uint64, matched []leafRef) []leafRef {
	if !e.heap {
		for _, r := range e.refs {
			if l := e.rk.leaf(r); l.look(d) {
				l.next()
				matched = append(matched, r)
			}
		}
		return matched
	}
	for len(e.refs) > 0 && e.rk.leaf(e.refs[0]).cur == d {
		r := e.refs[0]
		l := e.rk.leaf(r)
		l.look(d)
		l.next()
		heap.Fix(e, 0)
		matched = append(matched, r)
	}
	return matched
}

func (e *essentials) Len() int           { return len(e.refs) }
func (e *essentials) Less(i, j int) bool { return e.rk.leaf(e.refs[i]).cur < e.rk.leaf(e.refs[j]).cur }
func (e *essentials) Swap(i, j int)      { e.refs[i], e.refs[j] = e.refs[j], e.refs[i] }
func (e *essentials) Push(x any)         { e.refs = append(e.refs, x.(leafRef)) }
func (e *essentials) Pop() any {
	x := e.refs[len(e.refs)-1]
	e.refs = e.refs[:len(e.refs)-1]
	return x
}

// optimist keeps the bound on the score of the doc being scored as its
// non-essential leaves are looked at one by one: the score with every leaf
// not yet looked at counted as matching at its bound. It is updated in
// constant time per leaf looked at.
type optimist struct {
	sum, ub    []float64 // per term: matched leaves' scores, unknown leaves' bounds
	n, u       []int     // per term: how many of each
	ub0        []float64 // per term: the bounds of its non-essential leaves
	u0         []int     // and how many there are
	group      []int     // per term: 0 must, 1 should
	size       [2]int    // terms per group
	gsum       [2]float64
	gn         [2]int // terms per group that match or may
	termBounds []float64
}

func (o *optimist) init(rk *ranker) {
	n := len(rk.terms)
	o.sum, o.ub, o.ub0, o.termBounds = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	o.n, o.u, o.u0, o.group = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	for _, ti := range rk.should {
		o.group[ti] = 1
	}
	o.size = [2]int{len(rk.must), len(rk.should)}
}

// base records the non-essential leaves, rk.order[:ne].
func (o *optimist) base(rk *ranker, ne int) {
	clear(o.ub0)
	clear(o.u0)
	for _, r := range rk.order[:ne] {
		o.ub0[r.t] += rk.leaf(r).ub
		o.u0[r.t]++
	}
}

// start sets the state at a new doc: the essential leaves in matched
// match it, the other essential leaves do not, and the non-essential ones
// are not looked at yet.
func (o *optimist) start(rk *ranker, matched []leafRef) {
	copy(o.ub, o.ub0)
	copy(o.u, o.u0)
	clear(o.sum)
	clear(o.n)
	for _, r := range matched {
		o.sum[r.t] += rk.leaf(r).s
		o.n[r.t]++
	}
	o.total(rk)
}

// total recomputes the terms' and groups' bounds.
func (o *optimist) total(rk *ranker) {
	o.gsum, o.gn = [2]float64{}, [2]int{}
	for ti := range rk.terms {
		b, ok := o.term(rk, ti)
		o.termBounds[ti] = b
		if ok {
			o.gsum[o.group[ti]] += b
			o.gn[o.group[ti]]++
		}
	}
}

func (o *optimist) term(rk *ranker, ti int) (float64, bool) {
	k := o.n[ti] + o.u[ti]
	if k == 0 {
		return 0, false
	}
	b := o.sum[ti] + o.ub[ti]
	if f := len(rk.terms[ti].leaves); f > 1 {
		b *= float64(k) / float64(f)
	}
	return b, true
}

// looked updates the state once non-essential leaf r was looked at.
func (o *optimist) looked(rk *ranker, r leafRef, match bool) {
	ti, l := r.t, rk.leaf(r)
	g := o.group[ti]
	before := o.n[ti]+o.u[ti] > 0
	o.ub[ti] -= l.ub
	o.u[ti]--
	if match {
		o.sum[ti] += l.s
		o.n[ti]++
	}
	b, ok := o.term(rk, ti)
	o.gsum[g] += b - o.termBounds[ti]
	o.termBounds[ti] = b
	if before && !ok {
		o.gn[g]--
	}
}

// bound is the bound on the doc's score; ok is false when no must term can
// match.
func (o *optimist) bound() (float64, bool) {
	if o.gn[0] == 0 {
		return 0, false
	}
	b := o.gsum[0]
	if o.size[0] > 1 {
		b *= float64(o.gn[0]) / float64(o.size[0])
	}
	if o.gn[1] > 0 {
		s := o.gsum[1]
		if o.size[1] > 1 {
			s *= float64(o.gn[1]) / float64(o.size[1])
		}
		b += s
	}
	return b, true
}

// prefixBound is the most a doc can score that matches none of the leaves
// but rk.order[:i].
func (o *optimist) prefixBound(rk *ranker, i int) float64 {
	clear(o.sum)
	clear(o.n)
	clear(o.ub)
	clear(o.u)
	for _, r := range rk.order[:i] {
		o.ub[r.t] += rk.leaf(r).ub
		o.u[r.t]++
	}
	o.total(rk)
	b, _ := o.bound()
	return b
}

// score adds up the leaves' scores at d, where they were looked at, as
// Bleve's disjunction and boolean searchers do: per term, per group, must
// plus should. ok is false when no must term matches.
func (rk *ranker) score(d uint64) (float64, bool) {
	must, ok := rk.groupScore(rk.must, d)
	if !ok {
		return 0, false
	}
	if should, ok := rk.groupScore(rk.should, d); ok {
		return 0 + must + should, true
	}
	return must, true
}

func (rk *ranker) groupScore(idx []int, d uint64) (float64, bool) {
	sum, n := 0.0, 0
	for _, ti := range idx {
		if s, ok := rk.terms[ti].score(d); ok {
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
