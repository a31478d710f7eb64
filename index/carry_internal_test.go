package index

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/ardx-dev/ardx/internal/gencache"
)

// TestCarriedListsMatchDecoded writes to an index on disk between rounds of
// searches, adding, updating and deleting docs (Bleve merges segments of
// docs this small at once: the lists are carried over deletions and
// decoded from merged segments; TestCarryMovesSegments moves segments),
// and compacting, and checks after each write
// that every list the posting cache holds, carried over from the snapshot
// before or not, equals the list decoded afresh, and that the searches
// rank exactly as with a cache that starts empty.
func TestCarriedListsMatchDecoded(t *testing.T) {
	ix, _, err := OpenWith(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ix.blockDocs = 64 // lists span blocks: starts are checked
	rng := rand.New(rand.NewPCG(7, 19))
	words := strings.Fields(`weather forecast city rain snow wind map route traffic train flight hotel
		booking price stock market news sport score music song playlist video movie actor recipe food
		calorie health doctor drug email calendar meeting note file folder image photo translate
		language currency exchange rate crypto wallet payment invoice tax search web page github issue`)
	text := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	doc := func(i int) Doc {
		return Doc{ID: fmt.Sprintf("urn:air:p%d.test:e%d", i%7, i), Name: fmt.Sprintf("e%d", i),
			DisplayName: text(1 + rng.IntN(3)), Description: text(4 + rng.IntN(12)), Publisher: fmt.Sprintf("p%d.test", i%7)}
	}
	put := func(ids ...int) {
		docs := make([]Doc, 0, len(ids))
		for _, i := range ids {
			docs = append(docs, doc(i))
		}
		if err := ix.Put(docs); err != nil {
			t.Fatal(err)
		}
	}
	next := 0
	for range 3 {
		var ids []int
		for range 150 {
			ids = append(ids, next)
			next++
		}
		put(ids...)
		if err := ix.Settle(t.Context(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Settle(t.Context(), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var queries []string
	for range 40 {
		queries = append(queries, text(2+rng.IntN(5)))
	}
	search := func() []SearchResult {
		var out []SearchResult
		for _, q := range queries {
			res, err := ix.search(t.Context(), SearchRequest{Text: q}, 0, 10) // past the result cache
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res)
		}
		return out
	}
	carries := 0
	for round := range 16 {
		search() // the lists of this snapshot
		switch round % 4 {
		case 0: // new docs: a segment appended
			var ids []int
			for range 1 + rng.IntN(20) {
				ids = append(ids, next)
				next++
			}
			put(ids...)
		case 1: // updates: deletions in older segments, a new one
			var ids []int
			for range 1 + rng.IntN(30) {
				ids = append(ids, rng.IntN(next))
			}
			put(ids...)
		case 2: // deletions alone
			var ids []string
			for range 1 + rng.IntN(10) {
				ids = append(ids, doc(rng.IntN(next)).ID)
			}
			if round == 2 {
				// The second batch whole: its segment goes, and the
				// segments after it are numbered from lower.
				for i := 150; i < 300; i++ {
					ids = append(ids, doc(i).ID)
				}
			}
			if err := ix.Delete(ids); err != nil {
				t.Fatal(err)
			}
		case 3: // every segment merged into one: all renumbered
			if round == 7 {
				if err := ix.Compact(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Persisting and merging change the snapshot too: both searches
		// below must read the one the write left.
		if err := ix.Settle(t.Context(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		carried := search()
		// The same searches with caches that start empty decode every
		// list whole and count every term afresh; the carried cache is
		// put back for the next round.
		cc, dfs := ix.postings, ix.dfs
		ix.postings, ix.dfs = &postingCache{limit: postingCacheBytes}, gencache.New[queryTerm](dfCacheSize)
		fresh := search()
		fc := ix.postings
		ix.postings, ix.dfs = cc, dfs
		if cc.snap != fc.snap {
			t.Fatalf("round %d: the caches are of different snapshots", round)
		}
		carries = cc.carries
		for k, want := range fc.lists {
			if got := cc.lists[k]; got == nil || !sameList(got.d, want.d) {
				t.Fatalf("round %d: list %v: carried %+v, decoded %+v", round, k, got, want)
			}
		}
		for term, want := range fc.counted {
			if got := cc.counted[term]; got == nil || !slices.Equal(got.sum(), want.sum()) || !slices.Equal(got.per, want.per) {
				t.Fatalf("round %d: counts of %q: carried %+v, counted afresh %+v", round, term, got, want)
			}
		}
		if !reflect.DeepEqual(carried, fresh) {
			t.Fatalf("round %d: searches with carried lists rank differently from fresh ones:\n%v\n%v", round, carried, fresh)
		}
	}
	if carries < 100 {
		t.Fatalf("%d lists carried over in 16 writes: the carrying is not exercised", carries)
	}
	// Terms counted from the snapshot before, some over docs deleted since
	// (updates, deletions) looked up in the term's list.
	if ix.postings.countsCarried < 100 || ix.postings.countsListed < 20 {
		t.Fatalf("%d terms' counts carried over, %d segments' lost docs looked up in lists: not exercised",
			ix.postings.countsCarried, ix.postings.countsListed)
	}
	t.Logf("%d lists carried over, %d terms' counts (%d segments through lists)", carries, ix.postings.countsCarried, ix.postings.countsListed)
}

// sameList reports whether two lists hold the same postings and values,
// and are of the same kind (a union has s2).
func sameList(a, b *decoded) bool {
	return a != nil && b != nil && slices.Equal(a.docs, b.docs) && slices.Equal(a.s, b.s) && slices.Equal(a.s2, b.s2) &&
		(a.s2 == nil) == (b.s2 == nil) && slices.Equal(a.starts, b.starts) && a.best == b.best && a.best2 == b.best2 &&
		a.block == b.block && (a.spans == nil) == (b.spans == nil) && a.avg == b.avg
}

// TestCarryMovesSegments carries a list over a change of segments that
// Bleve's merging makes at random: a segment gone (its docs deleted), the
// next one numbered from lower and with docs deleted since, and a merged
// segment new to the list, decoded.
func TestCarryMovesSegments(t *testing.T) {
	del := func(xs ...uint32) *roaring.Bitmap { return roaring.BitmapOf(xs...) }
	old := []span{{id: 1, from: 0, count: 4}, {id: 2, from: 4, count: 3, del: del(0)}, {id: 3, from: 7, count: 5}}
	cur := []span{{id: 2, from: 0, count: 3, del: del(0, 2)}, {id: 9, from: 3, count: 2}, {id: 3, from: 5, count: 5}}
	prev := &decoded{block: 4, docs: []uint32{1, 3, 5, 6, 7, 10}, s: []float64{1, 2, 3, 4, 5, 6}, starts: []int32{0}}
	moves := planMoves(old, cur)
	want := []move{{old: 1, dropped: []uint32{2}}, {old: -1}, {old: 2}}
	if !reflect.DeepEqual(moves, want) {
		t.Fatalf("moves %+v, want %+v", moves, want)
	}
	part := func(sp span) (*decoded, error) {
		if sp.id != 9 {
			t.Fatalf("segment %d decoded, carried", sp.id)
		}
		return &decoded{docs: []uint32{sp.from + 1}, s: []float64{9}}, nil
	}
	got, err := carry(prev, old, cur, moves, part)
	if err != nil {
		t.Fatal(err)
	}
	// Segment 2's doc 1 (5 before) is 1 now, its doc 2 is deleted; the
	// merged segment's doc is 4; segment 3's docs 0 and 3 are 5 and 8.
	if !slices.Equal(got.docs, []uint32{1, 4, 5, 8}) || !slices.Equal(got.s, []float64{3, 9, 5, 6}) ||
		!slices.Equal(got.starts, []int32{0, 1, 3, 4}) || got.best != 9 {
		t.Fatalf("carried %+v", got)
	}
	// A list untouched by the write is shared, not copied; one whose
	// segment moved down (the one before it went, holding none of its
	// docs) is renumbered.
	same, err := carry(prev, old, old, planMoves(old, old), part)
	if err != nil {
		t.Fatal(err)
	}
	if &same.docs[0] != &prev.docs[0] || &same.s[0] != &prev.s[0] {
		t.Fatalf("an unchanged list was copied")
	}
	moved := &decoded{block: 4, docs: []uint32{5, 6}, s: []float64{1, 2}, starts: []int32{0}}
	down := []span{{id: 2, from: 0, count: 3, del: old[1].del}}
	got, err = carry(moved, old[:2], down, planMoves(old[:2], down), part)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.docs, []uint32{1, 2}) || !slices.Equal(got.s, []float64{1, 2}) {
		t.Fatalf("moved %+v", got)
	}
	// A doc deleted before and not now: not the same segment, decoded.
	if m := planMoves([]span{{id: 5, count: 3, del: del(1)}}, []span{{id: 5, count: 3, del: del(2)}}); m[0].old != -1 {
		t.Fatalf("moves %+v", m)
	}
}

// TestCarryWhileWriting searches from several goroutines while another
// writes, so that lists are carried over while other searches load, carry
// and reset the cache (run with -race); every search must succeed, and
// each search of a doc's own words must find it once written.
func TestCarryWhileWriting(t *testing.T) {
	ix, _, err := OpenWith(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	words := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike")
	docOf := func(i int) Doc {
		return Doc{ID: fmt.Sprintf("urn:air:w.test:e%d", i), Name: fmt.Sprintf("e%d", i), Publisher: "w.test", Tags: []string{words[i%3]}, // every doc tagged: categories weigh in too
			DisplayName: words[i%len(words)] + " " + words[(i/3)%len(words)], Description: fmt.Sprintf("zz%dzz %s %s", i, words[(i/2)%len(words)], words[(i/5)%len(words)])}
	}
	var docs []Doc
	for i := range 200 {
		docs = append(docs, docOf(i))
	}
	if err := ix.Put(docs); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { // before the index closes, also when the test fails
		close(stop)
		wg.Wait()
	}()
	for g := range 4 {
		wg.Go(func() {
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				q := words[i%len(words)] + " " + words[(i*7)%len(words)] + " " + words[(i*3)%len(words)]
				if _, err := ix.search(t.Context(), SearchRequest{Text: q}, 0, 10); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := 200; i < 260; i++ {
		if err := ix.Put([]Doc{docOf(i)}); err != nil {
			t.Fatal(err)
		}
		res, err := ix.search(t.Context(), SearchRequest{Text: fmt.Sprintf("zz%dzz", i)}, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) != 1 || res.Hits[0].ID != docOf(i).ID {
			t.Fatalf("doc %d written, its own word finds %v", i, res.Hits)
		}
	}
}

// TestCountsDropHeld: a segment's counts lose the docs deleted since that
// hold the term, as the term's list of the same snapshot says, per field;
// a list of another snapshot is not used.
func TestCountsDropHeld(t *testing.T) {
	o := span{id: 2, from: 10, count: 6}
	union := &decoded{docs: []uint32{3, 11, 12, 14}, s: []float64{1, 0.5, 0, 2}, s2: []float64{0, 1, 3, 0.25}}
	name := &decoded{docs: []uint32{11, 14}, s: []float64{1, 1}}
	cases := []struct {
		name    string
		was     []uint32
		list    *decoded
		field   int
		dropped []uint32 // segment-local
		want    []uint32 // nil: cannot tell
	}{
		{"nothing dropped, no list", []uint32{2, 3}, nil, 0, nil, []uint32{2, 3}},
		{"dropped, no list", []uint32{2, 3}, nil, 0, []uint32{1}, nil},
		{"union: a doc in both fields", []uint32{2, 3}, union, bothFields, []uint32{1}, []uint32{1, 2}},
		{"union: a doc in the second field only", []uint32{2, 3}, union, bothFields, []uint32{2}, []uint32{2, 2}},
		{"union: docs without the term", []uint32{2, 3}, union, bothFields, []uint32{0, 3, 5}, []uint32{2, 3}},
		{"union: not what the counts said", []uint32{0, 3}, union, bothFields, []uint32{1}, nil},
		{"one field's list", []uint32{2, 0}, name, 0, []uint32{1, 4}, []uint32{0, 0}},
		{"a doc of another segment's number", []uint32{2, 3}, union, bothFields, []uint32{6}, []uint32{2, 3}},
	}
	for _, c := range cases {
		got, ok := dropHeld(c.was, c.list, c.field, o, c.dropped)
		if ok != (c.want != nil) || (ok && !slices.Equal(got, c.want)) {
			t.Errorf("%s: %v %v, want %v", c.name, got, ok, c.want)
		}
	}
	a := []span{{id: 1, count: 4}}
	b := []span{{id: 1, count: 4}} // the same segment, another snapshot's spans
	c := &postingCache{prev: map[leafKey]*decoded{{"x", bothFields}: {docs: []uint32{1}, s: []float64{1}, s2: []float64{0}, spans: a}}}
	if d, _ := c.listIn("x", b); d != nil {
		t.Error("a list of another snapshot was used")
	}
	if d, f := c.listIn("x", a); d == nil || f != bothFields {
		t.Errorf("the list of the snapshot: %v %d", d, f)
	}
}
