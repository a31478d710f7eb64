package probe

import (
	"fmt"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// Rate is a share of probes answered: the counts and the Wilson lower
// bound, withheld (nil, with the reason) under MinProbes.
type Rate struct {
	Probes     int64    `json:"probes"`
	Successes  int64    `json:"successes"`
	LowerBound *float64 `json:"lowerBound"`
	Withheld   string   `json:"withheld,omitempty"`
}

// NewRate returns the rate of successes out of probes.
func NewRate(successes, probes int64) Rate {
	r := Rate{Probes: probes, Successes: successes}
	if lb, ok := WilsonLowerBound(successes, probes); ok {
		r.LowerBound = &lb
	} else {
		r.Withheld = fmt.Sprintf("%d of the %d probes needed so far", probes, MinProbes)
	}
	return r
}

// Latency is the answered probes' latency percentiles, read from the daily
// histograms: each is the upper bound of the bucket the percentile falls in
// (nil when the percentile is past the last bound, or there are no samples).
type Latency struct {
	Samples int64  `json:"samples"`
	P50Ms   *int64 `json:"p50Ms"`
	P95Ms   *int64 `json:"p95Ms"`
}

// Histogram is a latency histogram with LatencyBounds' buckets.
type Histogram []int64

// Add adds counts to h.
func (h *Histogram) Add(counts []int64) {
	if len(*h) < len(counts) {
		*h = append(*h, make([]int64, len(counts)-len(*h))...)
	}
	for i, c := range counts {
		(*h)[i] += c
	}
}

// Latency returns h's percentiles.
func (h Histogram) Latency() Latency {
	var l Latency
	for _, c := range h {
		l.Samples += c
	}
	if l.Samples == 0 {
		return l
	}
	l.P50Ms, l.P95Ms = h.percentile(0.50, l.Samples), h.percentile(0.95, l.Samples)
	return l
}

func (h Histogram) percentile(p float64, n int64) *int64 {
	rank := int64(p*float64(n) + 0.999999) // the ceil(p·n)-th sample
	var seen int64
	for i, c := range h {
		seen += c
		if seen >= rank {
			if i >= len(LatencyBounds) {
				return nil
			}
			ms := LatencyBounds[i].Milliseconds()
			return &ms
		}
	}
	return nil
}

// DaySummary is one UTC day of a target (or of several).
type DaySummary struct {
	Day string `json:"day"` // YYYY-MM-DD
	Rate
	Outcomes map[string]int64 `json:"outcomes"`
	Downs    int64            `json:"downs,omitempty"`
}

// Summary is what the probes of one target showed over the window.
type Summary struct {
	Target string `json:"-"`
	Rate
	WindowDays int              `json:"windowDays"`
	Outcomes   map[string]int64 `json:"outcomes"`
	Latency    Latency          `json:"latency"`
	Downs      int64            `json:"downs"`
	Days       []DaySummary     `json:"days"`
	// Last is the last probe and the kept state; nil when never probed.
	Last *kv.ProbeResult `json:"-"`
	hist Histogram
}

// Summarize reads target's probes over the window of days ending today.
func Summarize(db *kv.DB, target string, window int, now time.Time) (Summary, error) {
	days, last, err := db.ProbeDays(target, windowStart(now, window), now)
	if err != nil {
		return Summary{}, err
	}
	return summarize(target, days, last, window), nil
}

// SummarizeAll calls fn with the summary of every target whose name starts
// with prefix, in name order; fn returning false stops.
func SummarizeAll(db *kv.DB, prefix string, window int, now time.Time, fn func(Summary) bool) error {
	return db.ForEachProbeTarget(prefix, windowStart(now, window), now, func(target string, days []kv.ProbeDay, last kv.ProbeResult) bool {
		return fn(summarize(target, days, last, window))
	})
}

func summarize(target string, days []kv.ProbeDay, last kv.ProbeResult, window int) Summary {
	s := Summary{Target: target, WindowDays: window, Outcomes: map[string]int64{}, Days: []DaySummary{}}
	var succ, total int64
	for _, d := range days {
		succ += d.Successes
		total += d.Total
		s.Downs += d.Downs
		ds := DaySummary{Day: d.Day.Format(time.DateOnly), Rate: NewRate(d.Successes, d.Total), Outcomes: map[string]int64{}, Downs: d.Downs}
		for c, n := range d.Classes {
			ds.Outcomes[c] += n
			s.Outcomes[c] += n
		}
		s.hist.Add(d.Latency)
		s.Days = append(s.Days, ds)
	}
	s.Rate = NewRate(succ, total)
	s.Latency = s.hist.Latency()
	if !last.At.IsZero() {
		l := last
		s.Last = &l
	}
	return s
}

// Histogram returns the summary's merged latency histogram.
func (s Summary) Histogram() Histogram { return s.hist }
