package report

import (
	"cmp"
	"slices"

	"github.com/ardx-dev/ardx/kv"
)

// Window is the days a report covers and whether it counts the registry's
// own traffic (probes, benchmark runs, web-position checks).
type Window struct {
	From, To     Day // inclusive
	IncludeProbe bool
}

// Days is the number of days in the window.
func (w Window) Days() int { return int(w.To) - int(w.From) + 1 }

// RankCount is one bucket of a rank histogram.
type RankCount struct {
	Ranks string `json:"ranks"`
	Count int64  `json:"count"`
}

// EntryDemand is how often one entry was returned in the window.
type EntryDemand struct {
	Identifier     string      `json:"identifier"`
	Returned       int64       `json:"returned"`
	BestRank       int64       `json:"bestRank"`
	FirstPage      int64       `json:"firstPage"`
	FirstPageShare float64     `json:"firstPageShare"`
	Ranks          []RankCount `json:"ranks"`
}

// QueryDemand is one query text that returned the domain's entries.
type QueryDemand struct {
	Text         string  `json:"text"`       // as first asked
	Normalized   string  `json:"normalized"` // the form counted
	Searches     int64   `json:"searches"`
	BestRank     int64   `json:"bestRank"`
	MeanBestRank float64 `json:"meanBestRank"`
}

// DemandReport is the body of GET /demand.
type DemandReport struct {
	Domain       string `json:"domain"`
	From         string `json:"from"`
	To           string `json:"to"`
	Days         int    `json:"days"`
	IncludeProbe bool   `json:"includeProbe"`
	// Searches counts searches that returned at least one of the domain's
	// entries; Appearances the results that were the domain's entries.
	Searches       int64         `json:"searches"`
	Appearances    int64         `json:"appearances"`
	FirstPageShare float64       `json:"firstPageShare"`
	Ranks          []RankCount   `json:"ranks"`
	EntriesTotal   int           `json:"entriesReturned"`
	Entries        []EntryDemand `json:"entries"`
	QueriesTotal   int           `json:"queriesDistinct"`
	Queries        []QueryDemand `json:"queries"`
	// OtherQueries counts searches whose texts were past the bound on
	// distinct texts kept per day; they are in Searches but not in Queries.
	OtherQueries int64      `json:"otherQueries"`
	PerDay       []DayCount `json:"perDay"`
}

// DayCount is one day of a series.
type DayCount struct {
	Date     string `json:"date"`
	Searches int64  `json:"searches"`
	// MeanBestRank is the mean over the day's searches of the domain's best
	// rank; 0 without searches.
	MeanBestRank float64 `json:"meanBestRank"`
}

func ranksOf(s *Stats) []RankCount {
	out := make([]RankCount, len(s.Hist))
	for i, n := range s.Hist {
		out[i] = RankCount{Ranks: RankBucketLabels[i], Count: n}
	}
	return out
}

func share(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func mean(sum, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// entryStats is one entry's counts over a window.
type entryStats struct {
	id string
	Stats
}

// entryTotals sums the entry rollups of domain over the window, sorted by
// identifier. Every block lists a domain's entries in identifier order and
// mostly the same ones, so the sums merge block by block in one pass each
// instead of a map look-up per entry and block (a 365-day report of 10,000
// entries reads 150,000 rollups).
func entryTotals(rb kv.Reports, domain string, w Window) ([]entryStats, error) {
	var acc, merged []entryStats
	var v entryVal
	err := cover(w.From, w.To, readMarks(rb), func(level uint8, block uint32) error {
		prefix := blockPrefix(kindEntry, domain, level, block)
		j := 0
		var extra []entryStats // entries not yet in acc, in key order
		err := rb.Scan(prefix, nil, func(k, raw []byte) (bool, error) {
			v = entryVal{}
			if err := decodeEntryStats(raw, &v, w.IncludeProbe); err != nil {
				return false, err
			}
			id := k[len(prefix):]
			for j < len(acc) && acc[j].id < string(id) {
				j++
			}
			s := &v.Searches
			if w.IncludeProbe {
				s.Add(v.Probe)
			}
			if j < len(acc) && acc[j].id == string(id) {
				acc[j].Add(*s)
				j++
				return true, nil
			}
			extra = append(extra, entryStats{id: string(id), Stats: *s})
			return true, nil
		})
		if err != nil || len(extra) == 0 {
			return err
		}
		// Merge the new entries in, keeping identifier order.
		merged = merged[:0]
		a, b := 0, 0
		for a < len(acc) || b < len(extra) {
			if b == len(extra) || a < len(acc) && acc[a].id < extra[b].id {
				merged = append(merged, acc[a])
				a++
			} else {
				merged = append(merged, extra[b])
				b++
			}
		}
		acc, merged = merged, acc
		return nil
	})
	return acc, err
}

// topEntries returns the limit entries returned most (ties by identifier),
// most first, leaving out those never returned.
func topEntries(all []entryStats, limit int) []entryStats {
	better := func(a, b *entryStats) bool {
		return a.Returned > b.Returned || a.Returned == b.Returned && a.id < b.id
	}
	top := make([]entryStats, 0, limit+1)
	for i := range all {
		e := &all[i]
		if e.Returned == 0 || len(top) == limit && !better(e, &top[len(top)-1]) {
			continue
		}
		at, _ := slices.BinarySearchFunc(top, e, func(t entryStats, e *entryStats) int {
			if better(&t, e) {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, at, *e)
		if len(top) > limit {
			top = top[:limit]
		}
	}
	return top
}

// queryTotal is one text's counts over a window.
type queryTotal struct {
	shown string
	qs    QueryStats
	above map[string]int64
}

// queryTotals sums the query rollups of domain over the window.
func queryTotals(rb kv.Reports, domain string, w Window) (map[string]*queryTotal, error) {
	out := map[string]*queryTotal{}
	err := cover(w.From, w.To, readMarks(rb), func(level uint8, block uint32) error {
		prefix := blockPrefix(kindQuery, domain, level, block)
		return rb.Scan(prefix, nil, func(k, raw []byte) (bool, error) {
			var v queryVal
			if err := decodeQueryVal(raw, &v); err != nil {
				return false, err
			}
			t := out[string(k[len(prefix):])] // no copy for a text seen in an earlier block
			if t == nil {
				t = &queryTotal{shown: v.Shown, above: map[string]int64{}}
				out[string(k[len(prefix):])] = t
			}
			t.qs.add(v.Searches)
			addCounts(t.above, v.Above)
			if w.IncludeProbe {
				t.qs.add(v.Probe)
				addCounts(t.above, v.ProbeAbve)
			}
			return true, nil
		})
	})
	return out, err
}

func addCounts(dst, src map[string]int64) {
	for k, n := range src {
		dst[k] += n
	}
}

// domainDays reads the domain's day rollups over the window, one per day.
func domainDays(rb kv.Reports, domain string, w Window) ([]DayCount, QueryStats, error) {
	var total QueryStats
	out := make([]DayCount, 0, w.Days())
	for d := w.From; d <= w.To; d++ {
		var v domainVal
		if raw := rb.Get(domainKey(domain, d)); raw != nil {
			if err := decodeDomainVal(raw, &v); err != nil {
				return nil, total, err
			}
		}
		q := v.Searches
		if w.IncludeProbe {
			q.add(v.Probe)
		}
		total.add(q)
		out = append(out, DayCount{Date: d.String(), Searches: q.Searches, MeanBestRank: mean(q.BestSum, q.Searches)})
	}
	return out, total, nil
}

// Demand reports how often domain's entries were returned in the window
// and for which query texts, the top limit of each.
func Demand(db *kv.DB, domain string, w Window, limit int) (DemandReport, error) {
	rep := DemandReport{Domain: domain, From: w.From.String(), To: w.To.String(), Days: w.Days(),
		IncludeProbe: w.IncludeProbe, Entries: []EntryDemand{}, Queries: []QueryDemand{}}
	err := db.ViewReports(func(rb kv.Reports) error {
		entries, err := entryTotals(rb, domain, w)
		if err != nil {
			return err
		}
		var all Stats
		for i := range entries {
			if entries[i].Returned > 0 { // else returned only to probe traffic
				all.Add(entries[i].Stats)
				rep.EntriesTotal++
			}
		}
		for _, e := range topEntries(entries, limit) {
			rep.Entries = append(rep.Entries, EntryDemand{Identifier: e.id, Returned: e.Returned, BestRank: e.Best,
				FirstPage: e.FirstPage, FirstPageShare: share(e.FirstPage, e.Returned), Ranks: ranksOf(&e.Stats)})
		}
		rep.Appearances = all.Returned
		rep.FirstPageShare = share(all.FirstPage, all.Returned)
		rep.Ranks = ranksOf(&all)

		queries, err := queryTotals(rb, domain, w)
		if err != nil {
			return err
		}
		texts := make([]string, 0, len(queries))
		for t, q := range queries {
			if t == otherTexts {
				rep.OtherQueries += q.qs.Searches
				continue
			}
			if q.qs.Searches > 0 {
				texts = append(texts, t)
			}
		}
		slices.SortFunc(texts, func(a, b string) int {
			return cmp.Or(cmp.Compare(queries[b].qs.Searches, queries[a].qs.Searches), cmp.Compare(a, b))
		})
		rep.QueriesTotal = len(texts)
		for _, t := range texts[:min(limit, len(texts))] {
			q := queries[t]
			rep.Queries = append(rep.Queries, QueryDemand{Text: q.shown, Normalized: t, Searches: q.qs.Searches,
				BestRank: q.qs.Best, MeanBestRank: mean(q.qs.BestSum, q.qs.Searches)})
		}
		rep.PerDay, _, err = domainDays(rb, domain, w)
		for _, d := range rep.PerDay {
			rep.Searches += d.Searches
		}
		return err
	})
	return rep, err
}
