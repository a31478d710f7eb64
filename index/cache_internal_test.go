package index

import (
	"fmt"
	"testing"
)

// TestPostingCacheEvictsLeastRecentlyAsked fills the posting cache past
// its bound and checks that it keeps the lists asked for lately and drops
// those asked for longest ago, rather than emptying itself.
func TestPostingCacheEvictsLeastRecentlyAsked(t *testing.T) {
	list := func() *decoded {
		return &decoded{docs: make([]uint32, 1000), s: make([]float64, 1000), block: 1 << blockBits}
	}
	size := list().bytes()
	c := &postingCache{limit: 10 * size}
	key := func(i int) leafKey { return leafKey{term: fmt.Sprint("t", i), field: 0} }
	for i := range 10 {
		c.put("s1", key(i), list())
	}
	// Lists 0-4 asked for again: 5-9 are now the longest unasked.
	for i := range 5 {
		if c.get("s1", key(i)) == nil {
			t.Fatalf("list %d gone before the bound was reached", i)
		}
	}
	c.put("s1", key(10), list()) // past the bound
	if c.bytes > c.limit {
		t.Fatalf("cache holds %d bytes over its bound %d", c.bytes, c.limit)
	}
	for i := range 5 {
		if c.get("s1", key(i)) == nil {
			t.Errorf("list %d, asked for lately, evicted", i)
		}
	}
	if c.get("s1", key(10)) == nil {
		t.Error("the new list is not cached")
	}
	kept := 0
	for i := 5; i < 10; i++ {
		if c.get("s1", key(i)) != nil {
			kept++
		}
	}
	if kept == 5 {
		t.Error("nothing evicted")
	}
	if want := 10 - 1 - 10/4; len(c.lists) < want-1 {
		t.Errorf("%d lists left of 11: evicted more than a quarter", len(c.lists))
	}
	// A list put twice (two searches decoding it at once) counts once.
	before := c.bytes
	c.put("s1", key(10), list())
	if c.bytes != before {
		t.Errorf("bytes %d after putting a cached list again, want %d", c.bytes, before)
	}
}
