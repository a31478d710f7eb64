package report_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/internal/procstat"
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

// BenchmarkRollup measures the demand log's cost per search with the
// rollups counted behind it in batches of 1 (every search its own
// transaction), 100, 1,000 (the demand writer's batch at about 1,000
// searches/s) and 4,096 (its largest, from about 4,000 searches/s),
// appends included, into a log that already holds 2,000 searches of the
// day; batch=none appends without rolling up. Each op is a batch: with
// -benchtime 2000x the unique cases run millions of searches, so give
// them fewer (-bench 'Rollup/texts=unique' -benchtime 200x).
//
// texts=500: the text is one of 500, the results of 10 of 50 publishers,
// 1,000 entries. texts=unique: every search a new text, as under
// internal/loadgen (the load that costs: a new query key per publisher in
// the results), over 100,000 entries of which four in five belong to 22
// large publishers and the rest to 2,000 small ones, as the toolsdk
// corpus's copies fall (npm.test and its mirrors, the scoped ones), each
// entry as likely as another: a batch of 4,096 then returns a third of
// them, and rewrites nearly every page of the day's entry keys.
// texts=unique-popular: the same, but the entries are drawn by popularity
// (Zipf, s 1.1, over the 100,000): real requests return some entries far
// more often than others (4,096 of the loadgen's MetaTool requests return
// 11,518 distinct entries, 20,000 return 28,381), so the day holds fewer
// entry keys and a batch rewrites fewer pages.
func BenchmarkRollup(b *testing.B) {
	type gen func(i int) kv.SearchRecord
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	repeated := func(i int) kv.SearchRecord {
		r := kv.SearchRecord{Time: now.Add(time.Duration(i) * time.Millisecond), Text: fmt.Sprintf("query %d", i%500)}
		for k := range 10 {
			r.Results = append(r.Results, kv.ReturnedEntry{ID: fmt.Sprintf("urn:air:pub%d.test:e%d", (i+k)%50, (i*7+k)%1000), Rank: k + 1})
		}
		return r
	}
	unique := func(i int) kv.SearchRecord {
		return newTextSearch(now, i, func(k int) int { return (i*7919 + k*104729) % 100000 })
	}
	popular := popularSearches(now)
	for _, texts := range []struct {
		name    string
		rec     gen
		batches []int
	}{{"500", repeated, []int{0, 1, 100, 1000}}, {"unique", unique, []int{0, 100, 1000, 4096}}, {"unique-popular", popular, []int{1000, 4096}}} {
		for _, batch := range texts.batches {
			name := fmt.Sprint(batch)
			if batch == 0 {
				name = "none"
			}
			b.Run("texts="+texts.name+"/batch="+name, func(b *testing.B) {
				benchmarkRollup(b, now, batch, texts.rec)
			})
		}
	}
}

// newTextSearch is search i, at now plus i ms, with a text of its own,
// returning the entries entry(k) names (0-99,999) at ranks 1-10: four in
// five of 22 large publishers, the rest of 2,000 small ones.
func newTextSearch(now time.Time, i int, entry func(k int) int) kv.SearchRecord {
	r := kv.SearchRecord{Time: now.Add(time.Duration(i) * time.Millisecond), Text: fmt.Sprintf("find a tool that does thing number %d for me", i)}
	for k := range 10 {
		j := entry(k)
		pub := fmt.Sprintf("m%d.npm.test", j%22)
		if j%5 == 0 {
			pub = fmt.Sprintf("s%d.test", j/5%2000)
		}
		r.Results = append(r.Results, kv.ReturnedEntry{ID: fmt.Sprintf("urn:air:%s:e%d", pub, j), Rank: k + 1})
	}
	return r
}

// popularSearches makes newTextSearch's searches whose entries are drawn
// by popularity (Zipf, s 1.1, over the 100,000), the popularity ranks
// spread over the publishers.
func popularSearches(now time.Time) func(i int) kv.SearchRecord {
	zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, 100000-1)
	return func(i int) kv.SearchRecord {
		return newTextSearch(now, i, func(int) int { return int(zipf.Uint64()*7919) % 100000 })
	}
}

// openRollupStore opens a store in a temporary dir as the demand writer
// finds it at start: today's searches count into days, and blocks are
// built when complete.
func openRollupStore(b *testing.B, now time.Time) *kv.DB {
	db, err := kv.Open(b.TempDir(), kv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if _, err := report.Compact(db, now, 1); err != nil {
		b.Fatal(err)
	}
	return db
}

func benchmarkRollup(b *testing.B, now time.Time, batch int, rec func(int) kv.SearchRecord) {
	db := openRollupStore(b, now)
	var seed []kv.SearchRecord
	for i := range 2000 {
		seed = append(seed, rec(i))
	}
	if err := db.AppendSearches(seed); err != nil {
		b.Fatal(err)
	}
	if _, err := db.RollupSearches(len(seed), report.Rollup, nil); err != nil {
		b.Fatal(err)
	}
	n := max(batch, 1)
	group := make([]kv.SearchRecord, n)
	i := len(seed)
	cpu := procstat.CPUTime()
	for b.Loop() {
		for k := range group {
			group[k] = rec(i)
			i++
		}
		if err := db.AppendSearches(group); err != nil {
			b.Fatal(err)
		}
		if batch == 0 {
			continue
		}
		if _, err := db.RollupSearches(n, report.Rollup, nil); err != nil {
			b.Fatal(err)
		}
	}
	// On a shared machine wall time mostly measures the neighbours and the
	// disk; CPU time (the process's, GC included) what the code costs.
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(i-len(seed)), "µs/search")
	b.ReportMetric(float64((procstat.CPUTime()-cpu).Microseconds())/float64(i-len(seed)), "cpu-µs/search")
}

// BenchmarkWritesDuringRollup measures how long another writer of the
// store waits while a batch of 4,096 searches (unique texts, entries drawn
// by popularity, as BenchmarkRollup's unique-popular) is rolled up:
// passes=two is kv.RollupSearches, which counts in a read transaction and
// holds the write lock only to write the counts; passes=one counts inside
// the write transaction, as it did before. The other writer appends one
// search record at a time, in a loop, for as long as the rollup runs; the
// metrics are its slowest append and its 99th percentile.
func BenchmarkWritesDuringRollup(b *testing.B) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, passes := range []string{"two", "one"} {
		b.Run("passes="+passes, func(b *testing.B) {
			db := openRollupStore(b, now)
			rec := popularSearches(now)
			var err error
			i := 0
			var waits []time.Duration
			for b.Loop() {
				group := make([]kv.SearchRecord, 4096)
				for k := range group {
					group[k] = rec(i)
					i++
				}
				if err := db.AppendSearches(group); err != nil {
					b.Fatal(err)
				}
				stop, done := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(done)
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						t0 := time.Now()
						if err := db.AppendSearches([]kv.SearchRecord{{Time: now.Add(-time.Hour), Text: "other writer"}}); err != nil {
							b.Error(err)
							return
						}
						waits = append(waits, time.Since(t0))
					}
				}()
				if passes == "two" {
					_, err = db.RollupSearches(len(group)+1<<20, report.Rollup, nil)
				} else {
					err = db.UpdateReports(func(rb kv.Reports) error { return report.Rollup(group, rb) })
				}
				close(stop)
				<-done
				if err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(waits)
			if len(waits) > 0 {
				b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, "max-wait-ms")
				b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99-wait-ms")
			}
		})
	}
}
