package report_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/report"
)

// BenchmarkDemand365Days10kEntries measures the demand report of a domain
// with 10,000 entries, each returned every day for 365 days (3.65M
// entry-days), seeded through the rollup writer: 1,000 searches a day of
// this domain, each returning ten of its entries, with 1,000 distinct
// texts a day (a registry at 100 searches/s answers 8.6M searches a day;
// what the report reads is the domain's share, bounded by its entries and
// the texts kept per day). It reports the store's size.
func BenchmarkDemand365Days10kEntries(b *testing.B) {
	const (
		entries   = 10000
		days      = 365
		perDay    = 1000
		perSearch = 10
	)
	dir := b.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	today := report.DayOf(now)
	ids := make([]string, entries)
	for i := range ids {
		ids[i] = fmt.Sprintf("urn:air:big.test:mcp:server-%05d", i)
	}
	recs := make([]kv.SearchRecord, perDay)
	for d := range days {
		day := (today - report.Day(days-1) + report.Day(d)).Time()
		for s := range perDay {
			rec := kv.SearchRecord{Time: day.Add(time.Duration(s) * time.Minute), Text: fmt.Sprintf("query number %d", (s*7+d)%perDay)}
			rec.Results = make([]kv.ReturnedEntry, perSearch)
			for r := range perSearch {
				rec.Results[r] = kv.ReturnedEntry{ID: ids[(s*perSearch+r+d)%entries], Rank: r + 1}
			}
			recs[s] = rec
		}
		if err := db.UpdateReports(func(rb kv.Reports) error { return report.Rollup(recs, rb) }); err != nil {
			b.Fatal(err)
		}
	}
	w := report.Window{From: today - days + 1, To: today}
	b.ResetTimer()
	for b.Loop() {
		rep, err := report.Demand(db, "big.test", w, 25)
		if err != nil {
			b.Fatal(err)
		}
		if rep.EntriesTotal != entries || rep.Appearances != days*perDay*perSearch {
			b.Fatalf("report counts %d entries, %d appearances", rep.EntriesTotal, rep.Appearances)
		}
	}
	// After the loop: ResetTimer drops metrics reported before it.
	if fi, err := os.Stat(filepath.Join(dir, kv.FileName)); err == nil {
		b.ReportMetric(float64(fi.Size())/(1<<20), "kv-MiB")
	}
}

// BenchmarkAppendSearches measures committing demand records one search a
// transaction (the demand writer's group at about 100 searches/s) with
// and without the rollups in the same transaction, into a log that
// already holds a day of rollups for 1,000 entries.
func BenchmarkAppendSearches(b *testing.B) {
	for _, withRollup := range []bool{false, true} {
		b.Run(fmt.Sprintf("rollup=%v", withRollup), func(b *testing.B) {
			db, err := kv.Open(b.TempDir(), kv.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
			rec := func(i int) kv.SearchRecord {
				r := kv.SearchRecord{Time: now.Add(time.Duration(i) * time.Millisecond), Text: fmt.Sprintf("query %d", i%500)}
				for k := range 10 {
					r.Results = append(r.Results, kv.ReturnedEntry{ID: fmt.Sprintf("urn:air:pub%d.test:e%d", (i+k)%50, (i*7+k)%1000), Rank: k + 1})
				}
				return r
			}
			var seed []kv.SearchRecord
			for i := range 2000 {
				seed = append(seed, rec(i))
			}
			if err := db.AppendSearchesWith(seed, report.Rollup); err != nil {
				b.Fatal(err)
			}
			var fn func([]kv.SearchRecord, kv.Reports) error
			if withRollup {
				fn = report.Rollup
			}
			i := 0
			for b.Loop() {
				if err := db.AppendSearchesWith([]kv.SearchRecord{rec(i)}, fn); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
