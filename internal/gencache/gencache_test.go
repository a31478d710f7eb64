package gencache_test

import (
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
