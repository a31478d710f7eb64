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

// entryTotals sums the entry rollups of domain over the window.
func entryTotals(rb kv.Reports, domain string, w Window) (map[string]*Stats, error) {
	out := map[string]*Stats{}
	var v entryVal
	err := cover(w.From, w.To, func(level uint8, block uint32) error {
		prefix := blockPrefix(kindEntry, domain, level, block)
		return rb.Scan(prefix, nil, func(k, raw []byte) (bool, error) {
			v = entryVal{}
			if err := decodeEntryVal(raw, &v); err != nil {
				return false, err
			}
			id := k[len(prefix):]
			s, ok := out[string(id)]
			if !ok {
				s = &Stats{}
				out[string(id)] = s
			}
			s.Add(v.Searches)
			if w.IncludeProbe {
				s.Add(v.Probe)
			}
			return true, nil
		})
	})
	return out, err
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
	err := cover(w.From, w.To, func(level uint8, block uint32) error {
		prefix := blockPrefix(kindQuery, domain, level, block)
		return rb.Scan(prefix, nil, func(k, raw []byte) (bool, error) {
			var v queryVal
			if err := decodeQueryVal(raw, &v); err != nil {
				return false, err
			}
			text := string(k[len(prefix):])
			t := out[text]
			if t == nil {
				t = &queryTotal{shown: v.Shown, above: map[string]int64{}}
				out[text] = t
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
		ids := make([]string, 0, len(entries))
		for id, s := range entries {
			if s.Returned == 0 {
				continue // returned only to probe traffic
			}
			all.Add(*s)
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b string) int {
			return cmp.Or(cmp.Compare(entries[b].Returned, entries[a].Returned), cmp.Compare(a, b))
		})
		rep.EntriesTotal = len(ids)
		for _, id := range ids[:min(limit, len(ids))] {
			s := entries[id]
			rep.Entries = append(rep.Entries, EntryDemand{Identifier: id, Returned: s.Returned, BestRank: s.Best,
				FirstPage: s.FirstPage, FirstPageShare: share(s.FirstPage, s.Returned), Ranks: ranksOf(s)})
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
