package index

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Ranked text search, term at a time.
//
// rankText scores the docs the query textQuery builds matches a block of
// 8,192 doc numbers at a time (run): per block, a board of running sums
// (one slot a doc, small enough for a core's L2 cache) takes the query's
// terms one after the other, each term's postings in the block adding the
// term's score to its docs' slots; then the docs of the block a must term
// matched (marked) are finished (coordination), filtered and offered to
// the page of the n best. A step is an array read, a multiplication and a
// write to a slot nearby, so the cost is the query's postings (at 100k
// docs natural-language requests hold a median of 16k, at most about
// 170k); the MaxScore walk this replaced spent about 200 ns on each of
// thousands of candidate docs to prune them (docs/decisions.md). Once the
// page is full, a must term whose docs cannot reach it even with the other
// such terms is not essential: it no longer marks docs, only adds to those
// others marked, and the longest lists are the ones it applies to first.
// Each term's postings (decoded once per index snapshot, postings.go: for
// BM25F one list of the docs holding the term in either text field, with
// its value in each; in Bleve's form one list per field) are read in doc
// order, so a doc's sums add up its terms in the query's order, as Bleve's
// searchers do.
//
// The score is BM25F (Robertson et al., 2004) over the two text fields:
//
//	leaf(t, f, d)   = w_f · sqrt(freq) / (1 − b + b·len/avgLen)   (fieldTF, postings.go)
//	term(t, d)      = W_t · x·(k1 + 1) / (k1 + x),  x = Σ leaves of t matching d
//	W_t             = idf_t^idfPower / sqrt(Σ over the query's terms of idf^(2·idfPower))
//	idf_t           = ln(1 + (N − df + 0.5) / (df + 0.5))     (the term's largest df over the fields)
//	w_f             = fieldWeight(f, softenedTerms) (search.go)
//	avgLen          = the field's pivot (1 token for the name, 4 for the text; mapping.go)
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
// (sqrt(freq) + k1·(1 − b + b·len/avgLen)) · boost·idf·qnorm (avgLen =
// ceil(field cardinality / N), as Bleve has it; idf of t in
// f, boost = leafBoost, qnorm = 1/sqrt(Σ over every leaf of (boost·idf)²)),
// term(t, d) = Σ leaves · (leaves matching / leaves of t), group
// coordination without the square root, sums in the order Bleve's
// disjunction searchers add them (clauses sorted by posting count), so
// scores agree to the bit on amd64; tests compare the two on hundreds of
// queries, so the board is checked against Bleve's searchers.

// split runs the ranking over the index's doc numbers, in one range or,
// while other cores are idle, in a range per core, each on its own
// goroutine (see rangesWanted), and merges their pages. Ranges share the
// score a doc must reach: a full page's lowest score in one range is a
// bar for every other.
func (rk *ranker) split(ctx context.Context, ix *Index, r bleveindex.IndexReader, m matched, n int, count bool, c cut) ([]hit, uint64, error) {
	docs := rk.span()
	rk.coordination()
	ranges := rangesFor(docs, rk.block, ix.rangesWanted())
	if len(ranges) == 1 {
		g, err := openGates(ctx, r, ix.bleve.Mapping(), m)
		if err != nil {
			return nil, 0, err
		}
		defer g.close()
		return rk.run(ctx, &g, n, count, c, ranges[0], nil)
	}
	type result struct {
		hits  []hit
		total uint64
		err   error
	}
	results := make([]result, len(ranges))
	var bar sharedBar
	var wg sync.WaitGroup
	for i, rg := range ranges {
		res := &results[i]
		spawn(&wg, &res.err, "ranking a range", func() error {
			g, err := openGates(ctx, r, ix.bleve.Mapping(), m)
			if err != nil {
				return err
			}
			defer g.close()
			res.hits, res.total, err = rk.run(ctx, &g, n, count, c, rg, &bar)
			return err
		})
	}
	wg.Wait()
	var all []hit
	var total uint64
	for _, res := range results {
		if res.err != nil {
			return nil, 0, res.err
		}
		all = append(all, res.hits...)
		total += res.total
	}
	// Each range's page is best first; the pages' union holds the n best.
	slices.SortFunc(all, func(a, b hit) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
			return 1
		}
		return 0
	})
	return all[:min(len(all), n)], total, nil
}

// spawn runs fn on a goroutine of wg and leaves its error in *err. A
// panic there would end the process, past the server's recovery: it
// fails the search instead, as an error naming what was running.
func spawn(wg *sync.WaitGroup, err *error, what string, fn func() error) {
	wg.Go(func() {
		defer func() {
			if p := recover(); p != nil {
				*err = fmt.Errorf("index: search: %s: %v", what, p)
			}
		}()
		*err = fn()
	})
}

// span is one past the largest doc number any of the terms holds.
func (rk *ranker) span() int {
	docs := 0
	for ti := range rk.terms {
		for _, l := range rk.terms[ti].leaves {
			if k := len(l.list.docs); k > 0 {
				docs = max(docs, int(l.list.docs[k-1])+1)
			}
		}
	}
	return docs
}

// minRangeBlocks is the fewest blocks a range of a split ranking has: a
// range of one block costs its goroutine more than it saves.
const minRangeBlocks = 2

// rangesFor cuts the doc numbers [0, docs) into k ranges of whole blocks,
// fewer if a range would have fewer than minRangeBlocks blocks.
func rangesFor(docs, block, k int) []docRange {
	blocks := (docs + block - 1) / block
	k = min(k, blocks/minRangeBlocks)
	if k <= 1 {
		return []docRange{{0, docs}}
	}
	out := make([]docRange, 0, k)
	from := 0
	for i := range k {
		to := min(docs, (blocks*(i+1)/k)*block)
		out = append(out, docRange{from, to})
		from = to
	}
	return out
}

// rangesWanted is how many ranges to split a ranking into now: one for
// this goroutine and one per core the scheduler has no goroutine for
// (running or waiting to run). Under load every core runs a request of
// its own, and splitting would only add the goroutines' cost; with cores
// idle it is a request's latency that counts. Index.split overrides it.
func (ix *Index) rangesWanted() int {
	if ix.split > 0 {
		return ix.split
	}
	cores := runtime.GOMAXPROCS(0)
	if cores < 2 {
		return 1
	}
	s := []metrics.Sample{{Name: "/sched/goroutines/running:goroutines"}, {Name: "/sched/goroutines/runnable:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 1 // a runtime without these metrics
	}
	busy := int(s[0].Value.Uint64() + s[1].Value.Uint64()) // this goroutine included
	return max(1, 1+cores-busy)
}

// docRange is the doc numbers [from, to), from a multiple of the block.
type docRange struct{ from, to int }

// sharedBar is the largest lowest score of a full page among the ranges
// of one ranking: no doc under it can make the merged page.
type sharedBar struct{ bits atomic.Uint64 }

// raise makes the bar at least v (v ≥ 0: scores are never negative).
func (b *sharedBar) raise(v float64) {
	for {
		old := b.bits.Load()
		if old != 0 && math.Float64frombits(old) >= v {
			return
		}
		if b.bits.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

// get is the bar, math.Inf(-1) before any range's page is full.
func (b *sharedBar) get() float64 {
	v := b.bits.Load()
	if v == 0 {
		return math.Inf(-1)
	}
	return math.Float64frombits(v)
}

// rankText returns the n best docs matching m (m.text non-empty) that
// reach c (every one with noCut), best first, ties in index order, and
// with count how many docs match (else how many it scored: it stops
// scoring docs that cannot reach the page). The hits carry their doc
// numbers, not yet their identifiers: a search names only the hits of
// its page (withIDs), not every hit its parts' rankings weigh.
func (ix *Index) rankText(ctx context.Context, r bleveindex.IndexReader, m matched, n int, count bool, c cut) ([]Hit, uint64, error) {
	rk := ranker{}
	if err := rk.open(ctx, ix, r, m.text, m.filter != nil || m.hidden != nil); err != nil {
		return nil, 0, err
	}
	hits, total, err := rk.split(ctx, ix, r, m, n, count, c)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Hit, 0, len(hits))
	for _, h := range hits {
		out = append(out, Hit{Raw: h.score, doc: h.doc})
	}
	return out, total, nil
}

// withIDs sets the identifier of each hit that lacks one from its doc
// number in r.
func withIDs(r bleveindex.IndexReader, hits []Hit) error {
	var id bleveindex.IndexInternalID
	for i := range hits {
		if hits[i].ID != "" {
			continue
		}
		id = bleveindex.NewIndexInternalID(id, hits[i].doc)
		ext, err := r.ExternalID(id)
		if err != nil {
			return fmt.Errorf("index: search: %w", err)
		}
		hits[i].ID = ext
	}
	return nil
}

// cut is the least score a ranking wants: floor, and rise times the best
// score found so far (rise in [0, 1], so the best itself is always kept).
// A part of a request (segment.go) is scaled down by its best score, so
// its docs under a bar that rises with that best cannot reach the page.
type cut struct {
	floor, rise float64
}

// noCut wants every doc.
var noCut = cut{floor: math.Inf(-1)}

// leaf is one term in one field: its decoded postings and query weight;
// or, where the list is a union (BM25F), the term in both text fields.
type leaf struct {
	list  *decoded
	field int // index into textFields
	df    uint64
	boost float64
	idf   float64
	qw    float64 // boost · idf · qnorm (Bleve's form), else boost
	qw2   float64 // a union's weight of its second field (s2)
}

// term is one query term: its leaves, in the order Bleve sums them.
type term struct {
	leaves []leaf
	bleve  bool    // Index.bleveScoring
	w      float64 // W_t (BM25F)
	ub     float64 // the most the term adds to a doc: sat of its leaves' bests
}

// BM25F's saturation constant (Bleve's BM25 k1).
const bm25K1 = 1.2

// sat is the term's score for a sum x of its matching leaves (BM25F), or
// x itself in Bleve's form, scaled there by the share k of its leaves
// that match.
func (t *term) sat(x float64, k int) float64 {
	if t.bleve {
		if f := len(t.leaves); f > 1 {
			return x * (float64(k) / float64(f))
		}
		return x
	}
	return saturate(t.w, x)
}

// saturate is BM25F's score of a term of weight w whose matching leaves sum
// to x.
func saturate(w, x float64) float64 {
	return w * x * (bm25K1 + 1) / (bm25K1 + x)
}

// ranker is one rankText run.
type ranker struct {
	terms        []term
	must, should []int        // indexes into terms, in the order Bleve sums them
	coord        [2][]float64 // per group, the coordination factor by terms matched
	bleve        bool         // Index.bleveScoring
	block        int          // docs a block: the board's, or Index.blockDocs
}

// open sets up the terms, their leaves and weights.
func (rk *ranker) open(ctx context.Context, ix *Index, r bleveindex.IndexReader, p *textPlan, wrapped bool) error {
	rk.bleve = ix.bleveScoring
	rk.block = 1 << blockBits
	if ix.blockDocs > 0 {
		rk.block = min(rk.block, ix.blockDocs)
	}
	avg := make([]float64, len(textFields))
	for fi, f := range textFields {
		avg[fi] = f.pivot
	}
	if rk.bleve {
		br, ok := r.(bleveindex.BM25Reader)
		if !ok {
			return fmt.Errorf("index: search: reader has no BM25 statistics")
		}
		for fi, f := range textFields {
			c, err := br.FieldCardinality(f.name)
			if err != nil {
				return fmt.Errorf("index: search: %w", err)
			}
			if p.docs > 0 {
				avg[fi] = math.Ceil(float64(c) / float64(p.docs))
			}
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
			l.field = fi
		}
		// BM25F sums a term's fields per doc before it saturates them: a
		// term in both is read from one list of the docs either holds.
		keys := listKeys(qt, rk.bleve)
		if keys[0].field == bothFields {
			u, err := ix.postings.load(snap, r, keys[0], source{
				whole: func() (*decoded, error) {
					return unionOf(func(fi int) (*decoded, error) {
						return decode(ctx, r, qt.term, textFields[fi].name, 0, avg[fi], false, rk.block)
					})
				},
				part: func(sp span) (*decoded, error) {
					return unionOf(func(fi int) (*decoded, error) {
						return decodePart(ctx, sp, qt.term, textFields[fi].name, avg[fi], false, rk.block)
					})
				},
				avg: [2]float64{avg[0], avg[1]},
			})
			if err != nil {
				return err
			}
			for li := range t.leaves {
				t.leaves[li].list = u
			}
			continue
		}
		for li, fi := range qt.fields {
			l := &t.leaves[li]
			src := source{whole: func() (*decoded, error) {
				return decode(ctx, r, qt.term, textFields[fi].name, l.idf, avg[fi], rk.bleve, rk.block)
			}}
			if !rk.bleve { // Bleve's form puts the snapshot's idf into the values
				src.part = func(sp span) (*decoded, error) {
					return decodePart(ctx, sp, qt.term, textFields[fi].name, avg[fi], false, rk.block)
				}
				src.avg[0] = avg[fi]
			}
			list, err := ix.postings.load(snap, r, keys[li], src)
			if err != nil {
				return err
			}
			l.list = list
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
		}
		t := &rk.terms[ti]
		if u := t.leaves[0].list; u.s2 != nil {
			// One leaf reads the union: the first field's weight for s,
			// the second's for s2.
			var qw [2]float64
			for _, l := range t.leaves {
				qw[l.field] = l.qw
			}
			t.leaves = []leaf{{list: u, df: t.leaves[0].df + t.leaves[1].df, qw: qw[0], qw2: qw[1]}}
		}
		x := 0.0
		for _, l := range t.leaves {
			x += l.list.best*l.qw + l.list.best2*l.qw2
		}
		t.ub = t.sat(x, len(t.leaves))
	}
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

// page is a min-heap of the best hits so far, worst on top (sifts written
// for it: container/heap's interface calls were a tenth of a deep page's
// ranking).
type page []hit

// offer keeps x if it is among the n best so far.
func (h *page) offer(x hit, n int) {
	switch {
	case len(*h) < n:
		*h = append(*h, x)
		h.up(len(*h) - 1)
	case n > 0 && worse((*h)[0], x):
		(*h)[0] = x
		h.down(0, len(*h))
	}
}

func (h page) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !worse(h[i], h[parent]) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

// down sifts the element at i down the heap of its first n elements.
func (h page) down(i, n int) {
	for {
		j := 2*i + 1
		if j >= n {
			return
		}
		if j2 := j + 1; j2 < n && worse(h[j2], h[j]) {
			j = j2
		}
		if !worse(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// sorted empties the page into a slice, best first.
func (h *page) sorted() []hit {
	out := *h
	for n := len(out) - 1; n > 0; n-- {
		out[0], out[n] = out[n], out[0]
		out.down(0, n)
	}
	// The worst went to the end first: out is now best first.
	*h = nil
	return out
}

// blockBits sets the size of a block of doc numbers, 2^blockBits: its
// board (24 bytes a doc) stays in a core's L2 cache.
const blockBits = 13

// slot is one doc's running sums on a board.
type slot struct {
	sum [2]float64 // per group (0 must, 1 should): its terms' scores so far
	n   [2]uint8   // per group: how many of its terms matched (maxQueryTerms fits)
}

// board holds the running sums of the docs of one block, and which of
// them are marked: matched by an essential term. Boards are pooled; one
// goes back only clear (a search cut short leaves its board to the
// collector).
type board struct {
	slots  [1 << blockBits]slot
	marked [1 << blockBits / 64]uint64
	// Scratch for add2: a term's first leaf's value per doc, and which
	// docs have one. Clear between terms.
	x   [1 << blockBits]float64
	has [1 << blockBits / 64]uint64
	// Scratch for a term that only adds: the positions of its postings
	// whose docs are marked (a list holds a doc once, so a block's fit).
	sel [1 << blockBits]int32
}

var boards = sync.Pool{New: func() any { return new(board) }}

// pruneSlack keeps bounds, summed in another order than the scores,
// safely above them.
const pruneSlack = 1e-9

// run scores the docs matching the query, a block of doc numbers at a
// time, and keeps the n best that pass g and score floor or more. In a
// block, every term in the order Bleve sums them adds its score to the
// docs it matches: an essential must term to every one, marking it, the
// others only to marked docs; then the marked docs' scores are finished
// and offered to the page. At first every must term is essential. Once
// the page is full (or from the start, with a cut), the last must terms
// (the longest lists) are not essential while a doc matching only them
// (and every should term) cannot reach the page's lowest score or the
// cut (prune), so their docs are walked past, not scored. With count,
// every must term stays essential, and every match is counted; otherwise
// the count is of the docs that reached the page's lowest score when
// scored.
func (rk *ranker) run(ctx context.Context, g *gates, n int, count bool, c cut, rg docRange, bar *sharedBar) ([]hit, uint64, error) {
	if n <= 0 && !count {
		return nil, 0, nil
	}
	// Each term's leaves' positions: their first doc in the range.
	pos := make([][]int, len(rk.terms))
	for ti := range rk.terms {
		pos[ti] = make([]int, len(rk.terms[ti].leaves))
		if rg.from > 0 {
			for li, l := range rk.terms[ti].leaves {
				pos[ti][li] = l.list.at(0, uint32(rg.from))
			}
		}
	}
	ess := len(rk.must) // rk.must[:ess] are essential
	shouldUB := 0.0
	for _, ti := range rk.should {
		shouldUB += rk.terms[ti].ub
	}

	b := boards.Get().(*board)
	clean := false // b is clear again: it may go back to the pool
	defer func() {
		if clean {
			boards.Put(b)
		}
	}()
	best := make(page, 0, min(n, 1024))
	floor := c.floor         // no doc scoring less is wanted
	top := math.Inf(-1)      // the best score so far
	theta := floor           // no doc scoring less can make the page
	prunedAt := math.Inf(-1) // theta when the essential terms were chosen
	var total uint64
	for base := rg.from; base < rg.to; base += rk.block {
		if err := ctx.Err(); err != nil {
			return nil, 0, fmt.Errorf("index: search: %w", err)
		}
		end := uint32(min(base+rk.block, rg.to))
		if c.rise > 0 && len(best) > 0 {
			floor = max(floor, c.rise*top)
			theta = max(theta, floor)
		}
		if len(best) == n {
			theta = max(theta, best[0].score)
			if bar != nil {
				bar.raise(best[0].score)
			}
		}
		if bar != nil {
			theta = max(theta, bar.get())
		}
		if !count && theta > prunedAt {
			prunedAt = theta
			ess = rk.prune(ess, shouldUB, theta)
		}
		// A doc's sums run in the order Bleve's do: the terms in order.
		// The essential terms, first in that order, mark the docs they
		// add to; the others only add to marked docs.
		for gi, idx := range [2][]int{rk.must, rk.should} {
			for i, ti := range idx {
				rk.terms[ti].add(b, gi, uint32(base), end, pos[ti], gi == 0 && i < ess)
			}
		}
		// Without count, a doc under theta is neither wanted nor counted,
		// and the page's lowest score raises the bar as the page fills.
		lim := floor
		if !count {
			lim = theta
		}
		for w, word := range b.marked {
			if word == 0 {
				continue
			}
			b.marked[w] = 0
			for ; word != 0; word &= word - 1 {
				i := w<<6 | bits.TrailingZeros64(word)
				sl := &b.slots[i]
				score := rk.final(sl)
				*sl = slot{}
				if score < lim {
					continue
				}
				d := uint64(base + i)
				if admitted, err := g.admit(d); err != nil {
					return nil, 0, err
				} else if admitted {
					total++
					if h := (hit{doc: d, score: score}); len(best) < n || worse(best[0], h) {
						best.offer(h, n)
						top = max(top, score)
						if !count && len(best) == n {
							lim = max(lim, best[0].score)
						}
					}
				}
			}
		}
	}
	clean = true
	return best.sorted(), total, nil
}

// prune is how many of the must terms stay essential, the others being
// the last ones (the longest lists, must being in order of length): from
// the last back, a term is not essential while a doc that matches only
// the non-essential terms and the should terms stays below theta. ess is
// how many are essential now.
func (rk *ranker) prune(ess int, shouldUB, theta float64) int {
	sum := 0.0
	for _, ti := range rk.must[ess:] {
		sum += rk.terms[ti].ub
	}
	for ; ess > 0; ess-- {
		s := sum + rk.terms[rk.must[ess-1]].ub
		bound := s
		if len(rk.must) > 1 {
			bound *= rk.coord[0][len(rk.must)-ess+1]
		}
		if (bound+shouldUB)*(1+pruneSlack) >= theta {
			break
		}
		sum = s
	}
	return ess
}

// final is a doc's score from its sums: per group, the sum times its
// coordination factor; must plus should. The factors of a group that
// matched no term (0) or all of it (1, a group of one included) leave the
// sums as Bleve adds them, to the bit.
func (rk *ranker) final(sl *slot) float64 {
	return sl.sum[0]*rk.coord[0][sl.n[0]] + sl.sum[1]*rk.coord[1][sl.n[1]]
}

// scoreDocs is each of docs' score (docs ascending, distinct), as run
// would finish it, and whether it holds a must term (else run would not
// score it): each term's lists are read forward once, from one doc to the
// next (decoded.at), not walked block by block. For a few hundred docs.
func (rk *ranker) scoreDocs(docs []uint32) ([]float64, []bool) {
	sl := make([]slot, len(docs))
	x := make([]float64, len(docs))
	k := make([]uint8, len(docs))
	for gi, idx := range [2][]int{rk.must, rk.should} {
		for _, ti := range idx {
			t := &rk.terms[ti]
			clear(x)
			clear(k)
			for _, l := range t.leaves {
				p := 0
				for i, d := range docs {
					if p = l.list.at(p, d); p == len(l.list.docs) {
						break
					}
					if l.list.docs[p] == d {
						x[i] += l.list.s[p] * l.qw
						if l.list.s2 != nil {
							x[i] += l.list.s2[p] * l.qw2
						}
						k[i]++
					}
				}
			}
			for i := range docs {
				if k[i] > 0 {
					sl[i].sum[gi] += t.sat(x[i], int(k[i]))
					sl[i].n[gi]++
				}
			}
		}
	}
	scores := make([]float64, len(docs))
	ok := make([]bool, len(docs))
	for i := range sl {
		scores[i], ok[i] = rk.final(&sl[i]), sl[i].n[0] > 0
	}
	return scores, ok
}

// add adds the term's score at the docs of the block it matches to group
// g: with mark at every one, marking it, else at the marked ones. Per doc
// the score is the sum of its matching leaves in leaf order, saturated
// once. pos holds each leaf's position and is moved to end.
func (t *term) add(b *board, g int, base, end uint32, pos []int, mark bool) {
	if len(t.leaves) == 1 {
		t.add1(b, g, base, end, pos, mark)
	} else {
		t.add2(b, g, base, end, pos, mark)
	}
}

// A term has a leaf per text field that holds it, or (BM25F, a term in
// both) one leaf reading their union: add handles one or two.
func init() {
	if len(textFields) > 2 {
		panic("index: add handles terms in at most two text fields")
	}
}

// put adds s to group g's sum of the doc at i in the block.
func (b *board) put(i uint32, g int, s float64) {
	sl := &b.slots[i&(1<<blockBits-1)] // masks: no-ops that spare bounds checks
	sl.sum[g&1] += s
	sl.n[g&1]++
}

// take reports whether a term adds to the doc at i in the block: with
// mark always, marking it; else if it is marked.
func (b *board) take(i uint32, mark bool) bool {
	i &= 1<<blockBits - 1 // a no-op that spares a bounds check
	if mark {
		b.marked[i>>6] |= 1 << (i & 63)
		return true
	}
	return b.marked[i>>6]&(1<<(i&63)) != 0
}

// add1 is add for a term in one field, or in both read from a union.
func (t *term) add1(b *board, g int, base, end uint32, pos []int, mark bool) {
	l := &t.leaves[0]
	if l.list.s2 != nil {
		t.addUnion(b, g, base, end, pos, mark)
		return
	}
	docs, s, qw := l.list.docs, l.list.s, l.qw
	e := l.list.at(pos[0], end)
	if mark {
		ds := docs[pos[0]:e] // as in addUnion: no bounds checks
		ss := s[pos[0]:e]
		ss = ss[:len(ds)]
		for p, d := range ds {
			b.take(d-base, true)
			b.put(d-base, g, t.sat(0+ss[p]*qw, 1))
		}
	} else {
		for _, p := range b.marks(docs, base, pos[0], e) {
			b.put(docs[p]-base, g, t.sat(0+s[p]*qw, 1))
		}
	}
	pos[0] = e
}

// addUnion is add1 for a union: a doc's fields' weighted values, summed
// as add2 sums them (a field the doc lacks adds an exact 0; the
// conversions keep the compiler from fusing a product into the sum),
// saturated.
func (t *term) addUnion(b *board, g int, base, end uint32, pos []int, mark bool) {
	l := &t.leaves[0]
	docs, s, s2, qw, qw2 := l.list.docs, l.list.s, l.list.s2, l.qw, l.qw2
	e := l.list.at(pos[0], end)
	w := t.w // a union is BM25F's alone: sat is saturate
	if mark {
		// Slices cut to one length (and take and put masking a doc's
		// offset to the board) let the compiler drop the bounds checks
		// from the loop.
		ds := docs[pos[0]:e]
		ss, ss2 := s[pos[0]:e], s2[pos[0]:e]
		ss, ss2 = ss[:len(ds)], ss2[:len(ds)]
		for p, d := range ds {
			b.take(d-base, true)
			b.put(d-base, g, saturate(w, float64(ss[p]*qw)+float64(ss2[p]*qw2)))
		}
	} else {
		for _, p := range b.marks(docs, base, pos[0], e) {
			b.put(docs[p]-base, g, saturate(w, float64(s[p]*qw)+float64(s2[p]*qw2)))
		}
	}
	pos[0] = e
}

// marks is the positions in [from, to) of docs whose docs in the block
// are marked, in order. It decides without a branch per posting: whether
// a posting's doc is marked is a coin toss to the processor, and a
// mispredicted branch costs more than the test.
func (b *board) marks(docs []uint32, base uint32, from, to int) []int32 {
	k := 0
	for p, d := range docs[from:to] {
		i := (d - base) & (1<<blockBits - 1)
		b.sel[k&(1<<blockBits-1)] = int32(from + p)
		k += int(b.marked[i>>6] >> (i & 63) & 1)
	}
	return b.sel[:k]
}

// add2 is add for a term in two fields, read from two lists (Bleve's form
// only: BM25F reads a union, addUnion), in three straight passes rather
// than a merge: the first leaf's values go to the board's scratch, the
// second leaf adds each doc's to its own, and the first leaf's docs the
// second lacks come last. The sums are the merge's, to the bit.
func (t *term) add2(b *board, g int, base, end uint32, pos []int, mark bool) {
	l0, l1 := &t.leaves[0], &t.leaves[1]
	d0, s0, q0 := l0.list.docs, l0.list.s, l0.qw
	d1, s1, q1 := l1.list.docs, l1.list.s, l1.qw
	e0, e1 := l0.list.at(pos[0], end), l1.list.at(pos[1], end)
	for p := pos[0]; p < e0; p++ {
		if i := d0[p] - base; b.take(i, mark) {
			b.x[i] = 0 + s0[p]*q0
			b.has[i>>6] |= 1 << (i & 63)
		}
	}
	second := func(p int) {
		i := d1[p] - base
		v, k := s1[p]*q1, 1
		if w := &b.has[i>>6]; *w&(1<<(i&63)) != 0 {
			*w &^= 1 << (i & 63)
			v, k = b.x[i]+v, 2
			b.x[i] = 0
		}
		b.put(i, g, t.sat(v, k))
	}
	if mark {
		for p := pos[1]; p < e1; p++ {
			b.take(d1[p]-base, true)
			second(p)
		}
	} else {
		for _, p := range b.marks(d1, base, pos[1], e1) {
			second(int(p))
		}
	}
	for p := pos[0]; p < e0; p++ {
		if i := d0[p] - base; b.has[i>>6]&(1<<(i&63)) != 0 {
			b.has[i>>6] &^= 1 << (i & 63)
			b.put(i, g, t.sat(b.x[i], 1))
			b.x[i] = 0
		}
	}
	pos[0], pos[1] = e0, e1
}

// coordination sets the factors per group by how many of its terms match:
// 0 for none (so final adds a group no term of matched without a branch),
// and 1 for all, a group of one included, so the factor leaves those sums
// as they are, to the bit.
func (rk *ranker) coordination() {
	for gi, idx := range [2][]int{rk.must, rk.should} {
		rk.coord[gi] = make([]float64, len(idx)+1)
		for k := 1; k <= len(idx); k++ {
			rk.coord[gi][k] = coordination(k, len(idx), rk.bleve)
		}
	}
}

// coordination is the factor of a group of size terms of which n match:
// sqrt(n/size), or n/size in Bleve's form.
func coordination(n, size int, bleve bool) float64 {
	if bleve {
		return float64(n) / float64(size)
	}
	return math.Sqrt(float64(n) / float64(size))
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
