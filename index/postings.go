package index

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search"
	bleveindex "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"

	"github.com/ardx-dev/ardx/internal/gencache"
)

// Decoded postings.
//
// Walking Bleve's postings costs tens of nanoseconds a step. So a leaf's
// postings are decoded once per index snapshot into two arrays, doc
// numbers and what each posting gives before the query weight: its
// field-normalised term frequency (fieldTF, BM25F), or with
// Index.bleveScoring Bleve's TermQueryScorer.docScore
// (idf·tf·k1/(tf+k1·(1−b+b·len/avgLen))); and kept in a bounded cache for
// the queries that follow: a step of the ranker is then an array read and
// a multiplication. A term in both text fields is kept (BM25F) as one
// list, their union, with the doc's value in each field (0 where it lacks
// the term there): the ranker reads it in one pass, where the two leaves
// took three (a scratch of the first field's values, the second's added
// to it, then the docs only the first holds).
//
// A doc's number and a leaf's scores belong to one snapshot: a write
// changes deletions, document frequencies and lengths, a merge renumbers
// docs. So the cache is keyed by the generation plus the snapshot's
// segment IDs, and used only when the search's reader is exactly that
// generation (textPlan.cache). A list the cache lacks after a write is
// carried over from an earlier snapshot's where it can be (carry.go):
// those are kept too, within the same bound again, so the cache holds at
// most twice postingCacheBytes.

// postingCacheBytes bounds the decoded postings kept, at 12 bytes a
// posting of a leaf and 20 of a union: 2.4 to 4 million postings. MetaTool's
// 20,000 distinct requests at 100k entries decode 49.5 MB of unions, pairs
// and words as written; the bound keeps diverse traffic within the 400 MB
// the service is allowed at 100k entries, the lists asked for longest ago
// making room for new ones (postingCache.evict).
const postingCacheBytes = 48 << 20

// decoded is one leaf's postings in one snapshot, or a term's postings in
// both text fields (union).
type decoded struct {
	docs []uint32
	s    []float64 // fieldTF (or Bleve's docScore) of each posting
	best float64   // the largest s
	// A union's second text field: s is the first's fieldTF, s2 the
	// second's, each 0 where the doc lacks the term in that field; nil in
	// a leaf's list.
	s2    []float64
	best2 float64
	// starts[k] is the position of the first doc at or past block k (of
	// block doc numbers); past the last block, every doc is before.
	starts []int32
	block  uint32
	// spans are the segments of the list's snapshot when a later one may
	// carry the list over (carry.go): its values depend on no statistic
	// of the snapshot, only on the length pivots in avg (of the list's
	// text field, or of the union's two). Nil: never carried.
	spans []span
	avg   [2]float64
	// tops are the docs of the topMax highest values of s, and of s2,
	// each best first (ties in doc order): where a clause part looks for
	// its answers (segment.go). Set before the list is shared.
	tops [2][]uint32
}

func (d *decoded) bytes() int {
	return len(d.docs)*4 + len(d.s)*8 + len(d.s2)*8 + len(d.starts)*4 + (len(d.tops[0])+len(d.tops[1]))*4 + 64
}

// topMax is how many docs of a list's highest values decoded.tops keeps
// per text field.
const topMax = 32

// setTops sets d.tops for a text list under key k (a keyword's list, a
// word pair's or a word's as written, only re-scores hits), unless a list
// it was carried from had them.
func setTops(k leafKey, d *decoded) {
	if k.field < pairField && d.tops[0] == nil && d.tops[1] == nil {
		d.tops = [2][]uint32{topDocs(d.docs, d.s), topDocs(d.docs, d.s2)}
	}
}

// topDocs is the docs of the topMax highest positive values in v, best
// first, ties in doc order; nil for none.
func topDocs(docs []uint32, v []float64) []uint32 {
	var best page
	for i, x := range v {
		if h := (hit{doc: uint64(docs[i]), score: x}); x > 0 && (len(best) < topMax || worse(best[0], h)) {
			best.offer(h, topMax)
		}
	}
	if len(best) == 0 {
		return nil
	}
	out := make([]uint32, 0, len(best))
	for _, h := range best.sorted() {
		out = append(out, uint32(h.doc))
	}
	return out
}

// at is the position of the first doc at or past end, searching from p
// (at or before it): at a block's start from starts, else in steps
// doubling from p, then a binary search of the last step, so that a
// search for the next of a few sorted docs (ranker.scoreDocs) reads near
// p.
func (d *decoded) at(p int, end uint32) int {
	if end%d.block == 0 {
		if k := int(end / d.block); k < len(d.starts) {
			return int(d.starts[k])
		}
		return len(d.docs)
	}
	lo, hi, step := p, p, 1
	for hi < len(d.docs) && d.docs[hi] < end {
		lo = hi + 1
		hi += step
		step <<= 1
	}
	i, _ := slices.BinarySearch(d.docs[lo:min(hi, len(d.docs))], end)
	return lo + i
}

// holds reports whether doc is in the list.
func (d *decoded) holds(doc uint32) bool {
	_, found := d.find(doc)
	return found
}

// find is doc's position in the list, if it holds doc: a binary search of
// its block.
func (d *decoded) find(doc uint32) (int, bool) {
	from, to := 0, len(d.docs)
	if k := int(doc / d.block); k+1 < len(d.starts) {
		from, to = int(d.starts[k]), int(d.starts[k+1])
	} else if k < len(d.starts) {
		from = int(d.starts[k])
	} else {
		return 0, false
	}
	i, found := slices.BinarySearch(d.docs[from:to], doc)
	return from + i, found
}

// leafKey names a leaf: a term in a text field (an index into textFields),
// or with bothFields the term's union over the two.
type leafKey struct {
	term  string
	field int
}

// bothFields is the field of a union's key.
const bothFields = -1

// listKeys are the keys of the lists the ranker reads for qt: BM25F reads
// a term in both text fields from their union, Bleve's form (bleve) one
// list per field.
func listKeys(qt *queryTerm, bleve bool) []leafKey {
	if !bleve && len(qt.fields) == 2 {
		return []leafKey{{qt.term, bothFields}}
	}
	keys := make([]leafKey, len(qt.fields))
	for i, fi := range qt.fields {
		keys[i] = leafKey{qt.term, fi}
	}
	return keys
}

// unionOf is the union of a term's two text fields' lists, each made by
// list.
func unionOf(list func(fi int) (*decoded, error)) (*decoded, error) {
	var lists [2]*decoded // by field, as a union's s and s2
	for fi := range lists {
		d, err := list(fi)
		if err != nil {
			return nil, err
		}
		lists[fi] = d
	}
	return union(lists[0], lists[1]), nil
}

// union merges a term's lists in the first and second text fields into
// one list of the docs either holds (see decoded.s2).
func union(a, b *decoded) *decoded {
	n := len(a.docs) + len(b.docs)
	u := &decoded{docs: make([]uint32, 0, n), s: make([]float64, 0, n), s2: make([]float64, 0, n),
		best: a.best, best2: b.best, block: a.block}
	i, j := 0, 0
	for i < len(a.docs) || j < len(b.docs) {
		var doc uint32
		var x, y float64
		switch {
		case j == len(b.docs) || i < len(a.docs) && a.docs[i] < b.docs[j]:
			doc, x = a.docs[i], a.s[i]
			i++
		case i == len(a.docs) || b.docs[j] < a.docs[i]:
			doc, y = b.docs[j], b.s[j]
			j++
		default:
			doc, x, y = a.docs[i], a.s[i], b.s[j]
			i++
			j++
		}
		u.docs = append(u.docs, doc)
		u.s = append(u.s, x)
		u.s2 = append(u.s2, y)
	}
	u.starts = blockStarts(u.docs, u.block)
	return u
}

// blockStarts is starts of a list of docs (see decoded): per block of
// block doc numbers up to the last doc's, the position of its first doc at
// or past the block's start, then the list's length.
func blockStarts(docs []uint32, block uint32) []int32 {
	blocks := 0
	if len(docs) > 0 {
		blocks = int(docs[len(docs)-1]/block) + 1
	}
	starts := make([]int32, blocks+1)
	for k := 1; k < blocks; k++ {
		from := uint32(k) * block
		starts[k] = int32(sort.Search(len(docs), func(j int) bool { return docs[j] >= from }))
	}
	starts[blocks] = int32(len(docs))
	return starts
}

// postingCache holds the decoded leaves of one snapshot, starting afresh
// when the snapshot changes and evicting the least recently asked for when
// the budget is spent, and the snapshot's term dictionaries.
type postingCache struct {
	limit int

	mu    sync.Mutex
	snap  string
	lists map[leafKey]*cached
	bytes int
	clock uint64 // counts gets and puts: when a list was last asked for
	// dicts holds, per field of dictFields, the term dictionary of each
	// of segs.
	// They read the segments' files, so a search uses them only while it
	// holds a reader on those very segments, which keeps them open.
	segs    []segment.Segment
	dicts   [][]segment.TermDictionary
	lookups sync.Mutex // counts' postings look-ups in dicts
	// spans are snap's segments once a list missed (carry.go); prev
	// holds the lists of earlier snapshots that may be carried over (the
	// latest of each key), prevBytes their size, and moves how snap's
	// segments are made from an earlier snapshot's, by its first span.
	spans     []span
	spansKept []span // spans without their segments, as lists keep them
	prev      map[leafKey]*decoded
	prevBytes int
	moves     map[*span][]move
	carries   int // lists carried over, for tests
	// counted holds snap's term counts, countedPrev the latest of each
	// term from earlier snapshots (counts.go).
	counted     map[string]*termCounts
	countedPrev map[string]*termCounts
	// For tests: terms counted from an earlier snapshot's counts, and
	// segments whose lost docs were looked up in a list.
	countsCarried, countsListed int
	// ids are the identifiers of snap's docs that pages have shown, up to
	// maxCachedIDs: Bleve reads one from the doc's stored fields, a
	// decompression each (about 1 µs), and the same docs come back page
	// after page.
	ids map[uint64]string
}

// maxCachedIDs bounds postingCache.ids: at most a few MB.
const maxCachedIDs = 1 << 16

// withIDs sets each hit's identifier from its doc number: from the ids
// kept for snapshot snap, else from r (and then kept). An empty snap is a
// reader the cache may not serve.
func (c *postingCache) withIDs(snap string, r bleveindex.IndexReader, hits []Hit) error {
	if snap == "" {
		return withIDs(r, hits)
	}
	missed := false
	c.mu.Lock()
	for i := range hits {
		if id, ok := c.ids[hits[i].doc]; ok && c.snap == snap {
			hits[i].ID = id
		} else {
			missed = true
		}
	}
	c.mu.Unlock()
	if !missed {
		return nil
	}
	if err := withIDs(r, hits); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != snap || c.lists == nil {
		c.reset(snap)
	}
	if c.ids == nil || len(c.ids)+len(hits) > maxCachedIDs {
		c.ids = make(map[uint64]string, 1024)
	}
	for _, h := range hits {
		c.ids[h.doc] = h.ID
	}
	return nil
}

// absentFrom reports whether term is in no field of dictFields[from:to]
// in the snapshot r, whose key is snap; false means it may be. Looking a
// term up in the dictionaries costs a walk of their automata, where a
// Bleve term reader sets up postings iterators in every segment.
func (c *postingCache) absentFrom(snap string, r bleveindex.IndexReader, term string, from, to int) bool {
	is, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return false
	}
	dicts, err := c.dictionaries(snap, is)
	if err != nil {
		return false
	}
	return absentIn(dicts, term, from, to)
}

// absentIn is absentFrom over dicts, the cache's dictionaries of a
// snapshot.
func absentIn(dicts [][]segment.TermDictionary, term string, from, to int) bool {
	key := []byte(term)
	// No segments, no dictionaries: nothing holds the term.
	for fi := from; fi < min(to, len(dicts)); fi++ {
		for _, d := range dicts[fi] {
			if in, err := d.Contains(key); err != nil || in {
				return false
			}
		}
	}
	return true
}

// dictFields are the fields whose term dictionaries the cache keeps: the
// text fields, then the word pairs, then the words as written.
var dictFields = func() []string {
	var out []string
	for _, f := range textFields {
		out = append(out, f.name)
	}
	return append(out, fieldPairs, fieldExact)
}()

// dictionaries returns the term dictionaries of dictFields in is's segments.
func (c *postingCache) dictionaries(snap string, is *scorch.IndexSnapshot) ([][]segment.TermDictionary, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != snap {
		c.reset(snap)
	}
	// A segment keeps its ID when Bleve persists it, so the key alone does
	// not tell which object is open: compare them.
	segs := is.Segments()
	same := len(segs) == len(c.segs)
	for i := 0; same && i < len(segs); i++ {
		same = segs[i].Segment() == c.segs[i]
	}
	if !same {
		c.segs, c.dicts = make([]segment.Segment, 0, len(segs)), make([][]segment.TermDictionary, len(dictFields))
		for _, ss := range segs {
			c.segs = append(c.segs, ss.Segment())
		}
		for fi, f := range dictFields {
			for _, sg := range c.segs {
				d, err := sg.Dictionary(f)
				if err != nil {
					c.segs, c.dicts = nil, nil
					return nil, err
				}
				c.dicts[fi] = append(c.dicts[fi], d)
			}
		}
	}
	return c.dicts, nil
}

// reset starts the cache afresh for snapshot snap; c.mu is held.
func (c *postingCache) reset(snap string) {
	c.keep(c.lists)
	if len(c.countedPrev)+len(c.counted) > maxCountedTerms {
		c.countedPrev = nil
	}
	if c.countedPrev == nil {
		c.countedPrev = c.counted
	} else {
		maps.Copy(c.countedPrev, c.counted)
	}
	c.counted = nil
	c.snap, c.lists, c.bytes, c.segs, c.dicts, c.ids = snap, make(map[leafKey]*cached, 256), 0, nil, nil, nil
	c.spans, c.spansKept, c.moves = nil, nil, nil
}

// keep adds the lists of the snapshot being left to those a later one may
// carry over, over the earlier ones of the same keys; past the budget, the
// earlier ones go. c.mu is held.
func (c *postingCache) keep(lists map[leafKey]*cached) {
	if c.prev == nil {
		c.prev = make(map[leafKey]*decoded, len(lists))
	}
	for k, e := range lists {
		d := e.d
		if d.spans == nil {
			continue
		}
		if old := c.prev[k]; old != nil {
			c.prevBytes -= old.bytes()
		}
		c.prev[k] = d
		c.prevBytes += d.bytes()
	}
	if c.prevBytes > c.limit {
		c.prev, c.prevBytes = nil, 0
		if c.bytes <= c.limit {
			c.keep(lists)
		}
	}
}

// source makes a list of a snapshot: whole from its postings; part, when
// set, from one segment's (numbered as the snapshot numbers them), which
// lets a list of an earlier snapshot be carried over (carry.go) when the
// length pivots its values depend on are still avg.
type source struct {
	whole func() (*decoded, error)
	part  func(sp span) (*decoded, error)
	avg   [2]float64
}

// load is the list of k in snapshot snap, read by r: the cache's, else
// carried over from an earlier snapshot's, else made whole, and cached
// ("" snap: made, never cached, as for a reader of no known generation).
func (c *postingCache) load(snap string, r bleveindex.IndexReader, k leafKey, src source) (*decoded, error) {
	if snap == "" {
		d, err := src.whole()
		if err != nil {
			return nil, err
		}
		setTops(k, d)
		return d, nil
	}
	if d := c.get(snap, k); d != nil {
		return d, nil
	}
	d, spans, err := c.carried(snap, r, k, src)
	if err != nil {
		return nil, err
	}
	if d == nil {
		if d, err = src.whole(); err != nil {
			return nil, err
		}
	}
	if spans != nil {
		d.spans, d.avg = spans, src.avg
	}
	setTops(k, d)
	if len(k.term) <= maxCachedTermBytes {
		c.put(snap, k, d)
	}
	return d, nil
}

// cached is a list the cache holds and when it was last asked for.
type cached struct {
	d    *decoded
	used uint64 // the cache's clock then
}

func (c *postingCache) get(snap string, k leafKey) *decoded {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != snap {
		return nil
	}
	e := c.lists[k]
	if e == nil {
		return nil
	}
	c.clock++
	e.used = c.clock
	return e.d
}

func (c *postingCache) put(snap string, k leafKey, d *decoded) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != snap || c.lists == nil {
		c.reset(snap)
	}
	size := d.bytes()
	if size > c.limit {
		return
	}
	if old := c.lists[k]; old != nil { // decoded by two searches at once
		c.bytes -= old.d.bytes()
	}
	if c.bytes+size > c.limit {
		c.evict(c.limit*3/4 - size)
	}
	c.clock++
	c.lists[k] = &cached{d: d, used: c.clock}
	c.bytes += size
}

// evict drops the lists asked for longest ago, about a quarter at a time
// (gencache.OldestQuarter), until the cache holds at most target bytes. A
// request's lists are those of its words, which the next requests sharing
// a word ask for again, so the lists no request has asked for in longest
// are the least likely to be asked for next. c.mu is held.
func (c *postingCache) evict(target int) {
	for c.bytes > target && len(c.lists) > 0 {
		bound := gencache.OldestQuarter(func(yield func(uint64) bool) {
			for _, e := range c.lists {
				if !yield(e.used) {
					return
				}
			}
		})
		for k, e := range c.lists {
			if e.used <= bound {
				c.bytes -= e.d.bytes()
				delete(c.lists, k)
			}
		}
	}
}

// snapshotKey identifies r's doc numbering and statistics, given that r is
// exactly generation gen; "" when r is not a scorch snapshot.
func snapshotKey(r bleveindex.IndexReader, gen uint64) string {
	is, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return ""
	}
	var b strings.Builder
	b.WriteString(strconv.FormatUint(gen, 10))
	for _, s := range is.Segments() {
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(s.Id(), 10))
	}
	return b.String()
}

// decode walks a leaf's postings once: fieldTF of each posting, or with
// bleve Bleve's docScore (idf being the term's in the field).
func decode(ctx context.Context, r bleveindex.IndexReader, term string, field string, idf, avg float64, bleve bool, block int) (*decoded, error) {
	d := &decoded{block: uint32(block)}
	if err := walkPostings(ctx, r, term, field, true, func(n uint64, doc uint32, p *bleveindex.TermFieldDoc) {
		if d.docs == nil {
			d.docs, d.s = make([]uint32, 0, n), make([]float64, 0, n)
		}
		s := fieldTF(p.Freq, p.Norm, avg)
		if bleve {
			s = docScore(idf, p.Freq, p.Norm, avg)
		}
		d.docs = append(d.docs, doc)
		d.s = append(d.s, s)
		d.best = max(d.best, s)
	}); err != nil {
		return nil, err
	}
	d.starts = blockStarts(d.docs, d.block)
	return d, nil
}

// walkPostings calls fn with each posting of term in field, in doc order:
// its doc number and, with stats, its frequency and norm in p (valid
// during the call). n is the reader's count of postings, to size by.
func walkPostings(ctx context.Context, r bleveindex.IndexReader, term, field string, stats bool, fn func(n uint64, doc uint32, p *bleveindex.TermFieldDoc)) error {
	tfr, err := r.TermFieldReader(ctx, []byte(term), field, stats, stats, false)
	if err != nil {
		return fmt.Errorf("index: search: %w", err)
	}
	defer tfr.Close()
	n := tfr.Count()
	var tfd bleveindex.TermFieldDoc
	for i := 0; ; i++ {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("index: search: %w", err)
			}
		}
		next, err := tfr.Next(&tfd)
		if err != nil {
			return fmt.Errorf("index: search: %w", err)
		}
		if next == nil {
			return nil
		}
		num := next.ID.Value()
		if num > math.MaxUint32 {
			return fmt.Errorf("index: search: doc number %d out of range", num)
		}
		fn(n, uint32(num), next)
	}
}

// docScore is Bleve's TermQueryScorer.docScore for BM25, operation for
// operation, so scores agree to the bit.
func docScore(idf float64, freq uint64, norm, avg float64) float64 {
	tf := math.Sqrt(float64(freq))
	fieldLength := 1 / (norm * norm)
	return idf * (tf * search.BM25_k1) /
		(tf + search.BM25_k1*(1-search.BM25_b+(search.BM25_b*fieldLength/avg)))
}

// fieldTF is BM25F's normalised term frequency of a posting: the square
// root of its frequency (as Bleve, so the repeated keywords of fieldSearch
// count less than linearly) over the field's length norm
// (1 − b + b·len/avgLen, avgLen the field's pivot), with Bleve's b. The ranker adds a term's fieldTFs
// over the fields, weighted, and saturates the sum once (term.sat).
func fieldTF(freq uint64, norm, avg float64) float64 {
	fieldLength := 1 / (norm * norm)
	return math.Sqrt(float64(freq)) / (1 - search.BM25_b + search.BM25_b*fieldLength/avg)
}
