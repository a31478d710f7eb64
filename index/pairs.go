package index

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"

	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Word pairs.
//
// A request's words that stand next to each other in an entry's name or
// description say more than the same words scattered over it: "exchange
// rate" names what an operation "get exchange rate" does, where an entry
// that says "rate limit" and "currency exchange" in two sentences only
// shares the words. BM25 sees bags of words, so after a ranking its first
// pairDepth hits are re-scored: each adjacent word pair of the request
// (pairsOf: stop words skipped, stems) that a hit's URN name, display name
// or a capability holds adds pairNameBonus to a factor, one only its
// description holds pairTextBonus, and the hit's raw score is multiplied
// by 1 + that factor, at most 1 + pairMaxBonus. Only the first pairDepth
// hits move, among themselves, and a factor is at least 1, so each of them
// still scores at least as much as any hit after them: a page of any size
// starts the same ranking. A request of several intents has its parts'
// rankings re-scored by their own sentences' pairs before they are fused
// (segment.go), so the intent with the longest sentence does not collect
// every pair's bonus. A pair with a word no entry holds, of two common
// words (the relevance cutoff's), or of words no re-scored hit holds both
// of (their decoded postings tell), is not looked up: the dictionary
// look-ups and pair postings are most of the re-scoring's cost. Measured
// in docs/decisions.md (issue 19, word pairs).
//
// An entry's pairs are indexed as keywords of fieldPairs, the frequency
// saying where they are (pairInName, pairInText, or their sum when both).
const (
	pairDepth     = 11
	pairNameBonus = 0.2
	pairTextBonus = 0.1
	pairMaxBonus  = 0.5
	pairInName    = 2
	pairInText    = 1
)

// docPair is one word pair of an entry and its fieldPairs frequency.
type docPair struct {
	pair string
	freq int
}

// pairs lists d's word pairs: those of its URN name, display name and each
// capability (pairs never span two values), and of its description.
func (a analyzers) pairs(d *Doc) []docPair {
	where := map[string]int{}
	add := func(bit int, values ...string) {
		for _, v := range values {
			if v == "" {
				continue
			}
			for _, p := range pairsOf(wordsOf(a.text.Analyze([]byte(v)))) {
				where[p] |= bit
			}
		}
	}
	add(pairInName, d.Name, d.DisplayName)
	add(pairInName, d.Capabilities...)
	add(pairInText, d.Description)
	out := make([]docPair, 0, len(where))
	for p, bits := range where {
		freq := 0
		if bits&pairInName != 0 {
			freq += pairInName
		}
		if bits&pairInText != 0 {
			freq += pairInText
		}
		out = append(out, docPair{p, freq})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pair < out[j].pair })
	return out
}

// pairField is fieldPairs' index in dictFields and its key in the posting
// cache (leafKey.field).
var pairField = len(textFields)

// rescorePairs re-scores the first pairDepth of hits, ranked for the plan
// p, by the request's word pairs they hold (see above) and sorts them
// again; the hits after them stay as they are.
func (ix *Index) rescorePairs(ctx context.Context, r bleveindex.IndexReader, p *textPlan, hits []Hit) ([]Hit, error) {
	top := hits[:min(len(hits), pairDepth)]
	if len(top) == 0 || len(p.pairs) == 0 || ix.bleveScoring {
		return hits, nil
	}
	bonus := make([]float64, len(top))
	held := &held{ix: ix, p: p, hits: top}
	for _, pair := range p.pairs {
		ia, ib, ok := p.indexed(pair)
		if !ok {
			continue
		}
		// A pair seen before is at hand; one not yet looked up is looked
		// up only if a hit holds both its words.
		list, cached := ix.cachedPair(p, pair)
		if !cached {
			if !held.both(ia, ib) {
				continue
			}
			var err error
			if list, err = ix.pairPostings(ctx, r, p, pair); err != nil {
				return nil, err
			}
		}
		if list == nil {
			continue
		}
		for i, h := range top {
			if h.doc > math.MaxUint32 {
				continue
			}
			j, found := slices.BinarySearch(list.docs, uint32(h.doc))
			if !found {
				continue
			}
			if list.s[j] >= pairInName {
				bonus[i] += pairNameBonus
			} else {
				bonus[i] += pairTextBonus
			}
		}
	}
	moved := false
	for i := range top {
		if bonus[i] > 0 {
			top[i].Raw *= 1 + min(bonus[i], pairMaxBonus)
			moved = true
		}
	}
	if moved {
		slices.SortFunc(top, byRank)
	}
	return hits, nil
}

// pairPostings is the docs holding pair in fieldPairs, with its frequency
// in s; nil when none does. Lists are cached with the decoded postings,
// an absent pair as an empty list: most of a request's pairs are in no
// entry, and the dictionaries tell that cheaply.
func (ix *Index) pairPostings(ctx context.Context, r bleveindex.IndexReader, p *textPlan, pair string) (*decoded, error) {
	d, err := ix.postings.load(p.snap, r, leafKey{pair, pairField}, source{
		whole: func() (*decoded, error) {
			d := &decoded{block: 1 << blockBits}
			if p.snap != "" && ix.postings.absentFrom(p.snap, r, pair, pairField, pairField+1) {
				return d, nil
			}
			err := walkPostings(ctx, r, pair, fieldPairs, true, func(_ uint64, doc uint32, p *bleveindex.TermFieldDoc) {
				d.docs = append(d.docs, doc)
				d.s = append(d.s, float64(p.Freq))
				d.best = max(d.best, float64(p.Freq))
			})
			if err != nil {
				return nil, err
			}
			return d, nil
		},
		// A pair's values are its frequencies: any later snapshot may
		// carry its list.
		part: func(sp span) (*decoded, error) {
			return decodePart(ctx, sp, pair, fieldPairs, 0, true, 1<<blockBits)
		},
	})
	if err != nil || len(d.docs) == 0 {
		return nil, err
	}
	return d, nil
}

// cachedPair is pairPostings' list of pair when the cache holds it (nil
// for a pair no entry holds).
func (ix *Index) cachedPair(p *textPlan, pair string) (*decoded, bool) {
	if p.snap == "" {
		return nil, false
	}
	d := ix.postings.get(p.snap, leafKey{pair, pairField})
	if d == nil {
		return nil, false
	}
	if len(d.docs) == 0 {
		return nil, true
	}
	return d, true
}

// indexed reports whether both words of pair are terms of p that some
// entry holds, and not both common (see the relevance cutoff), and which
// terms they are: a pair of a word no entry has is in no entry either,
// and looking pairs up in the dictionaries is most of the re-scoring's
// cost.
func (p *textPlan) indexed(pair string) (ia, ib int, ok bool) {
	a, b, _ := strings.Cut(pair, " ")
	ia = slices.IndexFunc(p.terms, func(t queryTerm) bool { return t.term == a })
	ib = slices.IndexFunc(p.terms, func(t queryTerm) bool { return t.term == b })
	if ia < 0 || ib < 0 {
		return 0, 0, false
	}
	return ia, ib, !slices.Contains(p.should, ia) || !slices.Contains(p.should, ib)
}

// held says which hits hold which of a plan's terms: per term, a bit per
// hit (pairDepth fits a word), found as asked. A term whose postings are
// not at hand counts as held by every hit.
type held struct {
	ix   *Index
	p    *textPlan
	hits []Hit
	mask []uint64 // per term, once found (done)
	done []bool
}

// The hits' bits fit a word: a larger pairDepth does not compile.
var _ [64 - pairDepth]struct{}

// both reports whether a hit holds the terms at ia and ib: an entry's word
// pairs are of words its name, display name, capabilities and description
// hold (pairs), all in the text fields, so a hit without both words has no
// pair of them, and the pair need not be looked up.
func (h *held) both(ia, ib int) bool {
	return h.of(ia)&h.of(ib) != 0
}

// of is the bits of the hits holding the term at ti.
func (h *held) of(ti int) uint64 {
	if h.mask == nil {
		h.mask, h.done = make([]uint64, len(h.p.terms)), make([]bool, len(h.p.terms))
	}
	if h.done[ti] {
		return h.mask[ti]
	}
	all := uint64(1)<<len(h.hits) - 1
	m := all
	if h.p.snap != "" {
		m = 0
		for _, k := range listKeys(&h.p.terms[ti], h.ix.bleveScoring) {
			list := h.ix.postings.get(h.p.snap, k)
			if list == nil {
				m = all
				break
			}
			for i, hit := range h.hits {
				if hit.doc <= math.MaxUint32 && list.holds(uint32(hit.doc)) {
					m |= 1 << i
				}
			}
		}
	}
	h.mask[ti], h.done[ti] = m, true
	return m
}
