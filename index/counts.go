package index

import (
	"context"
	"fmt"
	"slices"

	"github.com/blevesearch/bleve/v2/index/scorch"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Term counts carried over a write.
//
// A request's term statistics are how many docs hold each term in each
// text field, per snapshot: a word new to the statistics cache is looked
// up in every segment's dictionary (an automaton walk each). After a write
// every word is new to the new snapshot, and with the fifteen or so
// segments a stream of writes leaves, the look-ups were a quarter of a
// search's time. But a segment's dictionary never changes, and its count
// of a term changes only by the docs deleted since (carry.go): so a term
// counted in an earlier snapshot is counted again only in the segments new
// to this one, and in a segment that lost docs since, the docs it lost
// are looked up in the term's decoded list of that earlier snapshot (an
// update deletes one doc: one binary search) or, without one, the segment
// is counted afresh. A word no doc has keeps being none in the segments
// it was absent from.

// termCounts is a term's doc counts in one snapshot, per segment.
type termCounts struct {
	spans []span   // the snapshot's segments, kept form (postingCache.spansKept)
	per   []uint32 // per span, per text field: docs holding the term, deleted ones left out
}

// maxCountedTerms bounds the terms whose counts a cache keeps per
// snapshot and from earlier ones (each some bytes per segment).
const maxCountedTerms = 1 << 15

// sum is the counts over every segment, per text field.
func (tc *termCounts) sum() []uint64 {
	n := make([]uint64, len(textFields))
	for i, v := range tc.per {
		n[i%len(textFields)] += uint64(v)
	}
	return n
}

// counts is how many docs of the snapshot r (key snap) hold term, per text
// field, as Bleve's term reader counts them: per segment, its postings
// without its deleted docs. It reads the cached dictionaries, and only
// those it must (see above).
func (c *postingCache) counts(ctx context.Context, snap string, r bleveindex.IndexReader, term string) ([]uint64, error) {
	is, ok := r.(*scorch.IndexSnapshot)
	if !ok || snap == "" {
		return c.readerCounts(ctx, r, term)
	}
	dicts, err := c.dictionaries(snap, is)
	if err != nil {
		return c.readerCounts(ctx, r, term)
	}
	c.mu.Lock()
	if c.snap != snap {
		c.reset(snap)
	}
	cur, kept := c.curSpans(is)
	if tc := c.counted[term]; tc != nil {
		c.mu.Unlock()
		return tc.sum(), nil
	}
	old := c.countedPrev[term]
	var moves []move
	var list *decoded
	listField := 0
	if old != nil && len(old.spans) > 0 && cur != nil {
		moves = c.movesFrom(old.spans, cur)
		list, listField = c.listIn(term, old.spans)
	} else {
		old = nil
	}
	c.mu.Unlock()

	nf := len(textFields)
	segs := is.Segments()
	key := []byte(term)
	per := make([]uint32, len(segs)*nf)
	// count fills per for segment i from its dictionaries.
	count := func(i int) error {
		// A dictionary's postings look-up goes through one FST reader with
		// state of its own (its membership test does not): one search at
		// a time.
		c.lookups.Lock()
		defer c.lookups.Unlock()
		for fi := range nf {
			pl, err := dicts[fi][i].PostingsList(key, segs[i].Deleted(), nil)
			if err != nil {
				return fmt.Errorf("index: search: %w", err)
			}
			per[i*nf+fi] = uint32(pl.Count())
		}
		return nil
	}
	listed := 0 // segments whose lost docs were looked up in list
	switch {
	case old != nil:
		for i := range segs {
			mv := moves[i]
			if mv.old >= 0 {
				was := old.per[mv.old*nf : (mv.old+1)*nf]
				if now, ok := dropHeld(was, list, listField, old.spans[mv.old], mv.dropped); ok {
					copy(per[i*nf:], now)
					if len(mv.dropped) > 0 {
						listed++
					}
					continue
				}
			}
			if err := count(i); err != nil {
				return nil, err
			}
		}
	case absentIn(dicts, term, 0, nf):
		// A word no doc has (a typo, a word never indexed): zero
		// everywhere, and in these segments for good.
	default:
		for i := range segs {
			if err := count(i); err != nil {
				return nil, err
			}
		}
	}
	tc := &termCounts{spans: kept, per: per}
	if kept != nil && len(term) <= maxCachedTermBytes {
		c.mu.Lock()
		if c.snap == snap {
			if len(c.counted) >= maxCountedTerms {
				c.counted = nil
			}
			if c.counted == nil {
				c.counted = make(map[string]*termCounts, 1024)
			}
			c.counted[term] = tc
		}
		if old != nil {
			c.countsCarried++
		}
		c.countsListed += listed
		c.mu.Unlock()
	}
	return tc.sum(), nil
}

// dropHeld is was, a segment's counts per text field, without the docs of
// dropped (segment-local numbers) that hold the term, as list (the term's
// list in the same snapshot, in field listField or both) says; ok is false
// when it cannot tell.
func dropHeld(was []uint32, list *decoded, listField int, o span, dropped []uint32) ([]uint32, bool) {
	if len(dropped) == 0 {
		return was, true
	}
	if list == nil {
		return nil, false
	}
	now := slices.Clone(was)
	lo, hi := o.within(list.docs)
	for _, x := range dropped {
		j, found := slices.BinarySearch(list.docs[lo:hi], o.from+x)
		if !found {
			continue
		}
		j += lo
		for fi := range now {
			held := listField == fi
			switch {
			case listField == bothFields && fi == 0:
				held = list.s[j] != 0
			case listField == bothFields:
				held = list.s2[j] != 0
			}
			if !held {
				continue
			}
			if now[fi] == 0 {
				return nil, false // not what the counts said: count afresh
			}
			now[fi]--
		}
	}
	return now, true
}

// curSpans is the spans of is (c.spans, made when missing or of other
// segment objects) and their kept form; c.mu is held.
func (c *postingCache) curSpans(is *scorch.IndexSnapshot) (cur, kept []span) {
	// The segments' objects must be the reader's own: Bleve persists a
	// segment under the same ID, so a reader of the same snapshot key may
	// hold the other copy, which is closed once its last reader ends.
	if c.spans == nil || !sameSegments(c.spans, is) {
		c.spans, c.moves = spansOf(is), nil
		// What the lists keep of them: not the segments, which an
		// in-memory segment's bytes would stay behind.
		c.spansKept = make([]span, len(c.spans))
		for i, sp := range c.spans {
			sp.seg = nil
			c.spansKept[i] = sp
		}
	}
	return c.spans, c.spansKept
}

// movesFrom is how cur's spans are made from old's (planMoves, cached by
// old's first span); c.mu is held.
func (c *postingCache) movesFrom(old, cur []span) []move {
	first := &old[0]
	moves, ok := c.moves[first]
	if !ok {
		moves = planMoves(old, cur)
		if c.moves == nil {
			c.moves = make(map[*span][]move)
		}
		c.moves[first] = moves
	}
	return moves
}

// listIn is a list of term made in the snapshot of spans, from the lists
// earlier snapshots left, and its field (bothFields for a union); nil if
// there is none. c.mu is held.
func (c *postingCache) listIn(term string, spans []span) (*decoded, int) {
	for f := bothFields; f < len(textFields); f++ { // the union, then each field's
		if d := c.prev[leafKey{term, f}]; d != nil && len(d.spans) > 0 && &d.spans[0] == &spans[0] && (f != bothFields || d.s2 != nil) {
			return d, f
		}
	}
	return nil, 0
}

// readerCounts is counts through Bleve's term readers, for a reader that
// is not a snapshot the cache keeps.
func (c *postingCache) readerCounts(ctx context.Context, r bleveindex.IndexReader, term string) ([]uint64, error) {
	n := make([]uint64, len(textFields))
	for fi, f := range textFields {
		tfr, err := r.TermFieldReader(ctx, []byte(term), f.name, false, false, false)
		if err != nil {
			return nil, fmt.Errorf("index: search: %w", err)
		}
		n[fi] = tfr.Count()
		if err := tfr.Close(); err != nil {
			return nil, fmt.Errorf("index: search: %w", err)
		}
	}
	return n, nil
}
