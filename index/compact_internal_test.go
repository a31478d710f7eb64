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
	if before < compactMinSegments {
		t.Skipf("the writes left %d segments; nothing to compact", before)
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
