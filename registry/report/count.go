package report

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"

	"github.com/ardx-dev/ardx/kv"
)

// Rollup counts recs, a batch of the demand log in log order, into the
// reports bucket; kv.RollupSearches commits what it writes in the
// transaction that takes recs off the log's list of records to count, so
// the rollups and the log never diverge. Private results are not counted.
// A batch writes exactly what counting its records one by one would. It
// reads each key before it writes it, and calls rb.Pace once per record
// counted and per text counted, as RollupSearches asks.
//
// A batch reads the store in key order, not a key at a time (under unique
// texts nearly every text key is new, and a miss costs a search from the
// bucket's root like a hit): the figures that only add up (an entry's,
// a domain's day) are counted from zero and added to the stored ones as
// they are written; the texts, whose keeping depends on what the store
// holds (at most maxTextsPerDay per domain and day, the first asked), are
// read ahead in one ordered pass and then counted search by search.
func Rollup(recs []kv.SearchRecord, rb kv.Reports) error {
	results := 0
	for i := range recs {
		results += len(recs[i].Results)
	}
	w := newRollupWriter(rb, min(results, 1<<15))
	w.marks = readMarks(rb)
	searches, err := w.countFigures(recs)
	if err != nil {
		return err
	}
	if err := w.readTexts(); err != nil {
		return err
	}
	for i := range searches {
		w.countTexts(&searches[i])
		w.rb.Pace()
	}
	return w.flush()
}

// newRollupWriter makes a writer for about n keys of each kind.
func newRollupWriter(rb kv.Reports, n int) *rollupWriter {
	return &rollupWriter{rb: rb, entries: make(map[string]*entryVal, n), domains: map[string]*domainVal{},
		queries: make(map[string]*queryVal, n), zeros: map[string]*zeroVal{}, counts: map[string]*int64{}}
}

// rollupWriter counts a batch of searches and writes the counts.
type rollupWriter struct {
	rb    kv.Reports
	marks marks // which levels a day's search counts into (compact.go)
	// entries and domains hold what this batch adds; flush adds the
	// stored values.
	entries map[string]*entryVal
	domains map[string]*domainVal
	// queries and zeros hold stored values (read ahead) with what this
	// batch adds; a text neither stored nor (yet) kept is absent. texts
	// lists both.
	queries map[string]*queryVal
	zeros   map[string]*zeroVal
	texts   []text
	counts  map[string]*int64 // distinct-text counters touched
	key     []byte            // scratch for building keys
}

// text is a query or zero-result text's key and value.
type text struct {
	key string
	q   *queryVal
	z   *zeroVal
}

// search is what the text counting needs of one record.
type search struct {
	rec   *kv.SearchRecord
	day   Day
	shown string
	hits  []domainHit // in the order of the domains' first results
	// The values it counts into, per hit and level counted (or per level
	// for a zero-result search): its text's, then its block's other
	// texts'.
	queries []*queryVal
	zeros   []*zeroVal
}

// domainHit is a domain's best rank in one search's public results.
type domainHit struct {
	pub  string
	best int
}

// countFigures counts the entries' and domains' figures of recs and lists
// the texts they may count into (their own and their blocks' other
// texts), for readTexts.
func (w *rollupWriter) countFigures(recs []kv.SearchRecord) ([]search, error) {
	searches := make([]search, len(recs))
	// Backing stores of every search's slices; a search's part is capped,
	// so appends for later searches cannot overwrite it.
	var hits []domainHit
	var queries []*queryVal
	var zeros []*zeroVal
	for i := range recs {
		w.rb.Pace()
		rec := &recs[i]
		if rec.Time.IsZero() {
			return nil, errors.New("report: search record without time")
		}
		s := &searches[i]
		s.rec, s.day = rec, DayOf(rec.Time)
		norm := NormalizeQuery(rec.Text)
		s.shown = truncRunes(strings.TrimSpace(rec.Text), maxTextLen)
		if len(rec.Results) == 0 {
			if rec.Offset != 0 {
				continue
			}
			first := len(zeros)
			for li, size := range levels {
				if w.marks.counted(li, s.day) {
					block := uint32(s.day) / size
					w.key = appendZeroKey(w.key[:0], uint8(li), block, norm)
					zeros = append(zeros, w.listZero(w.key))
					w.key = appendZeroKey(w.key[:0], uint8(li), block, otherTexts)
					zeros = append(zeros, w.listZero(w.key))
				}
			}
			s.zeros = zeros[first:len(zeros):len(zeros)]
			continue
		}
		first := len(hits)
		for _, r := range rec.Results {
			if r.Private {
				continue
			}
			pub := PublisherOf(r.ID)
			if pub == "" || r.Rank < 1 {
				continue
			}
			h := slices.IndexFunc(hits[first:], func(h domainHit) bool { return h.pub == pub })
			if h < 0 {
				hits = append(hits, domainHit{pub: pub, best: r.Rank})
			} else if r.Rank < hits[first+h].best {
				hits[first+h].best = r.Rank
			}
			for li, size := range levels {
				if w.marks.counted(li, s.day) {
					w.key = appendBlockPrefix(w.key[:0], kindEntry, pub, uint8(li), uint32(s.day)/size)
					w.key = append(w.key, r.ID...)
					w.entry(w.key).of(rec.Probe).addRank(r.Rank)
				}
			}
		}
		s.hits = hits[first:len(hits):len(hits)]
		firstQuery := len(queries)
		for _, h := range s.hits {
			w.key = appendDomainKey(w.key[:0], h.pub, s.day)
			d := w.domain(w.key)
			qs := QueryStats{Searches: 1, BestSum: int64(h.best), Best: int64(h.best)}
			if rec.Probe {
				d.Probe.add(qs)
			} else {
				d.Searches.add(qs)
			}
			for li, size := range levels {
				if w.marks.counted(li, s.day) {
					w.key = appendBlockPrefix(w.key[:0], kindQuery, h.pub, uint8(li), uint32(s.day)/size)
					n := len(w.key)
					w.key = append(w.key, norm...)
					queries = append(queries, w.listQuery(w.key))
					w.key = append(w.key[:n], otherTexts...)
					queries = append(queries, w.listQuery(w.key))
				}
			}
		}
		s.queries = queries[firstQuery:len(queries):len(queries)]
	}
	return searches, nil
}

// listQuery returns the value of query key, listing a new one, absent
// until read or kept, in texts.
func (w *rollupWriter) listQuery(key []byte) *queryVal {
	v := w.queries[string(key)]
	if v == nil {
		k := string(key)
		v = &queryVal{absent: true}
		w.queries[k] = v
		w.texts = append(w.texts, text{key: k, q: v})
	}
	return v
}

// listZero is listQuery's twin for zero-result texts.
func (w *rollupWriter) listZero(key []byte) *zeroVal {
	v := w.zeros[string(key)]
	if v == nil {
		k := string(key)
		v = &zeroVal{absent: true}
		w.zeros[k] = v
		w.texts = append(w.texts, text{key: k, z: v})
	}
	return v
}

// readTexts reads the listed texts' stored values in key order.
func (w *rollupWriter) readTexts() error {
	slices.SortFunc(w.texts, func(a, b text) int { return strings.Compare(a.key, b.key) })
	keys := make([]string, len(w.texts))
	for i, t := range w.texts {
		keys[i] = t.key
	}
	return w.rb.GetSorted(keys, func(i int, raw []byte) error {
		if raw == nil {
			return nil
		}
		t := w.texts[i]
		if t.z != nil {
			t.z.absent = false
			return decodeZeroVal(raw, t.z)
		}
		t.q.absent = false
		return decodeQueryVal(raw, t.q)
	})
}

// countTexts counts s's text, per domain in its results with the
// publishers ranked above it, or as a zero-result text.
func (w *rollupWriter) countTexts(s *search) {
	rec := s.rec
	j := 0 // into s.queries or s.zeros
	if len(rec.Results) == 0 {
		if rec.Offset != 0 {
			return
		}
		for li, size := range levels {
			if !w.marks.counted(li, s.day) {
				continue
			}
			v := s.zeros[j]
			if v.absent {
				w.key = appendCountKey(w.key[:0], kindZero, "", uint8(li), uint32(s.day)/size)
				if w.admit(w.key, size) {
					v.keep(s.shown, rec.Filter)
				} else if v = s.zeros[j+1]; v.absent {
					v.keep("", nil)
				}
			}
			j += 2
			if rec.Probe {
				v.Probe++
			} else {
				v.Searches++
			}
		}
		return
	}
	for _, h := range s.hits {
		qs := QueryStats{Searches: 1, BestSum: int64(h.best), Best: int64(h.best)}
		for li, size := range levels {
			if !w.marks.counted(li, s.day) {
				continue
			}
			v := s.queries[j]
			if v.absent {
				w.key = appendCountKey(w.key[:0], kindQuery, h.pub, uint8(li), uint32(s.day)/size)
				if w.admit(w.key, size) {
					v.keep(s.shown)
				} else if v = s.queries[j+1]; v.absent {
					v.keep("")
				}
			}
			j += 2
			m := &v.Above
			if rec.Probe {
				v.Probe.add(qs)
				m = &v.ProbeAbve
			} else {
				v.Searches.add(qs)
			}
			for _, o := range s.hits {
				if o.pub == h.pub || o.best >= h.best {
					continue
				}
				if *m == nil {
					*m = map[string]int64{}
				}
				pub := o.pub
				if _, ok := (*m)[pub]; !ok && len(*m) >= maxAbove {
					pub = ""
				}
				(*m)[pub]++
			}
		}
	}
}

// keep makes an absent text kept, as first asked.
func (v *queryVal) keep(shown string) {
	v.absent = false
	v.Shown = shown
}

// keep makes an absent zero-result text kept, as first asked, with the
// filter values it was asked with.
func (v *zeroVal) keep(shown string, filter map[string][]string) {
	v.absent = false
	v.Shown = shown
	for _, k := range []string{"type", "tags", "capabilities"} {
		for _, t := range filter[k] {
			if len(v.Tags) < 16 {
				v.Tags = append(v.Tags, truncRunes(strings.ToLower(t), 100))
			}
		}
	}
}

func (w *rollupWriter) entry(key []byte) *entryVal {
	v := w.entries[string(key)]
	if v == nil {
		v = &entryVal{}
		w.entries[string(key)] = v
	}
	return v
}

func (w *rollupWriter) domain(key []byte) *domainVal {
	v := w.domains[string(key)]
	if v == nil {
		v = &domainVal{}
		w.domains[string(key)] = v
	}
	return v
}

// admit reports whether one more distinct text fits the bound of the
// block whose counter key is ck (and counts it).
func (w *rollupWriter) admit(ck []byte, size uint32) bool {
	n := w.counts[string(ck)]
	if n == nil {
		n = new(int64)
		if raw := w.rb.Get(ck); raw != nil {
			*n, _ = binary.Varint(raw)
		}
		w.counts[string(ck)] = n
	}
	if *n >= int64(maxTextsPerDay)*int64(size) {
		return false
	}
	*n++
	return true
}

// flush writes every touched key in key order, the entries' and domains'
// counts added to the stored ones. bbolt splits a page's node only when
// the transaction commits, so keys put in random order into one node each
// shift all those put before them: a batch's cost grew with the square of
// its new keys in one block. In key order, each put lands past the ones
// before it.
func (w *rollupWriter) flush() error {
	p := &putter{rb: w.rb}
	for _, c := range sorted(w.counts) {
		if err := p.put(c.key, binary.AppendVarint(p.next(), *c.v)); err != nil {
			return err
		}
	}
	if err := writeSums(p, w.domains, decodeDomainVal, encodeDomainVal, func(v, stored *domainVal) {
		v.Searches.add(stored.Searches)
		v.Probe.add(stored.Probe)
	}); err != nil {
		return err
	}
	if err := writeSums(p, w.entries, decodeEntryVal, encodeEntryVal, func(v, stored *entryVal) {
		v.Searches.Add(stored.Searches)
		v.Probe.Add(stored.Probe)
	}); err != nil {
		return err
	}
	// Sorted by readTexts, unless a block is being built (compact.go).
	byKey := func(a, b text) int { return strings.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(w.texts, byKey) {
		slices.SortFunc(w.texts, byKey)
	}
	for _, t := range w.texts {
		var err error
		switch {
		case t.z != nil && !t.z.absent:
			err = p.put(t.key, encodeZeroVal(p.next(), t.z))
		case t.q != nil && !t.q.absent:
			err = p.put(t.key, encodeQueryVal(p.next(), t.q))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// putter puts a batch's values, encoded one after another into one
// buffer: bbolt keeps a put's value (not a copy) until the commit.
type putter struct {
	rb   kv.Reports
	key  []byte // scratch: bbolt copies a put's key
	vals []byte
}

// next is where to append the next value: the buffer's free space, a new
// buffer's (twice as large, up to 64 KiB) when little is left.
func (p *putter) next() []byte {
	if cap(p.vals)-len(p.vals) < 1<<10 {
		p.vals = make([]byte, 0, min(max(2*cap(p.vals), 4<<10), 64<<10))
	}
	return p.vals[len(p.vals):]
}

// put stores val, appended to next(), under key.
func (p *putter) put(key string, val []byte) error {
	if len(val) > cap(p.next()) { // appending moved it: it starts a new buffer
		p.vals = val
	} else {
		p.vals = p.vals[:len(p.vals)+len(val)]
	}
	p.key = append(p.key[:0], key...)
	return p.rb.Put(p.key, val[:len(val):len(val)])
}

// writeSums writes each of m's values (what a batch adds) plus the value
// stored under its key, in key order.
func writeSums[V any](p *putter, m map[string]*V, decode func([]byte, *V) error, encode func([]byte, *V) []byte, add func(v, stored *V)) error {
	vals := sorted(m)
	keys := make([]string, len(vals))
	for i, kv := range vals {
		keys[i] = kv.key
	}
	stored := new(V)
	if err := p.rb.GetSorted(keys, func(i int, raw []byte) error {
		if raw == nil {
			return nil
		}
		var zero V
		*stored = zero
		if err := decode(raw, stored); err != nil {
			return err
		}
		add(vals[i].v, stored)
		return nil
	}); err != nil {
		return err
	}
	for _, kv := range vals {
		if err := p.put(kv.key, encode(p.next(), kv.v)); err != nil {
			return err
		}
	}
	return nil
}

type keyed[V any] struct {
	key string
	v   *V
}

// sorted is m's keys and values in key order.
func sorted[V any](m map[string]*V) []keyed[V] {
	out := make([]keyed[V], 0, len(m))
	for k, v := range m {
		out = append(out, keyed[V]{k, v})
	}
	slices.SortFunc(out, func(a, b keyed[V]) int { return strings.Compare(a.key, b.key) })
	return out
}
