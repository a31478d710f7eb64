package index

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	bleveindex "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
)

// Carrying decoded postings over a write.
//
// A write makes a new snapshot, and a list of the posting cache belongs to
// one snapshot (postings.go): decoded afresh, a request's lists cost about
// 120 ns a posting, so every search after a write paid several times a
// warm one (1.8 against 0.3 ms a search with a write every 50 searches at
// 100k entries). But a write only appends segments, deletes docs and
// merges segments into a new one: a segment in both snapshots holds the
// same postings, only numbered from where the new snapshot puts it. So a
// list the new snapshot's cache lacks is carried over from the latest
// earlier snapshot whose cache held it: per segment of the new snapshot,
// the old list's postings of that segment, renumbered and without the docs
// deleted since, or, for a segment the old snapshot lacked (new or
// merged), its postings decoded. A list the write did not touch is the old
// one's arrays, shared. A list's values depend on no statistic of the
// snapshot: BM25F's fieldTF divides by a constant length pivot per field
// (mapping.go), and a pair's frequency by nothing; a list made with
// another pivot is decoded whole. Bleve's form (Index.bleveScoring) puts
// the idf into the values and is never carried. TestCarriedListsMatchDecoded compares carried
// lists with decoded ones after adds, updates, deletes and merges.

// span is one segment of a snapshot as the snapshot numbers its docs.
type span struct {
	id    uint64
	seg   segment.Segment
	from  uint32 // its first doc number
	count uint32 // the doc numbers it takes, its deleted docs' included
	del   *roaring.Bitmap
}

// spansOf is is's segments in order; nil if their doc numbers pass uint32.
func spansOf(is *scorch.IndexSnapshot) []span {
	segs := is.Segments()
	out := make([]span, 0, len(segs))
	var from uint64
	for _, ss := range segs {
		n := ss.Segment().Count()
		if from+n > math.MaxUint32 {
			return nil
		}
		out = append(out, span{id: ss.Id(), seg: ss.Segment(), from: uint32(from), count: uint32(n), del: ss.Deleted()})
		from += n
	}
	return out
}

// within is where docs (ascending) holds the docs of segment sp: [lo, hi).
func (sp span) within(docs []uint32) (lo, hi int) {
	lo = sort.Search(len(docs), func(j int) bool { return docs[j] >= sp.from })
	hi = lo + sort.Search(len(docs)-lo, func(j int) bool { return docs[lo+j]-sp.from >= sp.count })
	return lo, hi
}

// sameSegments reports whether spans are of is's very segment objects.
func sameSegments(spans []span, is *scorch.IndexSnapshot) bool {
	segs := is.Segments()
	if len(segs) != len(spans) {
		return false
	}
	for i, ss := range segs {
		if spans[i].seg != ss.Segment() {
			return false
		}
	}
	return true
}

// move is how one span of a snapshot is made from an earlier one's lists:
// carried from the earlier span at old, without the docs dropped since
// (segment-local numbers, ascending), or, with old −1, decoded.
type move struct {
	old     int
	dropped []uint32
}

// planMoves matches each span of cur with the span of old holding the same
// segment: the same ID, and so the same docs. A doc deleted in old and not
// in cur cannot happen (deletions only grow); such a span is decoded.
func planMoves(old, cur []span) []move {
	moves := make([]move, len(cur))
	for i, sp := range cur {
		moves[i].old = -1
		j := slices.IndexFunc(old, func(o span) bool { return o.id == sp.id && o.count == sp.count })
		if j < 0 {
			continue
		}
		o := old[j]
		switch {
		case o.del == sp.del:
			moves[i].old = j
		case sp.del == nil:
			// Deleted before and not now: not the same segment.
		case o.del == nil:
			moves[i].old, moves[i].dropped = j, sp.del.ToArray()
		case o.del.AndCardinality(sp.del) == o.del.GetCardinality():
			moves[i].old, moves[i].dropped = j, roaring.AndNot(sp.del, o.del).ToArray()
		}
	}
	return moves
}

// carried is k's list in snapshot snap (read by r) carried over from an
// earlier snapshot's, or nil where that cannot be; and snap's segments, nil
// where a list of snap cannot be carried later.
func (c *postingCache) carried(snap string, r bleveindex.IndexReader, k leafKey, src source) (*decoded, []span, error) {
	if src.part == nil {
		return nil, nil, nil
	}
	is, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return nil, nil, nil
	}
	c.mu.Lock()
	if c.snap != snap {
		c.reset(snap)
	}
	cur, kept := c.curSpans(is)
	prev := c.prev[k]
	if prev == nil || prev.avg != src.avg || len(prev.spans) == 0 || cur == nil {
		c.mu.Unlock()
		return nil, kept, nil
	}
	delete(c.prev, k) // this snapshot's cache holds it from now on
	c.prevBytes -= prev.bytes()
	moves := c.movesFrom(prev.spans, cur)
	c.carries++
	c.mu.Unlock()
	d, err := carry(prev, prev.spans, cur, moves, src.part)
	return d, kept, err
}

// carry makes the list of the snapshot of spans cur from prev, the list of
// the snapshot of spans old, as moves say.
func carry(prev *decoded, old, cur []span, moves []move, part func(span) (*decoded, error)) (*decoded, error) {
	parts := make([]*decoded, len(cur))
	for i, sp := range cur {
		if moves[i].old < 0 {
			p, err := part(sp)
			if err != nil {
				return nil, err
			}
			parts[i] = p
		}
	}
	if unchanged(prev, old, cur, moves, parts) {
		// Most of a request's lists: the write touched no doc of theirs.
		// Lists are never modified once made, so the arrays are shared.
		d := *prev
		return &d, nil
	}
	union := prev.s2 != nil
	n := len(prev.docs) + 16
	d := &decoded{docs: make([]uint32, 0, n), s: make([]float64, 0, n), block: prev.block}
	if union {
		d.s2 = make([]float64, 0, n)
	}
	kept := 0           // postings of prev carried
	var best [2]float64 // the largest values decoded
	for i, sp := range cur {
		mv := moves[i]
		if p := parts[i]; p != nil {
			d.docs = append(d.docs, p.docs...)
			d.s = append(d.s, p.s...)
			for _, v := range p.s {
				best[0] = max(best[0], v)
			}
			if union {
				d.s2 = append(d.s2, p.s2...)
				for _, v := range p.s2 {
					best[1] = max(best[1], v)
				}
			}
			continue
		}
		o := old[mv.old]
		lo, hi := o.within(prev.docs)
		// The segment's postings, renumbered if it moved, copied a run at a
		// time between the docs deleted since (usually none, or the one
		// an update replaced).
		shift := sp.from - o.from
		copyRun := func(from, to int) {
			at := len(d.docs)
			d.docs = append(d.docs, prev.docs[from:to]...)
			if shift != 0 {
				for j := at; j < len(d.docs); j++ {
					d.docs[j] += shift
				}
			}
			d.s = append(d.s, prev.s[from:to]...)
			if union {
				d.s2 = append(d.s2, prev.s2[from:to]...)
			}
			kept += to - from
		}
		for _, x := range mv.dropped {
			doc := o.from + x
			j := lo + sort.Search(hi-lo, func(j int) bool { return prev.docs[lo+j] >= doc })
			copyRun(lo, j)
			if lo = j; lo < hi && prev.docs[lo] == doc {
				lo++
			}
		}
		copyRun(lo, hi)
	}
	if prev.starts != nil {
		d.starts = blockStarts(d.docs, d.block)
	}
	if kept == len(prev.docs) {
		// Every posting of prev came along: its largest values did too.
		d.best, d.best2 = max(prev.best, best[0]), max(prev.best2, best[1])
		return d, nil
	}
	for _, v := range d.s {
		d.best = max(d.best, v)
	}
	for _, v := range d.s2 {
		d.best2 = max(d.best2, v)
	}
	return d, nil
}

// unchanged reports whether carrying prev would give prev again: every
// segment holding its postings is in cur where it was, none of the docs
// deleted since is among them, and the segments new to it add none.
func unchanged(prev *decoded, old, cur []span, moves []move, parts []*decoded) bool {
	kept := 0
	for i, mv := range moves {
		if mv.old < 0 {
			if len(parts[i].docs) > 0 {
				return false
			}
			continue
		}
		o := old[mv.old]
		lo, hi := o.within(prev.docs)
		if hi > lo && cur[i].from != o.from {
			return false
		}
		for _, x := range mv.dropped {
			if _, found := slices.BinarySearch(prev.docs[lo:hi], o.from+x); found {
				return false
			}
		}
		kept += hi - lo
	}
	return kept == len(prev.docs)
}

// decodePart is decode over the one segment sp: its postings of term in
// field, numbered as the snapshot numbers them, each with its fieldTF (avg
// the field's length pivot), or with freqOnly its frequency.
func decodePart(ctx context.Context, sp span, term, field string, avg float64, freqOnly bool, block int) (*decoded, error) {
	dict, err := sp.seg.Dictionary(field)
	if err != nil {
		return nil, fmt.Errorf("index: search: %w", err)
	}
	pl, err := dict.PostingsList([]byte(term), sp.del, nil)
	if err != nil {
		return nil, fmt.Errorf("index: search: %w", err)
	}
	it := pl.Iterator(true, !freqOnly, false, nil)
	d := &decoded{block: uint32(block)}
	for i := 0; ; i++ {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("index: search: %w", err)
			}
		}
		p, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("index: search: %w", err)
		}
		if p == nil {
			return d, nil
		}
		d.docs = append(d.docs, sp.from+uint32(p.Number()))
		if freqOnly {
			d.s = append(d.s, float64(p.Frequency()))
		} else {
			d.s = append(d.s, fieldTF(p.Frequency(), p.Norm(), avg))
		}
	}
}
