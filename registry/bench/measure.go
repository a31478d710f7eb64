package bench

import (
	"context"
	"math"
	"slices"
	"time"
)

// Depth is how many results each benchmark query asks for: the measures
// are all at most @10, and MRR is MRR@10 (a hit below rank 10 counts 0).
const Depth = 10

// SearchFunc runs one query against a registry and returns the identifiers
// of its results, best first (at most limit).
type SearchFunc func(ctx context.Context, query string, limit int) ([]string, error)

// Outcome is what one query of a run did.
type Outcome struct {
	Task    string        `json:"task"`
	Rank    int           `json:"rank"` // 1-based rank of the expected entry; 0 when not in the first Depth
	Latency time.Duration `json:"-"`
	Err     string        `json:"error,omitempty"`
}

// Measures are a registry's scores on a task set.
type Measures struct {
	Tasks    int     `json:"tasks"`
	Answered int     `json:"answered"` // queries that returned a result list (possibly empty)
	Failed   int     `json:"failed"`   // queries that returned an error; they count as misses
	Found    int     `json:"found"`    // expected entry within the first Depth results
	Recall1  float64 `json:"recallAt1"`
	Recall5  float64 `json:"recallAt5"`
	Recall10 float64 `json:"recallAt10"`
	MRR      float64 `json:"mrr"`
	NDCG10   float64 `json:"ndcgAt10"`
	Latency  Latency `json:"latencyMs"`
}

// Latency are nearest-rank percentiles of the queries' durations, in
// milliseconds (fractional).
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Score computes the measures of a run's outcomes. With one relevant entry
// per task the ideal DCG is 1, so nDCG@10 is the mean of 1/log2(rank+1)
// over the tasks whose entry is in the first 10.
func Score(outs []Outcome) Measures {
	m := Measures{Tasks: len(outs)}
	if len(outs) == 0 {
		return m
	}
	lat := make([]time.Duration, 0, len(outs))
	var r1, r5, r10, rr, ndcg float64
	for _, o := range outs {
		lat = append(lat, o.Latency)
		if o.Err != "" {
			m.Failed++
			continue
		}
		m.Answered++
		if o.Rank < 1 || o.Rank > Depth {
			continue
		}
		m.Found++
		if o.Rank <= 1 {
			r1++
		}
		if o.Rank <= 5 {
			r5++
		}
		r10++
		rr += 1 / float64(o.Rank)
		ndcg += 1 / math.Log2(float64(o.Rank)+1)
	}
	n := float64(len(outs))
	m.Recall1, m.Recall5, m.Recall10 = round4(r1/n), round4(r5/n), round4(r10/n)
	m.MRR, m.NDCG10 = round4(rr/n), round4(ndcg/n)
	slices.Sort(lat)
	m.Latency = Latency{P50: pct(lat, 50), P90: pct(lat, 90), P99: pct(lat, 99), Max: ms(lat[len(lat)-1])}
	return m
}

// pct is the nearest-rank percentile of sorted durations, in ms.
func pct(sorted []time.Duration, p int) float64 {
	i := int(math.Ceil(float64(p)/100*float64(len(sorted)))) - 1
	return ms(sorted[min(max(i, 0), len(sorted)-1)])
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

func round4(x float64) float64 { return math.Round(x*10000) / 10000 }

// Run asks search every task's query, one at a time (the latencies are of
// one query on an otherwise idle path, not of a load test), and returns
// the outcomes in task order. After stopAfter failures in a row it stops
// asking and counts the rest as failed too (an upstream that is down is
// not asked the whole set); stopAfter 0 never stops. A cancelled ctx ends
// the run with the outcomes so far and ctx's error.
func Run(ctx context.Context, tasks []Task, search SearchFunc, stopAfter int) ([]Outcome, error) {
	outs := make([]Outcome, 0, len(tasks))
	failedInRow := 0
	for _, t := range tasks {
		if err := ctx.Err(); err != nil {
			return outs, err
		}
		o := Outcome{Task: t.ID}
		if stopAfter > 0 && failedInRow >= stopAfter {
			o.Err = "not asked: the registry failed the queries before it"
			outs = append(outs, o)
			continue
		}
		start := time.Now()
		ids, err := search(ctx, t.Query, Depth)
		o.Latency = time.Since(start)
		if err != nil {
			o.Err = err.Error()
			failedInRow++
		} else {
			failedInRow = 0
			if i := slices.Index(ids, t.Expected); i >= 0 && i < Depth {
				o.Rank = i + 1
			}
		}
		outs = append(outs, o)
	}
	return outs, nil
}
