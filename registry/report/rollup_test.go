package report_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/report"
)

var domains = []string{"a.test", "b.test", "c.test"}

// randomLog makes n search records over days days ending at end: random
// texts (some differing only in case and spaces), results of the three
// domains at random ranks, some private, some probe traffic, some pages
// past the first, some with no result.
func randomLog(rng *rand.Rand, n, days int, end time.Time) []kv.SearchRecord {
	texts := []string{"weather", "Weather ", "  rain   radar", "maps", "send email", "pdf", "storm alerts", ""}
	recs := make([]kv.SearchRecord, 0, n)
	start := end.Add(-time.Duration(days) * 24 * time.Hour)
	for range n {
		t := start.Add(time.Duration(rng.Int64N(int64(days) * int64(24*time.Hour))))
		rec := kv.SearchRecord{Time: t, Text: texts[rng.IntN(len(texts))], Probe: rng.IntN(5) == 0}
		if rng.IntN(6) == 0 {
			rec.Offset = 10
		}
		if rng.IntN(7) == 0 {
			rec.Filter = map[string][]string{"tags": {"weather"}}
		}
		for i := range rng.IntN(12) {
			d := domains[rng.IntN(len(domains))]
			rec.Results = append(rec.Results, kv.ReturnedEntry{
				ID:      fmt.Sprintf("urn:air:%s:e%d", d, rng.IntN(6)),
				Rank:    rec.Offset + i + 1,
				Private: rng.IntN(15) == 0,
			})
		}
		recs = append(recs, rec)
	}
	slices.SortFunc(recs, func(a, b kv.SearchRecord) int { return a.Time.Compare(b.Time) })
	return recs
}

// recount computes the demand report of domain over w from the raw log,
// the obvious way, to hold the rollups to.
func recount(t *testing.T, db *kv.DB, domain string, w report.Window, limit int) report.DemandReport {
	t.Helper()
	type entryAcc struct {
		n, first, best int64
		hist           [8]int64
	}
	type queryAcc struct {
		shown            string
		n, bestSum, best int64
	}
	entries := map[string]*entryAcc{}
	queries := map[string]*queryAcc{}
	perDay := map[string]int64{}
	bucket := func(r int) int {
		for i, b := range []int{1, 2, 3, 5, 10, 20, 50} {
			if r <= b {
				return i
			}
		}
		return 7
	}
	err := db.SearchesSince(w.From.Time(), func(rec kv.SearchRecord) (bool, error) {
		if report.DayOf(rec.Time) > w.To {
			return false, nil
		}
		if rec.Probe && !w.IncludeProbe {
			return true, nil
		}
		best := int64(0)
		for _, r := range rec.Results {
			if r.Private || report.PublisherOf(r.ID) != domain {
				continue
			}
			e := entries[r.ID]
			if e == nil {
				e = &entryAcc{}
				entries[r.ID] = e
			}
			e.n++
			if r.Rank <= report.FirstPage {
				e.first++
			}
			if e.best == 0 || int64(r.Rank) < e.best {
				e.best = int64(r.Rank)
			}
			e.hist[bucket(r.Rank)]++
			if best == 0 || int64(r.Rank) < best {
				best = int64(r.Rank)
			}
		}
		if best == 0 {
			return true, nil
		}
		perDay[report.DayOf(rec.Time).String()]++
		norm := report.NormalizeQuery(rec.Text)
		q := queries[norm]
		if q == nil {
			q = &queryAcc{shown: rec.Text}
			queries[norm] = q
		}
		q.n++
		q.bestSum += best
		if q.best == 0 || best < q.best {
			q.best = best
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := report.DemandReport{Domain: domain, From: w.From.String(), To: w.To.String(), Days: w.Days(), IncludeProbe: w.IncludeProbe,
		Entries: []report.EntryDemand{}, Queries: []report.QueryDemand{}}
	var all entryAcc
	ids := []string{}
	for id, e := range entries {
		ids = append(ids, id)
		all.n += e.n
		all.first += e.first
		for i := range e.hist {
			all.hist[i] += e.hist[i]
		}
	}
	ranks := func(h [8]int64) []report.RankCount {
		out := []report.RankCount{}
		for i, n := range h {
			out = append(out, report.RankCount{Ranks: report.RankBucketLabels[i], Count: n})
		}
		return out
	}
	share := func(a, b int64) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(entries[b].n, entries[a].n), cmp.Compare(a, b)) })
	rep.EntriesTotal = len(ids)
	for _, id := range ids[:min(limit, len(ids))] {
		e := entries[id]
		rep.Entries = append(rep.Entries, report.EntryDemand{Identifier: id, Returned: e.n, BestRank: e.best, FirstPage: e.first,
			FirstPageShare: share(e.first, e.n), Ranks: ranks(e.hist)})
	}
	rep.Appearances = all.n
	rep.FirstPageShare = share(all.first, all.n)
	rep.Ranks = ranks(all.hist)
	texts := []string{}
	for t := range queries {
		texts = append(texts, t)
	}
	slices.SortFunc(texts, func(a, b string) int { return cmp.Or(cmp.Compare(queries[b].n, queries[a].n), cmp.Compare(a, b)) })
	rep.QueriesTotal = len(texts)
	for _, t := range texts[:min(limit, len(texts))] {
		q := queries[t]
		rep.Queries = append(rep.Queries, report.QueryDemand{Normalized: t, Searches: q.n, BestRank: q.best, MeanBestRank: float64(q.bestSum) / float64(q.n)})
	}
	for d := w.From; d <= w.To; d++ {
		n := perDay[d.String()]
		rep.Searches += n
		rep.PerDay = append(rep.PerDay, report.DayCount{Date: d.String(), Searches: n})
	}
	return rep
}

// comparable strips what a recount cannot know: the text first asked (the
// raw log may have lost it to pruning) and the daily mean ranks.
func comparable(r report.DemandReport) report.DemandReport {
	r.Queries = slices.Clone(r.Queries)
	for i := range r.Queries {
		r.Queries[i].Text = ""
	}
	r.PerDay = slices.Clone(r.PerDay)
	for i := range r.PerDay {
		r.PerDay[i].MeanBestRank = 0
	}
	return r
}

func appendLog(t *testing.T, db *kv.DB, recs []kv.SearchRecord) {
	t.Helper()
	for len(recs) > 0 {
		n := min(len(recs), 512) // the demand writer's group size
		if err := db.AppendSearches(recs[:n]); err != nil {
			t.Fatal(err)
		}
		if k, err := db.RollupSearches(n, report.Rollup, nil); err != nil || k != n {
			t.Fatalf("rolled up %d of %d: %v", k, n, err)
		}
		recs = recs[n:]
	}
}

func checkAgainstRecount(t *testing.T, db *kv.DB, now time.Time, maxDays int) {
	t.Helper()
	today := report.DayOf(now)
	for _, domain := range domains {
		for _, days := range []int{1, 2, 7, 8, 9, 30, maxDays} {
			if days > maxDays {
				continue
			}
			for _, probe := range []bool{false, true} {
				for _, limit := range []int{3, 200} {
					w := report.Window{From: today - report.Day(days-1), To: today, IncludeProbe: probe}
					got, err := report.Demand(db, domain, w, limit)
					if err != nil {
						t.Fatal(err)
					}
					want := recount(t, db, domain, w, limit)
					if g := comparable(got); !reflect.DeepEqual(g, want) {
						t.Fatalf("%s days=%d probe=%v limit=%d:\nrollup  %+v\nrecount %+v", domain, days, probe, limit, g, want)
					}
					if days == 30 && !probe && limit == 200 && got.Appearances == 0 {
						t.Fatalf("%s: no appearances in 30 days: the test log is too thin", domain)
					}
				}
			}
		}
	}
}

func TestRollupsEqualRecountOfLog(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	appendLog(t, db, randomLog(rng, 4000, 120, now))
	checkAgainstRecount(t, db, now, 120)

	// Pruning the raw log keeps the rollups: over the days the log still
	// holds in full, they still equal a recount.
	cutoff := report.DayOf(now) - 40
	for {
		n, err := db.PruneSearches(cutoff.Time(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	checkAgainstRecount(t, db, now, 41)

	// A restart reads the same rollups, and goes on counting.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = kv.Open(dir, kv.Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkAgainstRecount(t, db, now, 41)
	later := now.Add(36 * time.Hour)
	appendLog(t, db, randomLog(rng, 1500, 3, later))
	checkAgainstRecount(t, db, later, 42)

	// Rollups past their retention go; recent ones stay exact.
	if _, err := report.Prune(db, later.Add(300*24*time.Hour), 1<<20); err != nil {
		t.Fatal(err)
	}
	w := report.Window{From: report.DayOf(later) - 9, To: report.DayOf(later)}
	if got, err := report.Demand(db, "a.test", w, 200); err != nil || comparable(got).Appearances != recount(t, db, "a.test", w, 200).Appearances {
		t.Fatalf("after pruning 300 days ahead: %v %v", got.Appearances, err)
	}
	if n, err := report.Prune(db, later.Add(500*24*time.Hour), 1<<20); err != nil || n == 0 {
		t.Fatalf("pruning 500 days ahead deleted %d (%v); want every rollup", n, err)
	}
	if got, _ := report.Demand(db, "a.test", w, 200); got.Appearances != 0 {
		t.Fatalf("after pruning 500 days ahead: %d appearances remain", got.Appearances)
	}
}

// TestBuiltBlocksEqualSearchBySearch: blocks of 8 and 64 days built from
// their days once complete (Compact, as the demand writer runs it hourly)
// give the same reports as blocks counted search by search (a store from
// before the marks), and both equal a recount of the log. The log is fed
// day by day over 150 days, with a store that starts without marks and
// gets them mid-way, and with stragglers: records of days whose blocks are
// already built, appended last.
func TestBuiltBlocksEqualSearchBySearch(t *testing.T) {
	open := func() *kv.DB {
		db, err := kv.Open(t.TempDir(), kv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	perSearch, built := open(), open()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const days = 150
	rng := rand.New(rand.NewPCG(3, 4))
	log := randomLog(rng, 6000, days, now)
	stragglers := randomLog(rng, 300, days-10, now.Add(-5*24*time.Hour))
	compact := func(at time.Time) int {
		n, err := report.Compact(built, at, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	blocks := 0
	for day := report.DayOf(now) - days; day <= report.DayOf(now); day++ {
		var today []kv.SearchRecord
		for len(log) > 0 && report.DayOf(log[0].Time) == day {
			today, log = append(today, log[0]), log[1:]
		}
		if day == report.DayOf(now)-days+30 {
			compact(day.Time()) // the upgrade: marks from here on
		}
		if day > report.DayOf(now)-days+30 {
			blocks += compact(day.Time().Add(time.Hour))
		}
		appendLog(t, perSearch, today)
		appendLog(t, built, today)
	}
	if blocks < 10 {
		t.Fatalf("only %d blocks built over %d days", blocks, days)
	}
	appendLog(t, perSearch, stragglers)
	appendLog(t, built, stragglers)
	checkAgainstRecount(t, built, now, days)

	today := report.DayOf(now)
	for _, from := range []report.Day{today - days, today - 129, today - 64, today - 40, today - 8, today} {
		for _, to := range []report.Day{today - 64, today - 9, today - 1, today} {
			if to < from {
				continue
			}
			for _, probe := range []bool{false, true} {
				w := report.Window{From: from, To: to, IncludeProbe: probe}
				for _, domain := range domains {
					a, err := report.Demand(perSearch, domain, w, 200)
					if err != nil {
						t.Fatal(err)
					}
					b, err := report.Demand(built, domain, w, 200)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(comparable(a), comparable(b)) {
						t.Fatalf("%s %v: per search %+v\nbuilt %+v", domain, w, a, b)
					}
				}
				za, na, err := report.ZeroResultQueries(perSearch, w, []string{"weather", "maps", "rain", "pdf"}, 50)
				if err != nil {
					t.Fatal(err)
				}
				zb, nb, err := report.ZeroResultQueries(built, w, []string{"weather", "maps", "rain", "pdf"}, 50)
				if err != nil {
					t.Fatal(err)
				}
				if na != nb || !reflect.DeepEqual(zeroCounts(za), zeroCounts(zb)) {
					t.Fatalf("zero-result texts %v: per search %d %+v\nbuilt %d %+v", w, na, za, nb, zb)
				}
			}
		}
	}
}

// zeroCounts is what a zero-result list counts, by normalized text, for
// the texts that name a category by a word. A text that names one only
// by a filter value is left out: a block counted search by search keeps
// the filter values of its first search, a built block those of all its
// days (up to 16), so it matches in more blocks.
func zeroCounts(zs []report.ZeroQuery) map[string]int64 {
	out := map[string]int64{}
	for _, z := range zs {
		norm := strings.ToLower(strings.Join(strings.Fields(z.Text), " "))
		for _, word := range strings.Fields(norm) {
			if slices.Contains(z.Matched, word) {
				out[norm] += z.Searches
				break
			}
		}
	}
	return out
}

// TestBatchesEqualOneByOne: counting a batch of searches writes exactly
// the bytes counting them one by one does, whatever the batch holds: the
// demand writer's batches (up to 4,096 records, in the order the log holds
// them) are an optimisation, never a change to a report. The log here
// reaches every bound (over 1,000 distinct texts per domain and per day,
// searches with zero results and over 1,000 distinct zero-result texts,
// more than 16 publishers ranked above a domain), repeats texts within a
// batch, and holds stragglers into blocks that are already built.
func TestBatchesEqualOneByOne(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(5, 6))
	pubs := make([]string, 30)
	for i := range pubs {
		pubs[i] = fmt.Sprintf("p%d.test", i)
	}
	var log []kv.SearchRecord
	for i := range 8000 {
		rec := kv.SearchRecord{Time: now.Add(-time.Duration(rng.Int64N(int64(30 * time.Hour)))), Probe: rng.IntN(8) == 0}
		switch rng.IntN(4) {
		case 0: // a text asked before, in another case and spacing
			rec.Text = fmt.Sprintf("  Tool  number %d ", rng.IntN(i+1))
		default:
			rec.Text = fmt.Sprintf("tool number %d", i)
		}
		if rng.IntN(10) == 0 {
			rec.Time = now.Add(-time.Duration(60+rng.IntN(60)) * 24 * time.Hour) // a straggler
		}
		if rng.IntN(6) == 0 {
			rec.Filter = map[string][]string{"tags": {fmt.Sprintf("Tag%d", rng.IntN(20))}, "type": {"mcp"}}
		}
		if rng.IntN(9) == 0 {
			rec.Offset = 10
		}
		if rng.IntN(2) > 0 {
			n := 1 + rng.IntN(20)
			for k := range n {
				// Mostly a few large publishers, as real results are.
				p := pubs[rng.IntN(5)]
				if rng.IntN(3) == 0 {
					p = pubs[rng.IntN(len(pubs))]
				}
				rec.Results = append(rec.Results, kv.ReturnedEntry{ID: fmt.Sprintf("urn:air:%s:e%d", p, rng.IntN(50)),
					Rank: rec.Offset + k + 1, Private: rng.IntN(20) == 0})
			}
		}
		log = append(log, rec)
	}
	// In log order: by time, as kv.RollupSearches hands them over.
	slices.SortStableFunc(log, func(a, b kv.SearchRecord) int { return a.Time.Compare(b.Time) })

	open := func() *kv.DB {
		db, err := kv.Open(t.TempDir(), kv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		// Blocks of 8 and 64 days built up to 50 days ago, so stragglers
		// count into built blocks too.
		if _, err := report.Compact(db, now.Add(-100*24*time.Hour), 1); err != nil {
			t.Fatal(err)
		}
		if _, err := report.Compact(db, now.Add(-50*24*time.Hour), 1000); err != nil {
			t.Fatal(err)
		}
		return db
	}
	oneByOne, batched := open(), open()
	if err := oneByOne.UpdateReports(func(rb kv.Reports) error {
		for i := range log {
			if err := report.Rollup(log[i:i+1], rb); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 7, 512, 4096, len(log)} { // the first batches of several sizes, then the rest
		n = min(n, len(log))
		if err := batched.AppendSearches(log[:n]); err != nil {
			t.Fatal(err)
		}
		if k, err := batched.RollupSearches(n, report.Rollup, nil); err != nil || k != n {
			t.Fatalf("rolled up %d of %d: %v", k, n, err)
		}
		log = log[n:]
	}
	want, got := dumpReports(t, oneByOne), dumpReports(t, batched)
	kinds := map[byte]int{}
	for k := range want {
		kinds[k[0]]++
	}
	if kinds['q'] < 3000 || kinds['z'] < 2000 || kinds['e'] < 100 {
		t.Fatalf("the log is too thin to reach the bounds: keys per kind %v", kinds)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("key %q: batched %x (present %v), one by one %x", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Fatalf("key %q written by the batches only", k)
		}
	}
}

// dumpReports is every key and value of the reports bucket.
func dumpReports(t *testing.T, db *kv.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := db.ViewReports(func(rb kv.Reports) error {
		return rb.Scan([]byte{}, nil, func(k, v []byte) (bool, error) {
			out[string(k)] = string(v)
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
