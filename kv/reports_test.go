package kv_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
)

// TestGetSorted: reading keys in order through one walking cursor gives
// what a Get of each does, wherever the keys fall: before the first key,
// after the last, between two, repeated, next to each other and further
// apart than the cursor walks before it searches.
func TestGetSorted(t *testing.T) {
	db, err := kv.Open(t.TempDir(), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := func(i int) string { return fmt.Sprintf("k%05d", i) }
	// Every third key of 0..2999 is stored, so each other key is absent.
	if err := db.UpdateReports(func(rb kv.Reports) error {
		for i := 0; i < 3000; i += 3 {
			if err := rb.Put([]byte(key(i)), []byte(fmt.Sprint("v", i))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	span := func(from, to, step int) []string {
		var out []string
		for i := from; i < to; i += step {
			out = append(out, key(i))
		}
		return out
	}
	tests := []struct {
		name string
		keys []string
	}{
		{"none", nil},
		{"one stored", []string{key(300)}},
		{"one absent", []string{key(301)}},
		{"before the first", []string{"a", "k", key(0)}},
		{"after the last", []string{key(2997), key(2998), "z", "zz"}},
		{"every key", span(0, 3000, 1)},
		{"repeated", []string{key(3), key(3), key(4), key(4), key(6), key(6)}},
		{"a few apart", span(0, 3000, 7)},
		{"further apart than the walk", span(1, 3000, 97)},
		{"mixed gaps", append(append(span(0, 40, 1), span(500, 1500, 50)...), span(2990, 3010, 1)...)},
	}
	check := func(rb kv.Reports, keys []string) error {
		var got []string
		if err := rb.GetSorted(keys, func(i int, val []byte) error {
			if len(got) != i {
				return fmt.Errorf("called for key %d after %d keys", i, len(got))
			}
			got = append(got, string(val))
			return nil
		}); err != nil {
			return err
		}
		if len(got) != len(keys) {
			return fmt.Errorf("called for %d keys of %d", len(got), len(keys))
		}
		for i, k := range keys {
			if want := string(rb.Get([]byte(k))); got[i] != want {
				return fmt.Errorf("%s: got %q, Get says %q", k, got[i], want)
			}
		}
		return nil
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.IsSorted(tc.keys) {
				t.Fatal("test keys out of order")
			}
			if err := db.ViewReports(func(rb kv.Reports) error { return check(rb, tc.keys) }); err != nil {
				t.Fatal(err)
			}
		})
	}
	// In a transaction that has written (bbolt then reads some pages from
	// its unpacked nodes), before the commit.
	if err := db.UpdateReports(func(rb kv.Reports) error {
		for i := 1; i < 3000; i += 10 {
			if err := rb.Put([]byte(key(i)), []byte("new")); err != nil {
				return err
			}
		}
		return check(rb, span(0, 3000, 1))
	}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGetSorted reads a sorted sample of 100,000 stored keys (rollup
// keys are about 50 bytes, most of them sharing a long prefix) through
// GetSorted and through a Get each: a third of them (as an entry's day
// keys under a batch of 4,096 searches) and one in 100.
func BenchmarkGetSorted(b *testing.B) {
	db := kvtest.Open(b)
	key := func(i int) string {
		return fmt.Sprintf("e m%d.npm.test\x00\x00\x00\x00Q. urn:air:m%d.npm.test:e%06d", i%22, i%22, i)
	}
	var all []string
	for i := range 100000 {
		all = append(all, key(i))
	}
	slices.Sort(all)
	if err := db.UpdateReports(func(rb kv.Reports) error {
		for _, k := range all {
			if err := rb.Put([]byte(k), []byte("0123456789abc")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for _, every := range []int{3, 100} {
		var sample []string
		for i := 0; i < len(all); i += every {
			sample = append(sample, all[i])
		}
		b.Run(fmt.Sprintf("1in%d/sorted", every), func(b *testing.B) {
			for b.Loop() {
				if err := db.ViewReports(func(rb kv.Reports) error {
					return rb.GetSorted(sample, func(int, []byte) error { return nil })
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(sample)), "ns/key")
		})
		b.Run(fmt.Sprintf("1in%d/get", every), func(b *testing.B) {
			for b.Loop() {
				if err := db.ViewReports(func(rb kv.Reports) error {
					for _, k := range sample {
						rb.Get([]byte(k))
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(sample)), "ns/key")
		})
	}
}
