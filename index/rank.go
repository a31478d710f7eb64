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
// return ten. rankText scores the docs the query textQuery builds matches,
// but skips the docs that cannot reach the page, by MaxScore (Turtle and
// Flood, 1995) over leaves, a leaf being one term in one field: every leaf
// has an upper bound on what it can add to a doc's score; once the page is
// full, a set of leaves that cannot together lift a doc to the page's
// lowest score is "non-essential": a doc that matches only them cannot get
// in, so their postings are no longer walked, only probed at the docs the
// other leaves propose, and a proposed doc is dropped as soon as what it
// has plus what it could still get falls short. Leaves rather than terms:
// a term's name-field postings are short and can score high, its
// text-field postings long and low, so the long ones are what pruning
// skips. Before the walk, seed scores the docs most likely to make the
// page, so that pruning bites from the start (see there).
//
// The score is BM25F (Robertson et al., 2004) over the two text fields:
//
//	leaf(t, f, d)   = w_f · sqrt(freq) / (1 − b + b·len/avgLen)   (fieldTF, postings.go)
//	term(t, d)      = W_t · x·(k1 + 1) / (k1 + x),  x = Σ leaves of t matching d
//	W_t             = idf_t^idfPower / sqrt(Σ over the query's terms of idf^(2·idfPower))
//	idf_t           = ln(1 + (N − df + 0.5) / (df + 0.5))     (the term's largest df over the fields)
//	w_f             = fieldWeight(f, softenedTerms) (search.go)
//	avgLen          = ceil(field cardinality / N)
//	group(G, d)     = Σ terms of G matching d · sqrt(terms matching / terms of G)
//	score(d)        = group(must, d) + group(should, d)
//
// a doc matching at least one must term; k1 1.2 and b 0.75 are Bleve's.
// A term saturates once over the fields, so a word in both the name and
// the description counts little more than in either, and the square root
// of the coordination factor rewards docs that answer more of a request
// without letting one that scatters over its generic words outrank the
// one that answers half of a request of two intents (docs/decisions.md).
//
// With Index.bleveScoring the score is Bleve's (v2.6.1), term for term,
// for the query textQuery builds: leaf(t, f, d) = idf·sqrt(freq)·k1 /
// (sqrt(freq) + k1·(1 − b + b·len/avgLen)) · boost·idf·qnorm (idf of t in
// f, boost = leafBoost, qnorm = 1/sqrt(Σ over every leaf of (boost·idf)²)),
// term(t, d) = Σ leaves · (leaves matching / leaves of t), group
// coordination without the square root, sums in the order Bleve's
// disjunction searchers add them (clauses sorted by posting count), so
// scores agree to the bit on amd64; tests compare the two on hundreds of
// queries, so the pruning machinery is checked against Bleve's searchers,
// and the search fuzz target compares pruned with unpruned rankings in
// the form in use. A bound is the same sums with every leaf not yet
// looked at counted as matching at its bound, saturation and coordination
// factors included (both grow with what they are given, so a bound stays
// one).
//
// A leaf's bound is its query weight (w_f; boost · idf · qnorm in Bleve's
// form) times the largest value in its decoded postings (postings.go), or, once its
// champions are seeded, the largest of the others.

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
	var err error
	if err = rk.open(ctx, ix, r, p, count, m.filter != nil || m.hidden != nil); err != nil {
		return nil, 0, err
	}
	// The walk and the seeding before it each check docs in ascending
	// order, so each has its own gates.
	if rk.gates, err = openGates(ctx, r, ix.bleve.Mapping(), m); err != nil {
		return nil, 0, err
	}
	if !count && n > 0 {
		if rk.seedGates, err = openGates(ctx, r, ix.bleve.Mapping(), m); err != nil {
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
	gone bool // every doc of it was seeded: the walk skips them all
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

// advance moves to the first doc at or after d.
func (l *leaf) advance(d uint64) {
	if l.cur >= d {
		return
	}
	l.pos = gallop(l.list.docs, l.pos+1, d)
	l.at()
}

// gallop is the position of the first doc at or after d in docs[from:]:
// a galloping search, since the target is usually near.
func gallop(docs []uint32, from int, d uint64) int {
	lo, step := from, 1
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
	return lo
}

// score is the current posting's score: its decoded value times the query
// weight (in Bleve's form, as its TermQueryScorer.Score computes it).
func (l *leaf) score() float64 { return l.scoreAt(l.pos) }

// scoreAt is the score of the posting at position p.
func (l *leaf) scoreAt(p int) float64 { return l.list.s[p] * l.qw }

// term is one query term: its leaves, in the order Bleve sums them.
type term struct {
	leaves []leaf
	bleve  bool    // Index.bleveScoring
	w      float64 // W_t (BM25F)
}

// BM25F's saturation constant (Bleve's BM25 k1).
const bm25K1 = 1.2

// sat is the term's score for a sum x of its leaves (BM25F), or x itself
// in Bleve's form, scaled there by the share k of its leaves that match
// (or may); sat grows with x.
func (t *term) sat(x float64, k int) float64 {
	if t.bleve {
		if f := len(t.leaves); f > 1 {
			return x * (float64(k) / float64(f))
		}
		return x
	}
	return t.w * x * (bm25K1 + 1) / (bm25K1 + x)
}

// score is the term's score at d, its leaves having been looked at there:
// sat of their sum; ok is false when no leaf matches.
func (t *term) score(d uint64) (sum float64, ok bool) {
	n := 0
	for i := range t.leaves {
		if l := &t.leaves[i]; l.seen == d {
			sum += l.s
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return t.sat(sum, n), true
}

// ranker is one rankText run.
type ranker struct {
	terms        []term
	must, should []int     // indexes into terms, in the order Bleve sums them
	order        []leafRef // every leaf, longest postings first
	opt          optimist
	gates        gates // for the walk
	seedGates    gates // for the seeding
	count        bool
	bleve        bool // Index.bleveScoring
}

// leafRef names terms[t].leaves[l].
type leafRef struct{ t, l int }

func (rk *ranker) leaf(r leafRef) *leaf { return &rk.terms[r.t].leaves[r.l] }

// gain is the most leaf r can add to a doc's score on its own: its bound,
// through its term's saturation in BM25F (leaves of different terms are
// compared by it).
func (rk *ranker) gain(r leafRef) float64 {
	if rk.bleve {
		return rk.leaf(r).ub
	}
	return rk.terms[r.t].sat(rk.leaf(r).ub, 1)
}

func (rk *ranker) close() {
	rk.gates.close()
	rk.seedGates.close()
}

// open sets up the leaves, their weights and bounds.
func (rk *ranker) open(ctx context.Context, ix *Index, r bleveindex.IndexReader, p *textPlan, count, wrapped bool) error {
	rk.count = count
	rk.bleve = ix.bleveScoring
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
	snap := p.snap
	rk.terms = make([]term, len(p.terms))
	for ti := range p.terms {
		qt := &p.terms[ti]
		t := &rk.terms[ti]
		t.leaves = make([]leaf, len(qt.fields))
		t.bleve = rk.bleve
		for li, fi := range qt.fields {
			l := &t.leaves[li]
			l.df = qt.df[li]
			l.idf = idf(p.docs, l.df)
			l.boost = fieldWeight(fi, p.softenedTerms())
			if rk.bleve {
				l.boost = leafBoost(fi, l.idf, idf(p.docs, qt.maxDF), len(p.terms))
			}
			key := leafKey{qt.term, fi}
			if snap != "" {
				l.list = ix.postings.get(snap, key)
			}
			if l.list == nil {
				list, err := decode(ctx, r, qt.term, textFields[fi].name, l.idf, avg[fi], rk.bleve)
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
	if !rk.bleve {
		sum := 0.0
		for ti := range rk.terms {
			t := &rk.terms[ti]
			t.w = math.Pow(idf(p.docs, p.terms[ti].maxDF), idfPower)
			sum += t.w * t.w
		}
		for ti := range rk.terms {
			rk.terms[ti].w /= math.Sqrt(sum)
		}
	}
	for ti := range rk.terms {
		for li := range rk.terms[ti].leaves {
			l := &rk.terms[ti].leaves[li]
			switch {
			case !rk.bleve:
				l.qw = l.boost
			case qnorm == 0:
				l.qw = 1
			default:
				l.qw = l.boost * l.idf * qnorm
			}
			l.ub = l.list.best() * l.qw
			rk.order = append(rk.order, leafRef{ti, li})
		}
	}
	slices.SortStableFunc(rk.order, func(a, b leafRef) int {
		if c := len(rk.leaf(b).list.docs) - len(rk.leaf(a).list.docs); c != 0 {
			return c
		}
		return cmpFloat(rk.gain(a), rk.gain(b))
	})
	rk.opt.init(rk)
	return nil
}

// queryNorm is Bleve's query norm (Bleve's form only): 1/sqrt of the sum
// of the leaves' squared weights (boost·idf)², added up as Bleve's
// searchers add their Weight()s: per term, then per group, then must plus
// should. A query of a single leaf is Bleve's bare term searcher, which
// applies no norm (0 here) unless a boolean (filters, hidden docs) wraps
// it.
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
	pickedAt := theta     // theta when the essential leaves were last chosen
	var probe []leafRef   // the non-essential leaves, largest bound first
	var seeds []uint32
	var total uint64
	if !rk.count {
		var err error
		if seeds, total, err = rk.seed(&best, n); err != nil {
			return nil, 0, err
		}
	}
	ess := essentials{rk: rk}
	ess.reset(slices.DeleteFunc(slices.Clone(rk.order), func(r leafRef) bool { return rk.leaf(r).gone }))
	var from uint64 // the walk's next doc is at or after from
	raise := func() {
		if len(best) < n || rk.count || best[0].score <= theta {
			return
		}
		theta = best[0].score
		// Choosing again costs a pass over the leaves; a choice made at a
		// lower theta is still safe, only less selective.
		if theta <= pickedAt*(1+repickStep) {
			return
		}
		pickedAt = theta
		ess.refs, probe = rk.pick(theta, ess.refs[:0], probe[:0])
		rk.opt.base(rk, probe)
		// A leaf that turns essential again may lag behind.
		for _, r := range ess.refs {
			rk.leaf(r).advance(from)
		}
		ess.reset(ess.refs)
	}
	raise()
	matched := make([]leafRef, 0, len(rk.order))
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
		from = d + 1
		matched = ess.take(d, matched[:0])
		for len(seeds) > 0 && uint64(seeds[0]) < d {
			seeds = seeds[1:]
		}
		if len(seeds) > 0 && uint64(seeds[0]) == d {
			continue // scored already
		}
		// Non-essential leaves, largest bound first, while d can still
		// make the page.
		if len(probe) > 0 {
			rk.opt.start(rk, matched)
			pruned := false
			for _, r := range probe {
				if b, ok := rk.opt.bound(); !ok || b*(1+pruneSlack) < theta {
					pruned = true
					break
				}
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
		if admitted, err := rk.gates.admit(d); err != nil {
			return nil, 0, err
		} else if !admitted {
			continue
		}
		total++
		if best.offer(hit{doc: d, score: score}, n) {
			raise()
		}
	}
	out := make([]hit, len(best))
	for i := len(best) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&best).(hit)
	}
	return out, total, nil
}

// offer keeps h if it is among the n best so far.
func (h *page) offer(x hit, n int) bool {
	switch {
	case len(*h) < n:
		heap.Push(h, x)
	case n > 0 && worse((*h)[0], x):
		(*h)[0] = x
		heap.Fix(h, 0)
	default:
		return false
	}
	return true
}

// seedWork bounds the seeding: seeds times leaves, each a galloping step.
const seedWork = 1024

// seed scores some docs before the walk and offers them to the page: all
// the docs of the leaves with the largest bounds where they are few (a
// rare word in names), the champions (decoded.top) of others, as much as
// seedWork allows. It returns the docs it scored, ascending, for the walk
// to skip, and how many matches it scored.
//
// That does two things. The walk visits docs in index order, so unseeded
// its first page holds whatever comes first and prunes little until better
// docs turn up; seeded, the page starts with docs likely among the best.
// And the walk meets no seeded doc: a leaf whose docs were all seeded
// drops out of it (gone), and one whose champions were is bounded there by
// its tail, the best score of its other docs. A query whose page the seeds
// fill beyond what is left ends with the seeding.
//
// The page then holds docs that come later than candidates of the walk,
// and a candidate whose bound equals the page's lowest score could still
// beat it on index order, so bounds are compared strictly.
func (rk *ranker) seed(best *page, n int) ([]uint32, uint64, error) {
	byBound := slices.Clone(rk.order)
	slices.SortStableFunc(byBound, func(a, b leafRef) int { return cmpFloat(rk.gain(b), rk.gain(a)) })
	var seeds []uint32
	budget := seedWork / max(1, len(rk.order))
	var all, tops []leafRef
	for _, r := range byBound {
		l := rk.leaf(r)
		switch {
		case len(l.list.docs) <= budget:
			seeds = append(seeds, l.list.docs...)
			budget -= len(l.list.docs)
			all = append(all, r)
		case len(l.list.top) <= budget:
			for _, p := range l.list.top {
				seeds = append(seeds, l.list.docs[p])
			}
			budget -= len(l.list.top)
			tops = append(tops, r)
		}
	}
	slices.Sort(seeds)
	seeds = slices.Compact(seeds)
	at := make([]int, len(rk.order)) // per leaf (as rk.order), where the last seed was
	var scored uint64
	for _, d32 := range seeds {
		d := uint64(d32)
		for i, r := range rk.order {
			l := rk.leaf(r)
			if at[i] = gallop(l.list.docs, at[i], d); at[i] < len(l.list.docs) && l.list.docs[at[i]] == d32 {
				l.seen, l.s = d, l.scoreAt(at[i])
			}
		}
		score, ok := rk.score(d)
		if !ok {
			continue
		}
		if admitted, err := rk.seedGates.admit(d); err != nil {
			return nil, 0, err
		} else if admitted {
			scored++
			best.offer(hit{doc: d, score: score}, n)
		}
	}
	for _, r := range all {
		l := rk.leaf(r)
		l.gone, l.ub = true, 0
		l.cur = exhausted
	}
	for _, r := range tops {
		l := rk.leaf(r)
		l.ub = l.list.tail * l.qw
	}
	return seeds, scored, nil
}

// repickStep is how much theta must grow before the essential leaves are
// chosen again.
const repickStep = 0.01

// pick splits the leaves for a page whose lowest score is theta: the
// non-essential ones are a set that cannot together lift a doc above
// theta, so a doc that matches none of the others cannot make the page
// and only the essential leaves' docs are candidates. Classic MaxScore
// takes the leaves with the smallest bounds; with coordination factors a
// long posting list can have a large bound and still be unable to lift a
// doc on its own ("open" in a name, next to two rare words), so pick
// takes the longest lists first, each one that keeps the set's bound
// below theta. It appends the essential leaves to ess and returns the
// non-essential ones, largest bound first, the order to probe them in.
func (rk *ranker) pick(theta float64, ess, probe []leafRef) ([]leafRef, []leafRef) {
	// The optimist as at a doc that matches nothing, each leaf taken
	// counted as unknown at its bound; the caller's base resets it.
	o := &rk.opt
	o.base(rk, nil)
	for _, r := range rk.order {
		l := rk.leaf(r)
		if l.gone {
			continue // no candidate matches it
		}
		if o.with(rk, r)*(1+pruneSlack) < theta {
			o.update(rk, r.t, 0, 0, l.ub, 1)
			probe = append(probe, r)
		} else {
			ess = append(ess, r)
		}
	}
	slices.SortStableFunc(probe, func(a, b leafRef) int { return cmpFloat(rk.gain(b), rk.gain(a)) })
	return ess, probe
}

// essentials yields the candidates: the docs of the essential leaves, in
// order. A few leaves are scanned; many (a pasted paragraph) are kept in a
// min-heap by current doc.
type essentials struct {
	rk   *ranker
	refs []leafRef
	// cur holds refs' current docs, in the same order, while they are a
	// heap: the sifts compare these instead of following each ref to its
	// leaf (a heap hand-written for it, not container/heap's interface
	// calls: on long queries the sifts were a fifth of a search).
	cur  []uint64
	heap bool
}

// scanLeaves is the most essential leaves scanned rather than heaped.
const scanLeaves = 12

func (e *essentials) reset(refs []leafRef) {
	e.refs, e.heap = refs, len(refs) > scanLeaves
	if !e.heap {
		return
	}
	e.cur = e.cur[:0]
	for _, r := range refs {
		e.cur = append(e.cur, e.rk.leaf(r).cur)
	}
	for i := len(e.refs)/2 - 1; i >= 0; i-- {
		e.down(i)
	}
}

// down sifts the element at i down the min-heap on cur.
func (e *essentials) down(i int) {
	n := len(e.cur)
	for {
		j := 2*i + 1
		if j >= n {
			return
		}
		if j2 := j + 1; j2 < n && e.cur[j2] < e.cur[j] {
			j = j2
		}
		if e.cur[j] >= e.cur[i] {
			return
		}
		e.cur[i], e.cur[j] = e.cur[j], e.cur[i]
		e.refs[i], e.refs[j] = e.refs[j], e.refs[i]
		i = j
	}
}

// first is the next candidate; exhausted when there is none.
func (e *essentials) first() uint64 {
	if e.heap {
		if len(e.refs) == 0 {
			return exhausted
		}
		return e.cur[0]
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
	for len(e.refs) > 0 && e.cur[0] == d {
		r := e.refs[0]
		l := e.rk.leaf(r)
		l.look(d)
		l.next()
		e.cur[0] = l.cur
		e.down(0)
		matched = append(matched, r)
	}
	return matched
}

// optimist keeps the bound on the score of the doc being scored as its
// non-essential leaves are looked at one by one: the score with every leaf
// not yet looked at counted as matching at its bound. It is updated in
// constant time per leaf, and a new doc restores only the terms the last
// one changed, so a pasted paragraph of thirty terms costs no more per doc
// than the leaves that doc touches.
type optimist struct {
	sum, ub    []float64 // per term: matched leaves' scores, unknown leaves' bounds
	n, u       []int     // per term: how many of each
	termBounds []float64 // per term: its bound now, 0 when it cannot match
	gsum       [2]float64
	gn         [2]int // terms per group that match or may
	// The state at a doc no essential leaf matches, none looked at yet
	// (set by base), and the terms changed since.
	ub0, tb0 []float64
	u0       []int
	gsum0    [2]float64
	gn0      [2]int
	touched  []int
	dirty    []bool // per term: in touched

	group []int  // per term: 0 must, 1 should
	size  [2]int // terms per group
	bleve bool   // Bleve's coordination (no square root)
}

func (o *optimist) init(rk *ranker) {
	n := len(rk.terms)
	o.sum, o.ub, o.termBounds, o.ub0, o.tb0 = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	o.n, o.u, o.u0, o.group = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	o.touched, o.dirty = make([]int, 0, n), make([]bool, n)
	for _, ti := range rk.should {
		o.group[ti] = 1
	}
	o.size = [2]int{len(rk.must), len(rk.should)}
	o.bleve = rk.bleve
}

// base records the non-essential leaves, and the state start returns to.
func (o *optimist) base(rk *ranker, probe []leafRef) {
	clear(o.ub0)
	clear(o.u0)
	for _, r := range probe {
		o.ub0[r.t] += rk.leaf(r).ub
		o.u0[r.t]++
	}
	copy(o.ub, o.ub0)
	copy(o.u, o.u0)
	clear(o.sum)
	clear(o.n)
	o.gsum, o.gn = [2]float64{}, [2]int{}
	for ti := range rk.terms {
		b, ok := o.term(rk, ti)
		o.tb0[ti] = b
		if ok {
			o.gsum[o.group[ti]] += b
			o.gn[o.group[ti]]++
		}
	}
	copy(o.termBounds, o.tb0)
	o.gsum0, o.gn0 = o.gsum, o.gn
	clear(o.dirty)
	o.touched = o.touched[:0]
}

// start sets the state at a new doc: the essential leaves in matched
// match it, the other essential leaves do not, and the non-essential ones
// are not looked at yet.
func (o *optimist) start(rk *ranker, matched []leafRef) {
	for _, t := range o.touched {
		o.ub[t], o.u[t], o.sum[t], o.n[t], o.termBounds[t] = o.ub0[t], o.u0[t], 0, 0, o.tb0[t]
		o.dirty[t] = false
	}
	o.touched = o.touched[:0]
	o.gsum, o.gn = o.gsum0, o.gn0
	for _, r := range matched {
		o.update(rk, r.t, rk.leaf(r).s, 1, 0, 0)
	}
}

// looked updates the state once non-essential leaf r was looked at.
func (o *optimist) looked(rk *ranker, r leafRef, match bool) {
	l := rk.leaf(r)
	if match {
		o.update(rk, r.t, l.s, 1, -l.ub, -1)
	} else {
		o.update(rk, r.t, 0, 0, -l.ub, -1)
	}
}

// update changes term t's matched and unknown leaves and the bounds that
// depend on them.
func (o *optimist) update(rk *ranker, t int, dsum float64, dn int, dub float64, du int) {
	if !o.dirty[t] {
		o.dirty[t] = true
		o.touched = append(o.touched, t)
	}
	g := o.group[t]
	before := o.n[t]+o.u[t] > 0
	o.sum[t] += dsum
	o.n[t] += dn
	o.ub[t] += dub
	o.u[t] += du
	b, ok := o.term(rk, t)
	o.gsum[g] += b - o.termBounds[t]
	o.termBounds[t] = b
	switch {
	case before && !ok:
		o.gn[g]--
	case !before && ok:
		o.gn[g]++
	}
}

func (o *optimist) term(rk *ranker, ti int) (float64, bool) {
	k := o.n[ti] + o.u[ti]
	if k == 0 {
		return 0, false
	}
	return termBound(rk, ti, o.sum[ti]+o.ub[ti], k), true
}

// with is the bound were leaf r, not yet counted, added as unknown at its
// bound; the state is left as it is.
func (o *optimist) with(rk *ranker, r leafRef) float64 {
	t, g := r.t, o.group[r.t]
	gsum, gn := o.gsum, o.gn
	k := o.n[t] + o.u[t]
	if k == 0 {
		gn[g]++
	}
	gsum[g] += termBound(rk, t, o.sum[t]+o.ub[t]+rk.leaf(r).ub, k+1) - o.termBounds[t]
	b, _ := combine(gsum, gn, o.size, o.bleve)
	return b
}

// bound is the bound on the doc's score; ok is false when no must term can
// match.
func (o *optimist) bound() (float64, bool) { return combine(o.gsum, o.gn, o.size, o.bleve) }

// combine adds up the groups' term sums as Bleve's boolean searcher does,
// each scaled by its coordination factor: gn[g] of the size[g] terms of
// group g match. ok is false when no must term matches.
func combine(gsum [2]float64, gn, size [2]int, bleve bool) (float64, bool) {
	if gn[0] == 0 {
		return 0, false
	}
	b := gsum[0]
	if size[0] > 1 {
		b *= coordination(gn[0], size[0], bleve)
	}
	if gn[1] > 0 {
		s := gsum[1]
		if size[1] > 1 {
			s *= coordination(gn[1], size[1], bleve)
		}
		b += s
	}
	return b, true
}

// coordination is the factor of a group of size terms of which n match:
// sqrt(n/size), or n/size in Bleve's form.
func coordination(n, size int, bleve bool) float64 {
	if bleve {
		return float64(n) / float64(size)
	}
	return math.Sqrt(float64(n) / float64(size))
}

// termBound is term t's bound with ub summed over k of its leaves.
func termBound(rk *ranker, t int, ub float64, k int) float64 {
	return rk.terms[t].sat(ub, k)
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
		sum = sum * coordination(n, len(idx), rk.bleve)
	}
	return sum, n > 0
}

// gates apply a search's filters and its exclusion of hidden docs.
type gates struct {
	filter, hidden *gate
}

func openGates(ctx context.Context, r bleveindex.IndexReader, im mapping.IndexMapping, m matched) (gates, error) {
	var g gates
	if m.filter == nil && m.hidden == nil {
		return g, nil
	}
	sctx := &search.SearchContext{DocumentMatchPool: search.NewDocumentMatchPool(16, 0), IndexReader: r}
	var err error
	if m.filter != nil {
		if g.filter, err = newGate(ctx, sctx, r, im, m.filter); err != nil {
			return g, err
		}
	}
	if m.hidden != nil {
		if g.hidden, err = newGate(ctx, sctx, r, im, m.hidden); err != nil {
			g.close()
			return gates{}, err
		}
	}
	return g, nil
}

// admit reports whether d passes the filters and is not hidden; docs must
// come in ascending order.
func (g *gates) admit(d uint64) (bool, error) {
	if g.filter != nil {
		in, err := g.filter.holds(d)
		if err != nil || !in {
			return false, err
		}
	}
	if g.hidden != nil {
		in, err := g.hidden.holds(d)
		if err != nil || in {
			return false, err
		}
	}
	return true, nil
}

func (g *gates) close() {
	g.filter.close()
	g.hidden.close()
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
