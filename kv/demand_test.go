package kv_test

import (
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
)

func TestAppendSearchesAndReadBack(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	day1 := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Minute) // 2026-03-02
	recs := []kv.SearchRecord{
		{Time: day1, Text: "weather", Federation: "none",
			Filter:  map[string][]string{"type": {"application/mcp-server-card+json"}},
			Results: []kv.ReturnedEntry{{ID: "urn:air:a.test:w", Rank: 1}, {ID: "urn:air:b.test:w", Rank: 2, Source: "https://up.test"}},
			Upstreams: []kv.UpstreamOutcome{{Upstream: "https://up.test", Outcome: "ok"},
				{Upstream: "https://slow.test", Outcome: "timeout"}}},
		{Time: day1, Text: "nothing matches", Federation: "none"},
		{Time: day2, Text: "page two, empty", Offset: 10},
		{Time: day2, Text: "maps", Results: []kv.ReturnedEntry{{ID: "urn:air:c.test:m", Rank: 1}},
			Upstreams: []kv.UpstreamOutcome{{Upstream: "https://up.test", Outcome: "error"}}},
	}
	if err := db.AppendSearches(recs[:2]); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendSearches(recs[2:]); err != nil {
		t.Fatal(err)
	}
	db.Close()

	// Reopen: the records were committed, not buffered.
	db, err = kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	var got []kv.SearchRecord
	err = db.SearchesSince(time.Time{}, func(r kv.SearchRecord) (bool, error) {
		got = append(got, r)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("read %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !got[i].Time.Equal(recs[i].Time) || got[i].Text != recs[i].Text ||
			!reflect.DeepEqual(got[i].Results, recs[i].Results) || !reflect.DeepEqual(got[i].Filter, recs[i].Filter) {
			t.Errorf("record %d = %+v, want %+v", i, got[i], recs[i])
		}
	}

	got = nil
	_ = db.SearchesSince(day2, func(r kv.SearchRecord) (bool, error) {
		got = append(got, r)
		return len(got) < 1, nil // stop after the first
	})
	if len(got) != 1 || got[0].Text != "page two, empty" {
		t.Fatalf("since day2 with early stop = %+v", got)
	}

	days, err := db.DemandDays(day1.AddDate(0, 0, -1), day2)
	if err != nil {
		t.Fatal(err)
	}
	want := []kv.DemandDay{
		{Date: "2026-02-28"},
		{Date: "2026-03-01", Searches: 2, ZeroResults: 1, Upstreams: map[string]map[string]int{
			"https://up.test": {"ok": 1}, "https://slow.test": {"timeout": 1}}},
		{Date: "2026-03-02", Searches: 2, ZeroResults: 0, Upstreams: map[string]map[string]int{
			"https://up.test": {"error": 1}}},
	}
	if !reflect.DeepEqual(days, want) {
		t.Fatalf("days = %+v\nwant %+v", days, want)
	}
}

func TestAppendSearchesRejectsRecordWithoutTime(t *testing.T) {
	db := kvtest.Open(t)
	err := db.AppendSearches([]kv.SearchRecord{{Time: time.Now(), Text: "ok"}, {Text: "no time"}})
	if err == nil {
		t.Fatal("record without time accepted")
	}
	n := 0
	_ = db.SearchesSince(time.Time{}, func(kv.SearchRecord) (bool, error) { n++; return true, nil })
	if n != 0 {
		t.Fatalf("a failed group left %d records behind; the group must commit all or nothing", n)
	}
}

func BenchmarkAppendSearches(b *testing.B) {
	db := kvtest.Open(b)
	group := make([]kv.SearchRecord, 64)
	for i := range group {
		group[i] = kv.SearchRecord{Time: time.Now(), Text: "weather forecast tools",
			Results: []kv.ReturnedEntry{{ID: "urn:air:a.test:x", Rank: 1}, {ID: "urn:air:b.test:y", Rank: 2}}}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := db.AppendSearches(group); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(group)), "ns/record")
}

func TestPruneSearches(t *testing.T) {
	db, err := kv.Open(t.TempDir(), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var recs []kv.SearchRecord
	for i := range 50 {
		recs = append(recs, kv.SearchRecord{Time: base.Add(time.Duration(i) * time.Hour), Text: "q"})
	}
	if err := db.AppendSearches(recs); err != nil {
		t.Fatal(err)
	}
	daysBefore, err := db.DemandDays(base, base.Add(49*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cutoff := base.Add(30 * time.Hour) // records 0..29 are older
	// Bounded per call: two calls of 20 delete the 30 old records only.
	var deleted []int
	for range 3 {
		n, err := db.PruneSearches(cutoff, 20)
		if err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, n)
	}
	if !reflect.DeepEqual(deleted, []int{20, 10, 0}) {
		t.Fatalf("deleted %v per call, want [20 10 0]", deleted)
	}
	var left []time.Time
	if err := db.SearchesSince(time.Time{}, func(r kv.SearchRecord) (bool, error) {
		left = append(left, r.Time)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) != 20 || !left[0].Equal(cutoff) {
		t.Fatalf("%d records left, first at %v; want 20 from %v", len(left), left[0], cutoff)
	}
	// The daily aggregates, which /stats reads, are untouched.
	daysAfter, err := db.DemandDays(base, base.Add(49*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(daysAfter, daysBefore) {
		t.Fatalf("daily aggregates changed: %+v, were %+v", daysAfter, daysBefore)
	}
}

// TestRollupSearchesCountsEachRecordOnce: records are handed to the rollup
// exactly once, in log order, whatever order their times were appended in
// (a record timed before one already counted is still counted), across a
// reopen of the store and a rollup that fails (its records stay listed).
func TestRollupSearchesCountsEachRecordOnce(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := func(sec int) kv.SearchRecord {
		return kv.SearchRecord{Time: base.Add(time.Duration(sec) * time.Second), Text: "q" + strconv.Itoa(sec)}
	}
	seen := map[string]int{}
	count := func(recs []kv.SearchRecord, _ kv.Reports) error {
		for i, r := range recs {
			if i > 0 && r.Time.Before(recs[i-1].Time) {
				t.Errorf("batch out of log order: %s after %s", r.Text, recs[i-1].Text)
			}
			seen[r.Text]++
		}
		return nil
	}
	if err := db.AppendSearches([]kv.SearchRecord{rec(10), rec(11), rec(12)}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RollupSearches(2, count, nil); err != nil || n != 2 {
		t.Fatalf("first chunk: %d, %v", n, err)
	}
	// A straggler timed before the records already counted.
	if err := db.AppendSearches([]kv.SearchRecord{rec(5), rec(13)}); err != nil {
		t.Fatal(err)
	}
	failing := func([]kv.SearchRecord, kv.Reports) error { return errors.New("disk full") }
	if _, err := db.RollupSearches(10, failing, nil); err == nil {
		t.Fatal("a failed rollup reported success")
	}
	// A crash here: appended, not counted. Reopen.
	db.Close()
	if db, err = kv.Open(dir, kv.Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.RollupSearches(10, count, nil); err != nil || n != 3 {
		t.Fatalf("after reopen: %d, %v; want the 3 left", n, err)
	}
	if n, err := db.RollupSearches(10, count, nil); err != nil || n != 0 {
		t.Fatalf("nothing left, yet %d, %v", n, err)
	}
	want := map[string]int{"q5": 1, "q10": 1, "q11": 1, "q12": 1, "q13": 1}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("counted %v, want each once: %v", seen, want)
	}
}

// TestRollupSearchesSkipsPrunedRecords: a listed record the log no longer
// holds is taken off the list without being counted.
func TestRollupSearchesSkipsPrunedRecords(t *testing.T) {
	db := kvtest.Open(t)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.AppendSearches([]kv.SearchRecord{{Time: old, Text: "old"}, {Time: old.AddDate(0, 2, 0), Text: "new"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.PruneSearches(old.AddDate(0, 1, 0), 10); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	var got []string
	n, err := db.RollupSearches(10, func(recs []kv.SearchRecord, _ kv.Reports) error {
		for _, r := range recs {
			got = append(got, r.Text)
		}
		return nil
	}, nil)
	if err != nil || n != 2 || !reflect.DeepEqual(got, []string{"new"}) {
		t.Fatalf("rolled up %d (%v), counted %v; want 2 off the list, only \"new\" counted", n, err, got)
	}
}
