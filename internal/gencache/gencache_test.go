package gencache_test

import (
	"strconv"
	"testing"

	"github.com/ardx-dev/ardx/internal/gencache"
)

func TestCache(t *testing.T) {
	c := gencache.New[int](3)
	for i, k := range []string{"a", "b", "c", "d"} {
		c.Put(1, k, i)
	}
	if _, ok := c.Get(1, "a"); ok || c.Len() > 3 {
		t.Fatalf("cache over its limit: %d values", c.Len())
	}
	if v, ok := c.Get(1, "d"); !ok || v != 3 {
		t.Fatalf("Get(1, d) = %d, %v; want 3", v, ok)
	}
	if _, ok := c.Get(2, "d"); ok {
		t.Fatal("a value of generation 1 answered for generation 2")
	}
	c.Put(2, "e", 4)
	c.Put(1, "f", 5) // computed before generation 2: dropped
	if _, ok := c.Get(2, "e"); !ok {
		t.Fatal("generation 2 lost its value to a late generation-1 put")
	}
	if _, ok := c.Get(1, "f"); ok {
		t.Fatal("a stale put took effect")
	}
}

func TestAdmit(t *testing.T) {
	c := gencache.New[int](4)
	if c.Admit("q") {
		t.Fatal("a first sighting was admitted")
	}
	if !c.Admit("q") {
		t.Fatal("a second sighting was not admitted")
	}
	// A key seen once is not admitted on that sighting, however many
	// other keys come first (64-bit hashes: no collision expected).
	admitted := 0
	for i := range 1000 {
		if c.Admit(string(rune('a'+i%26)) + string(rune(i))) {
			admitted++
		}
	}
	if admitted != 0 {
		t.Fatalf("%d of 1000 first sightings admitted", admitted)
	}
}

// TestCacheKeepsWhatIsAskedFor checks that a full cache makes room by
// dropping the values asked for longest ago, not all of them: a value
// asked for between every ten puts of new ones survives a stream of
// them a hundred times the cache's size, and the cache stays within its
// limit, never far under it.
func TestCacheKeepsWhatIsAskedFor(t *testing.T) {
	c := gencache.New[int](100)
	c.Put(1, "hot", -1)
	for i := range 10_000 {
		c.Put(1, "cold"+strconv.Itoa(i), i)
		if n := c.Len(); n > 100 || i >= 100 && n < 50 {
			t.Fatalf("%d values after %d puts into a cache of 100", n, i+2)
		}
		if i%10 == 0 {
			if v, ok := c.Get(1, "hot"); !ok || v != -1 {
				t.Fatalf("the value asked for every ten puts was dropped after %d puts", i+2)
			}
		}
	}
}
