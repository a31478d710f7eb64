package kv

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// counterRollup adds the number of records it is handed to a counter
// stored under key, reading the stored value first as report.Rollup
// does, and calls Pace once per record.
func counterRollup(key []byte, calls *int) func([]SearchRecord, Reports) error {
	return func(recs []SearchRecord, rb Reports) error {
		*calls++
		var n uint64
		if raw := rb.Get(key); raw != nil {
			n = binary.BigEndian.Uint64(raw)
		}
		for range recs {
			rb.Pace()
			n++
		}
		return rb.Put(key, binary.BigEndian.AppendUint64(nil, n))
	}
}

func storedCounter(t *testing.T, db *DB, key []byte) uint64 {
	t.Helper()
	var n uint64
	if err := db.ViewReports(func(rb Reports) error {
		if raw := rb.Get(key); raw != nil {
			n = binary.BigEndian.Uint64(raw)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// betweenPasses runs fn between the two passes of the next rollup that
// has records to count; the test fails if none does.
func betweenPasses(t *testing.T, fn func()) {
	t.Helper()
	ran := false
	rollupBetweenPasses = func() {
		rollupBetweenPasses = nil
		ran = true
		fn()
	}
	t.Cleanup(func() {
		rollupBetweenPasses = nil
		if !ran {
			t.Error("no rollup reached its second pass")
		}
	})
}

func openTemp(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "data"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func records(from, n int) []SearchRecord {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var recs []SearchRecord
	for i := from; i < from+n; i++ {
		recs = append(recs, SearchRecord{Time: base.Add(time.Duration(i) * time.Second), Text: fmt.Sprint("q", i)})
	}
	return recs
}

// TestRollupSearchesWritesInItsSecondPass: the first pass reads and
// paces in a read transaction and writes nothing; the counts land with the
// records taken off the list.
func TestRollupSearchesWritesInItsSecondPass(t *testing.T) {
	db := openTemp(t)
	key := []byte("counter")
	if err := db.AppendSearches(records(0, 300)); err != nil {
		t.Fatal(err)
	}
	paced := 0
	calls := 0
	betweenPasses(t, func() {
		if got := storedCounter(t, db, key); got != 0 {
			t.Errorf("the first pass wrote %d", got)
		}
	})
	n, err := db.RollupSearches(1000, counterRollup(key, &calls), func() { paced++ })
	if err != nil || n != 300 {
		t.Fatalf("rolled up %d: %v", n, err)
	}
	if got := storedCounter(t, db, key); got != 300 || calls != 1 {
		t.Fatalf("counter %d after %d rollup calls; want 300 after 1", got, calls)
	}
	if paced < 300 {
		t.Fatalf("paced %d times for 300 records", paced)
	}
	if n, err := db.RollupSearches(1000, counterRollup(key, &calls), nil); err != nil || n != 0 {
		t.Fatalf("records left listed: %d, %v", n, err)
	}
}

// TestRollupSearchesCountsAgainWhenWrittenMeanwhile: a write to the
// reports bucket between the passes (another writer's) makes the second
// pass count again, so neither that write nor the rollup's is lost. A
// record appended meanwhile with an earlier time is listed first, so the
// second pass counts it and leaves the last of the five for the next.
func TestRollupSearchesCountsAgainWhenWrittenMeanwhile(t *testing.T) {
	db := openTemp(t)
	key := []byte("counter")
	if err := db.AppendSearches(records(0, 5)); err != nil {
		t.Fatal(err)
	}
	betweenPasses(t, func() {
		if err := db.UpdateReports(func(rb Reports) error {
			return rb.Put(key, binary.BigEndian.AppendUint64(nil, 100))
		}); err != nil {
			t.Error(err)
		}
		// Timed before the records being counted: listed among them.
		if err := db.AppendSearches(records(-10, 1)); err != nil {
			t.Error(err)
		}
	})
	calls := 0
	n, err := db.RollupSearches(5, counterRollup(key, &calls), nil)
	if err != nil || n != 5 {
		t.Fatalf("rolled up %d: %v", n, err)
	}
	if got := storedCounter(t, db, key); got != 105 || calls != 2 {
		t.Fatalf("counter %d after %d rollup calls; want 105 after 2 (counted again)", got, calls)
	}
	n, err = db.RollupSearches(5, counterRollup(key, &calls), nil)
	if err != nil || n != 1 || storedCounter(t, db, key) != 106 {
		t.Fatalf("the record appended meanwhile: rolled up %d (%v), counter %d; want 1, 106", n, err, storedCounter(t, db, key))
	}
}

// TestRollupSearchesKeepsTheListedRecordsItDidNotCount: records appended
// between the passes that sort after the ones counted stay listed, and
// the counted ones leave the list, whether or not the second pass counts
// again.
func TestRollupSearchesKeepsTheListedRecordsItDidNotCount(t *testing.T) {
	for _, meanwhile := range []bool{false, true} {
		t.Run(fmt.Sprint("written meanwhile ", meanwhile), func(t *testing.T) {
			db := openTemp(t)
			key := []byte("counter")
			if err := db.AppendSearches(records(0, 4)); err != nil {
				t.Fatal(err)
			}
			betweenPasses(t, func() {
				if err := db.AppendSearches(records(100, 3)); err != nil {
					t.Error(err)
				}
				if meanwhile {
					if err := db.UpdateReports(func(rb Reports) error { return rb.Put([]byte("other"), []byte{1}) }); err != nil {
						t.Error(err)
					}
				}
			})
			var texts []string
			rollup := func(recs []SearchRecord, rb Reports) error {
				texts = texts[:0]
				for _, r := range recs {
					texts = append(texts, r.Text)
				}
				return counterRollup(key, new(int))(recs, rb)
			}
			if n, err := db.RollupSearches(4, rollup, nil); err != nil || n != 4 {
				t.Fatalf("rolled up %d: %v", n, err)
			}
			if n, err := db.RollupSearches(10, rollup, nil); err != nil || n != 3 {
				t.Fatalf("then %d: %v", n, err)
			}
			if want := []string{"q100", "q101", "q102"}; !slices.Equal(texts, want) {
				t.Fatalf("second rollup counted %v, want %v", texts, want)
			}
			if got := storedCounter(t, db, key); got != 7 {
				t.Fatalf("counter %d, want 7", got)
			}
		})
	}
}

// TestReportsPaceOnlyInAFirstPass: a write transaction never paces, and
// a first pass refuses deletes.
func TestReportsPaceOnlyInAFirstPass(t *testing.T) {
	db := openTemp(t)
	if err := db.UpdateReports(func(rb Reports) error {
		rb.Pace() // no pacer: nothing to call, nothing to fail
		return rb.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendSearches(records(0, 1)); err != nil {
		t.Fatal(err)
	}
	_, err := db.RollupSearches(1, func(_ []SearchRecord, rb Reports) error {
		_, err := rb.DeleteRange([]byte("k"), func([]byte) bool { return true }, 1)
		return err
	}, nil)
	if err == nil {
		t.Fatal("a first pass deleted")
	}
}
