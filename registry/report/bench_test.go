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
