package report

import (
	"cmp"
	"slices"
	"strings"

	"github.com/ardx-dev/ardx/kv"
)

// maxInsightQueries is how many of a domain's top queries insights follow.
const maxInsightQueries = 10

// RankPoint is a query's rank on one day; Searches 0 means the domain was
// not returned for it that day (no rank, not rank 0).
type RankPoint struct {
	Date         string  `json:"date"`
	Searches     int64   `json:"searches"`
	BestRank     int64   `json:"bestRank,omitempty"`
	MeanBestRank float64 `json:"meanBestRank,omitempty"`
}

// Above is a publisher whose public entries ranked above the domain's best
// entry for a query, and in how many of those searches.
type Above struct {
	Publisher string `json:"publisher"` // "" stands for the publishers past the bound kept
	Searches  int64  `json:"searches"`
}

// QueryInsight follows one query text over the window.
type QueryInsight struct {
	Text        string      `json:"text"`
	Normalized  string      `json:"normalized"`
	Searches    int64       `json:"searches"`
	BestRank    int64       `json:"bestRank"`
	Days        []RankPoint `json:"days"`
	RankedAbove []Above     `json:"rankedAbove"`
}

// InsightsReport is the body of GET /insights.
type InsightsReport struct {
	Domain  string         `json:"domain"`
	From    string         `json:"from"`
	To      string         `json:"to"`
	Days    int            `json:"days"`
	Queries []QueryInsight `json:"queries"`
}

// Insights follows the domain's top query texts over the window: its best
// rank each day and which publishers ranked above it. Positions only.
func Insights(db *kv.DB, domain string, w Window) (InsightsReport, error) {
	rep := InsightsReport{Domain: domain, From: w.From.String(), To: w.To.String(), Days: w.Days(), Queries: []QueryInsight{}}
	err := db.ViewReports(func(rb kv.Reports) error {
		queries, err := queryTotals(rb, domain, w)
		if err != nil {
			return err
		}
		texts := make([]string, 0, len(queries))
		for t, q := range queries {
			if t != otherTexts && q.qs.Searches > 0 {
				texts = append(texts, t)
			}
		}
		slices.SortFunc(texts, func(a, b string) int {
			return cmp.Or(cmp.Compare(queries[b].qs.Searches, queries[a].qs.Searches), cmp.Compare(a, b))
		})
		for _, t := range texts[:min(maxInsightQueries, len(texts))] {
			q := queries[t]
			qi := QueryInsight{Text: q.shown, Normalized: t, Searches: q.qs.Searches, BestRank: q.qs.Best, RankedAbove: []Above{}}
			for d := w.From; d <= w.To; d++ {
				p := RankPoint{Date: d.String()}
				if raw := rb.Get(queryKey(domain, 0, uint32(d), t)); raw != nil {
					var v queryVal
					if err := decodeQueryVal(raw, &v); err != nil {
						return err
					}
					qs := v.Searches
					if w.IncludeProbe {
						qs.add(v.Probe)
					}
					p.Searches, p.BestRank, p.MeanBestRank = qs.Searches, qs.Best, mean(qs.BestSum, qs.Searches)
				}
				qi.Days = append(qi.Days, p)
			}
			for pub, n := range q.above {
				qi.RankedAbove = append(qi.RankedAbove, Above{Publisher: pub, Searches: n})
			}
			slices.SortFunc(qi.RankedAbove, func(a, b Above) int {
				return cmp.Or(cmp.Compare(b.Searches, a.Searches), cmp.Compare(a.Publisher, b.Publisher))
			})
			rep.Queries = append(rep.Queries, qi)
		}
		return nil
	})
	return rep, err
}

// ZeroQuery is a query text that found nothing.
type ZeroQuery struct {
	Text     string   `json:"text"`
	Searches int64    `json:"searches"`
	Matched  []string `json:"matched"` // the domain's categories it names
}

// ZeroResultQueries returns the zero-result query texts of the window that
// name one of categories (a word of the text, or a filter value), most
// asked first, at most limit, and how many there were in all.
func ZeroResultQueries(db *kv.DB, w Window, categories []string, limit int) ([]ZeroQuery, int, error) {
	cats := map[string]bool{}
	for _, c := range categories {
		cats[strings.ToLower(c)] = true
	}
	type acc struct {
		shown   string
		n       int64
		matched map[string]bool
	}
	found := map[string]*acc{}
	err := db.ViewReports(func(rb kv.Reports) error {
		return cover(w.From, w.To, readMarks(rb), func(level uint8, block uint32) error {
			prefix := zeroKey(level, block, "")
			return rb.Scan(prefix, nil, func(k, raw []byte) (bool, error) {
				text := string(k[len(prefix):])
				if text == otherTexts || text == "" {
					return true, nil
				}
				var v zeroVal
				if err := decodeZeroVal(raw, &v); err != nil {
					return false, err
				}
				matched := map[string]bool{}
				for _, word := range strings.FieldsFunc(text, func(r rune) bool { return r == ' ' || r == ',' || r == '-' || r == '_' }) {
					if cats[word] {
						matched[word] = true
					}
				}
				for _, t := range v.Tags {
					if cats[t] {
						matched[t] = true
					}
				}
				if len(matched) == 0 {
					return true, nil
				}
				a := found[text]
				if a == nil {
					a = &acc{shown: v.Shown, matched: map[string]bool{}}
					found[text] = a
				}
				a.n += v.Searches
				if w.IncludeProbe {
					a.n += v.Probe
				}
				for m := range matched {
					a.matched[m] = true
				}
				return true, nil
			})
		})
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]ZeroQuery, 0, len(found))
	for _, a := range found {
		if a.n == 0 {
			continue
		}
		z := ZeroQuery{Text: a.shown, Searches: a.n}
		for m := range a.matched {
			z.Matched = append(z.Matched, m)
		}
		slices.Sort(z.Matched)
		out = append(out, z)
	}
	slices.SortFunc(out, func(a, b ZeroQuery) int {
		return cmp.Or(cmp.Compare(b.Searches, a.Searches), cmp.Compare(a.Text, b.Text))
	})
	total := len(out)
	return out[:min(limit, total)], total, nil
}

// DomainDays is the domain's daily series: searches that returned its
// entries and its mean best rank.
func DomainDays(db *kv.DB, domain string, w Window) ([]DayCount, error) {
	var out []DayCount
	err := db.ViewReports(func(rb kv.Reports) error {
		var err error
		out, _, err = domainDays(rb, domain, w)
		return err
	})
	return out, err
}
