package index

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestCompactWhenQuiet: an index on disk written in several batches is
// merged into one segment once the writes stop, by itself, and answers
// exactly as before; writes after that are compacted again, once the gap
// since the last compaction has passed.
func TestCompactWhenQuiet(t *testing.T) {
	const gap = 6 * time.Second
	ix, _, err := OpenWith(t.TempDir(), Options{compactQuiet: 300 * time.Millisecond, compactEvery: 20 * time.Millisecond, compactGap: gap})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	words := []string{"weather", "forecast", "exchange", "rate", "currency", "flight", "search", "hotel", "booking", "image", "resize", "translate"}
	put := func(batch int) {
		var docs []Doc
		for i := range 2500 {
			n := batch*2500 + i
			docs = append(docs, Doc{
				ID: fmt.Sprintf("urn:ai:p%d.example:op%d", n%7, n), Name: fmt.Sprintf("op%d", n),
				DisplayName: words[n%len(words)] + " " + words[(n/3)%len(words)],
				Description: fmt.Sprintf("Does %s with %s and %s.", words[n%5], words[(n+4)%len(words)], words[(n*7)%len(words)]),
			})
		}
		if err := ix.Put(docs); err != nil {
			t.Fatal(err)
		}
		// Persisted one by one, the batches stay segments of their own
		// (Bleve merges small segments in memory before it persists).
		if err := ix.Settle(context.Background(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	queries := []string{"weather forecast", "currency exchange rate", "search flight hotel booking", "resize an image", "translate"}
	answers := func() [][]Hit {
		var out [][]Hit
		for _, q := range queries {
			res, err := ix.Search(context.Background(), SearchRequest{Text: q + " zqx", Size: 20, Count: true})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Hits)
		}
		return out
	}
	waitFor := func(want func(int) bool, what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if n := ix.segments(); want(n) {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("%s: still %d segments", what, n)
			}
		}
	}
	for b := range 4 {
		put(b)
	}
	before := ix.segments()
	// Batches of 2,500 docs are above Bleve's floor segment size, and
	// tiers merge only past 10 segments: the writes leave 4.
	if before < compactMinSegments {
		t.Fatalf("the writes left %d segments, too few for the test to mean anything", before)
	}
	want := answers()
	waitFor(func(n int) bool { return n == 1 }, "after the writes")
	compacted := time.Now()
	got := answers()
	for i := range want {
		if !slices.EqualFunc(got[i], want[i], func(a, b Hit) bool { return a.ID == b.ID && a.Raw == b.Raw }) {
			t.Fatalf("%q: after compaction\n%+v\nbefore\n%+v", queries[i], got[i], want[i])
		}
	}
	for b := 4; b < 7; b++ {
		put(b)
	}
	waitFor(func(n int) bool { return n == 1 }, "after more writes")
	// Seen done after the first compaction ended, so a little less than
	// the gap; the writes and the quiet spell alone take under 2 s.
	if since := time.Since(compacted); since < gap/2 {
		t.Fatalf("compacted again %v after the last compaction, within the gap of %v", since, gap)
	}
}

// TestCloseWhileCompacting: closing the index while a merge is under way
// (a server stopping) returns, and the index opened again on the same
// directory answers as before, with every doc.
func TestCloseWhileCompacting(t *testing.T) {
	dir := t.TempDir()
	// The quiet loop is kept out of the way: Compact is started by hand.
	ix, _, err := OpenWith(dir, Options{compactQuiet: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for b := range 4 {
		var docs []Doc
		for i := range 2500 {
			n := b*2500 + i
			docs = append(docs, Doc{ID: fmt.Sprintf("urn:ai:p%d.example:op%d", n%7, n), Name: fmt.Sprintf("op%d", n),
				DisplayName: fmt.Sprintf("weather forecast %d", n%13), Description: fmt.Sprintf("Exchange rate number %d for a currency.", n%17)})
		}
		if err := ix.Put(docs); err != nil {
			t.Fatal(err)
		}
		if err := ix.Settle(context.Background(), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(ix *Index) SearchResult {
		t.Helper()
		res, err := ix.Search(context.Background(), SearchRequest{Text: "currency exchange rate forecast", Size: 10, Count: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	want := ask(ix)
	merging := make(chan error, 1)
	go func() { merging <- ix.Compact(context.Background()) }()
	time.Sleep(5 * time.Millisecond) // the merge has started, or is about to
	closed := make(chan error, 1)
	go func() { closed <- ix.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return within 30 s of a merge under way")
	}
	if err := <-merging; err != nil {
		t.Logf("the merge cut short: %v", err)
	}

	ix, rebuild, err := OpenWith(dir, Options{compactQuiet: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if rebuild {
		t.Fatal("the index was rebuilt after a close during a merge")
	}
	got := ask(ix)
	if got.Total != want.Total || got.Total != 10_000 {
		t.Fatalf("after the restart %d docs match, before %d (want 10000)", got.Total, want.Total)
	}
	if !slices.EqualFunc(got.Hits, want.Hits, func(a, b Hit) bool { return a.ID == b.ID && a.Raw == b.Raw }) {
		t.Fatalf("after the restart:\n%+v\nbefore:\n%+v", got.Hits, want.Hits)
	}
}
