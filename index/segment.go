package index

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"

	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Requests of several intents.
//
// A long request often asks for several things ("I'm planning a trip to
// Japan. Give me the exchange rate from USD to JPY. Also recommend
// attractions in Tokyo."), and ranked as one bag of words the intent with
// the most or the rarest words, or with several near-duplicate entries,
// fills the page while the others' answers fall off it. So a request of
// two or more sentences that each hold enough of the request's terms is
// also ranked sentence by sentence (a part), and a doc's score is the
// largest of its score for the whole request and, per part, its score for
// the part scaled so that the part's best doc scores partWeight of the
// whole request's best (never scaled up past its own score). The whole
// request's best answer stays first; a part's best answer lands at
// partWeight of it, above the docs that only scatter over the request's
// words, below the whole request's docs that score more.
// Only docs the whole request matches are ranked (a part is a subset of
// the request's terms, under the same relevance cutoff), so Total, facets
// and filters are those of the whole request (docs/decisions.md).
//
// A concise request for two or three things is often one sentence ("get
// the forecast for Paris, book a table and call a taxi"). Where the
// sentences make fewer than two parts, the clauses may: cut at commas and
// before "and", a clause holding minPartTerms terms is a part. One intent
// told at length has clauses too ("a blender that is powerful, durable
// and easy to clean"), and ranking every clause over the index cost a
// fifth to a third more CPU a search; so a clause part is scored only on
// candidates: the whole request's clausePool best docs and its terms'
// best docs, kept with their lists (fuseClauses). Its answers are among
// those: a doc that answers a clause holds its rarest words, and holds
// them where they weigh most, in its name or a short description.
const (
	maxParts     = 16        // more sentences than this: the last part takes the rest
	minPartTerms = 3         // terms found in the index a sentence (or clause) needs to be a part
	partWeight   = 0.9       // a part's best doc scores this share of the request's best
	clausePool   = pairDepth // the whole request's best docs that clause parts re-rank
	// How many of a clause term's best docs are a clause part's candidates
	// (see fuseClauses), and the fewest.
	clauseTops, clauseTopsMin = topMax, 4
)

// sentenceSpans is the byte ranges of text's sentences, in order: text
// is cut after each '.', '!', '?' or ';' followed by white space (closing
// quotes or brackets may come between) and at line breaks. A full stop
// inside a token ("3.5", "api.example.com") does not cut. A sentence keeps
// its marks and leading space: only its words count.
func sentenceSpans(text string) [][2]int {
	var out [][2]int
	start := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\n':
			out = append(out, [2]int{start, i})
			start = i + 1
		case '.', '!', '?', ';':
			j := i + 1
			for j < len(text) && strings.IndexByte(`"')]`, text[j]) >= 0 {
				j++
			}
			if j == len(text) || text[j] == ' ' || text[j] == '\t' || text[j] == '\r' || text[j] == '\n' {
				out = append(out, [2]int{start, j})
				start, i = j, j-1
			}
		}
	}
	if strings.TrimSpace(text[start:]) != "" {
		out = append(out, [2]int{start, len(text)})
	}
	return out
}

// clauseSpans is sentenceSpans with each sentence cut further into its
// clauses: after a comma followed by white space, and before " and ".
func clauseSpans(text string) [][2]int {
	var out [][2]int
	for _, sp := range sentenceSpans(text) {
		start := sp[0]
		for i := sp[0]; i < sp[1]; i++ {
			switch {
			case text[i] == ',' && i+1 < sp[1] && (text[i+1] == ' ' || text[i+1] == '\t'):
				out = append(out, [2]int{start, i + 1})
				start = i + 1
			case text[i] == ' ' && strings.HasPrefix(text[i:sp[1]], " and "):
				out = append(out, [2]int{start, i})
				start = i
			}
		}
		out = append(out, [2]int{start, sp[1]})
	}
	return out
}

// parts returns the plans of text's parts: per sentence holding at least
// minPartTerms of p's terms, p cut down to those terms, with p's split
// into must and should terms; a sentence with no must term (only words
// the relevance cutoff finds common) is no part. Where the sentences make
// fewer than two parts, the clauses may (BM25F only): clauses reports
// that they did. Nil unless there are two parts or more.
func (ix *Index) parts(p *textPlan, text string) (parts []textPlan, clauses bool) {
	if len(p.terms) < 2*minPartTerms {
		return nil, false
	}
	if out := p.parts(sentenceSpans(text)); out != nil || ix.bleveScoring {
		return out, false
	}
	if !strings.Contains(text, ",") && !strings.Contains(text, " and ") {
		return nil, false
	}
	out := p.parts(clauseSpans(text))
	return out, out != nil
}

// parts is the plans of p's parts over text's spans (in order), nil
// unless there are two or more.
func (p *textPlan) parts(text [][2]int) []textPlan {
	var sets [][]int     // per part, indexes into p.terms, ascending
	var spans [][][2]int // per part, its words: ranges of p.words
	w := 0               // into p.words, which are in text order
	for _, span := range text {
		var idx []int
		from := w
		for ; w < len(p.words) && p.words[w].at < span[1]; w++ {
			if p.words[w].at < span[0] {
				from = w + 1
				continue
			}
			t := p.words[w].term
			if ti := slices.IndexFunc(p.terms, func(qt queryTerm) bool { return qt.term == t }); ti >= 0 && !slices.Contains(idx, ti) {
				idx = append(idx, ti)
			}
		}
		if len(idx) < minPartTerms {
			continue
		}
		slices.Sort(idx)
		if len(sets) == maxParts {
			last := &sets[maxParts-1]
			*last = slices.Compact(slices.Sorted(slices.Values(append(*last, idx...))))
			spans[maxParts-1] = append(spans[maxParts-1], [2]int{from, w})
			continue
		}
		sets = append(sets, idx)
		spans = append(spans, [][2]int{{from, w}})
	}
	if len(sets) < 2 {
		return nil
	}
	var out []textPlan
	for i, idx := range sets {
		if len(idx) == len(p.terms) {
			continue // the whole request again
		}
		if slices.ContainsFunc(out, func(q textPlan) bool { return sameTerms(q.terms, p.terms, idx) }) {
			continue
		}
		if sub, ok := p.sub(idx); ok {
			sub.words = nil
			for _, r := range spans[i] {
				sub.words = append(sub.words, p.words[r[0]:r[1]]...)
			}
			sub.pairs = queryPairs(sub.words)
			out = append(out, sub)
		}
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// sameTerms reports whether terms are p's terms at idx.
func sameTerms(terms, all []queryTerm, idx []int) bool {
	if len(terms) != len(idx) {
		return false
	}
	for i, ti := range idx {
		if terms[i].term != all[ti].term {
			return false
		}
	}
	return true
}

// sub is p cut down to its terms at idx (ascending): what textQuery builds
// for a text of those terms, except that the relevance cutoff is p's, so
// every doc sub matches p matches too. ok is false when sub has no must
// term.
func (p *textPlan) sub(idx []int) (textPlan, bool) {
	s := *p
	s.terms = make([]queryTerm, 0, len(idx))
	s.must, s.should = nil, nil
	for _, ti := range idx {
		s.terms = append(s.terms, p.terms[ti])
		switch {
		case slices.Contains(p.must, ti):
			s.must = append(s.must, len(s.terms)-1)
		case slices.Contains(p.should, ti):
			s.should = append(s.should, len(s.terms)-1)
		}
	}
	return s, len(s.must) > 0
}

// fuse re-ranks whole, the n best docs of m, with the rankings of m's
// parts: a doc scores the largest of its score for m and its scaled scores
// for the parts (see partWeight). Ties fall in index order. The top n is
// exact: a doc in no list scores at most the largest of whole's last
// score and the parts' scaled last scores, so a part whose scaled last
// still reaches the n-th fused score is ranked again, twice as deep; and a
// part is ranked only above whole's n-th score (a floor: scaled, a doc
// under it scores less still, and the fused n-th is at least that), so it
// prunes from its first block. Ranking a part costs its postings, not its
// depth, so parts start at partDepth.
func (ix *Index) fuse(ctx context.Context, r bleveindex.IndexReader, m matched, parts []textPlan, whole []Hit, n int) ([]Hit, error) {
	if len(whole) == 0 {
		return whole, nil
	}
	best := whole[0].Raw
	// A part's doc scoring under whole's n-th score can change nothing:
	// scaled it scores less still, and the fused n-th is at least that.
	// Nor can one under that score divided by the part's largest scale,
	// partWeight·best / (the part's best so far): the cut rises with the
	// part's best (at most to it, so the best, which sets the scale, is
	// always found). A part's hits are then re-scored by its own word
	// pairs (pairs.go), which can raise a doc by up to 1 + pairMaxBonus:
	// the cut is that much lower.
	c := noCut
	if len(whole) >= n {
		c.floor = whole[n-1].Raw / (1 + pairMaxBonus)
		if best > 0 {
			c.rise = min(1, c.floor/(partWeight*best)*(1-pruneSlack))
		}
	}
	lists := make([][]Hit, len(parts))
	depth := make([]int, len(parts))
	for i := range depth {
		depth[i] = max(n, partDepth)
	}
	for {
		if err := ix.rankParts(ctx, r, m, parts, lists, depth, c); err != nil {
			return nil, err
		}
		out := merge(whole, lists, best, n)
		nth := 0.0
		if len(out) == n {
			nth = out[n-1].Raw
		}
		again := false
		for i, h := range lists {
			if len(h) < depth[i] || depth[i] > maxSearchWindow || len(h) == 0 {
				continue // every match of the part is in
			}
			if scale(h, best)*h[len(h)-1].Raw >= nth {
				depth[i] = min(2*depth[i], maxSearchWindow+1)
				lists[i] = nil
				again = true
			}
		}
		if !again {
			return out, nil
		}
	}
}

// fuseClauses re-ranks whole's best docs, whole[:clausePool] (a pool),
// with the clause parts, as fuse does with sentence parts, except that a
// part is not ranked over the index: its candidates are the pool's docs
// and, per must term of the part, the docs of the term's highest values
// in each text field (decoded.tops: clauseTops for the part's rarest term,
// half that for the next, and so on, down to clauseTopsMin), each scored
// for the part from the terms' lists, then by the part's word pairs. A
// candidate from outside the pool joins it at or above the pool's last
// score only, and whole's docs after the pool (but those that joined)
// follow in their order: a pool doc scores at least its score for the
// request, so at least every doc after it. Neither the pool nor the
// candidates depend on n, so pages of any size agree. The parts are
// scored at once while cores are idle (atOnce).
func (ix *Index) fuseClauses(ctx context.Context, r bleveindex.IndexReader, m matched, parts []textPlan, whole []Hit, n int) ([]Hit, error) {
	pool := whole[:min(len(whole), clausePool)]
	if len(pool) == 0 {
		return whole, nil
	}
	best, floor := pool[0].Raw, pool[len(pool)-1].Raw
	lists := make([][]Hit, len(parts))
	todo := make([]int, len(parts))
	for i := range todo {
		todo[i] = i
	}
	err := ix.atOnce(todo, "scoring a clause", func(i int) error {
		list, err := ix.clauseHits(ctx, r, m, &parts[i], pool)
		if err != nil || len(list) == 0 {
			return err
		}
		// Of the docs outside the pool, those that would join it, and the
		// part's best, which sets its scale.
		f, top := scale(list, best), list[0].doc
		lists[i] = slices.DeleteFunc(list, func(h Hit) bool {
			return h.doc != top && f*h.Raw < floor && !slices.ContainsFunc(pool, func(p Hit) bool { return p.doc == h.doc })
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := merge(pool, lists, best, math.MaxInt) // all, by fused score
	for len(out) > len(pool) && out[len(out)-1].Raw < floor {
		out = out[:len(out)-1] // the part's best, kept for its scale only
	}
	joined := make(map[uint64]bool, len(out))
	for _, h := range out {
		joined[h.doc] = true
	}
	for _, h := range whole[len(pool):] {
		if len(out) >= n {
			break
		}
		if !joined[h.doc] {
			out = append(out, h)
		}
	}
	return out[:min(len(out), n)], nil
}

// clauseHits is part's candidates among the docs m lets the search show
// (see fuseClauses), scored for part, the best pairDepth first and in
// order.
func (ix *Index) clauseHits(ctx context.Context, r bleveindex.IndexReader, m matched, part *textPlan, pool []Hit) ([]Hit, error) {
	rk := ranker{}
	if err := rk.open(ctx, ix, r, part, false); err != nil {
		return nil, err
	}
	rk.coordination()
	cands := make([]uint64, 0, len(pool)+4*clauseTops)
	for _, h := range pool {
		cands = append(cands, h.doc)
	}
	for j, ti := range rk.must { // rarest first
		k := max(clauseTopsMin, clauseTops>>j)
		for _, l := range rk.terms[ti].leaves {
			for _, top := range l.list.tops {
				for _, d := range top[:min(k, len(top))] {
					cands = append(cands, uint64(d))
				}
			}
		}
	}
	slices.Sort(cands)
	// A term's best docs include those the search's filters leave out and
	// private entries the caller may not see: the gates decide, as in the
	// ranking.
	g, err := openGates(ctx, r, ix.bleve.Mapping(), m)
	if err != nil {
		return nil, err
	}
	defer g.close()
	docs := make([]uint32, 0, len(cands))
	for i, d := range cands {
		if (i > 0 && d == cands[i-1]) || d > math.MaxUint32 {
			continue
		}
		if in, err := g.admit(d); err != nil {
			return nil, err
		} else if in {
			docs = append(docs, uint32(d))
		}
	}
	scores, ok := rk.scoreDocs(docs)
	var best page // the part's pairDepth best, which its word pairs re-score
	rest := make([]Hit, 0, len(docs))
	for i, d := range docs {
		if !ok[i] {
			continue
		}
		h := hit{doc: uint64(d), score: scores[i]}
		if len(best) == pairDepth && !worse(best[0], h) {
			rest = append(rest, Hit{Raw: h.score, doc: h.doc})
			continue
		}
		if len(best) == pairDepth {
			rest = append(rest, Hit{Raw: best[0].score, doc: best[0].doc})
		}
		best.offer(h, pairDepth)
	}
	// Best first; past pairDepth the order is left, as only the best sets
	// the part's scale (a word pair only raises a score).
	hits := make([]Hit, 0, len(best)+len(rest))
	for _, h := range best.sorted() {
		hits = append(hits, Hit{Raw: h.score, doc: h.doc})
	}
	return ix.rescorePairs(ctx, r, part, append(hits, rest...))
}

// rankParts ranks each part whose list is nil, depth[i] deep above c, and
// re-scores its hits by its word pairs, the parts at once while cores are
// idle (atOnce): a part's ranking then splits over fewer ranges, and two
// parts on two cores cost a lone request less than each split over both
// in turn. The lists are the same either way.
func (ix *Index) rankParts(ctx context.Context, r bleveindex.IndexReader, m matched, parts []textPlan, lists [][]Hit, depth []int, c cut) error {
	rank := func(i int) error {
		pm := m
		pm.text = &parts[i]
		h, _, err := ix.rankText(ctx, r, pm, depth[i], false, c)
		if err != nil {
			return err
		}
		if h, err = ix.rescorePairs(ctx, r, &parts[i], h); err != nil {
			return err
		}
		lists[i] = h
		return nil
	}
	var todo []int
	for i := range parts {
		if lists[i] == nil {
			todo = append(todo, i)
		}
	}
	return ix.atOnce(todo, "ranking a part", rank)
}

// atOnce calls fn with each of todo: while cores are idle (see
// rangesWanted) at once, each on its own goroutine, else in turn. A
// request's parts are independent of one another; under load every core
// has a request of its own.
func (ix *Index) atOnce(todo []int, what string, fn func(i int) error) error {
	if len(todo) < 2 || ix.rangesWanted() < 2 {
		for _, i := range todo {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for k, i := range todo {
		spawn(&wg, &errs[k], what, func() error { return fn(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// partDepth is how deep a part is ranked at first (see fuse).
const partDepth = 50

// scale is the factor of a part's scores, whose ranking is hits, in a
// request whose best score is best (see partWeight).
func scale(hits []Hit, best float64) float64 {
	if len(hits) == 0 || hits[0].Raw <= 0 {
		return 0
	}
	return min(1, partWeight*best/hits[0].Raw)
}

// merge is the n best docs of whole and the parts' lists by fused score.
func merge(whole []Hit, lists [][]Hit, best float64, n int) []Hit {
	at := make(map[uint64]int, len(whole)*(1+len(lists))) // doc → index into out
	out := make([]Hit, 0, len(whole)*(1+len(lists)))
	for _, h := range whole {
		at[h.doc] = len(out)
		out = append(out, h)
	}
	for _, hits := range lists {
		f := scale(hits, best)
		for _, h := range hits {
			if i, ok := at[h.doc]; ok {
				out[i].Raw = max(out[i].Raw, f*h.Raw)
				continue
			}
			h.Raw *= f
			at[h.doc] = len(out)
			out = append(out, h)
		}
	}
	// Ties fall in index order, as in every ranking, so that a page is the
	// same whatever its size.
	slices.SortFunc(out, byRank)
	return out[:min(len(out), n)]
}

// byRank orders hits best first, ties in index order (the order every
// ranking and re-scoring keeps).
func byRank(a, b Hit) int {
	switch {
	case a.Raw > b.Raw:
		return -1
	case a.Raw < b.Raw:
		return 1
	}
	return cmp.Compare(a.doc, b.doc)
}
