package bench

import (
	"context"
	"time"
)

// Report is one benchmark run: this registry's measures on the frozen set
// and those of each upstream registry asked the same queries.
type Report struct {
	RunAt      time.Time  `json:"runAt"`
	DurationMs float64    `json:"durationMs"`
	Trigger    string     `json:"trigger"` // "scheduled" or "on demand"
	TaskSet    TaskSetRef `json:"taskSet"`
	Registry   Result     `json:"registry"`
	// Upstreams are the other registries asked, each with federation none
	// so that its own index answers; one that failed every query has no
	// measures, only its error.
	Upstreams []Result `json:"upstreams"`
	Method    []string `json:"method"`
}

// TaskSetRef names the task set a run used.
type TaskSetRef struct {
	Version string `json:"version"`
	Tasks   int    `json:"tasks"`
	SHA256  string `json:"sha256"` // of tasks.json as served
	URL     string `json:"url"`
}

// Result is one registry's part of a run.
type Result struct {
	Source   string     `json:"source"`
	Index    *IndexInfo `json:"index,omitempty"` // this registry only
	Answered bool       `json:"answered"`
	Error    string     `json:"error,omitempty"`
	Measures *Measures  `json:"measures,omitempty"`
	// Misses are the tasks whose expected entry was not in the first
	// Depth results (this registry only: the list to look at).
	Misses []string `json:"misses,omitempty"`
}

// IndexInfo describes the index a run measured.
type IndexInfo struct {
	Entries uint64 `json:"entries"` // public entries
	Version string `json:"version"` // mapping and schema version
}

// Target is a registry to measure.
type Target struct {
	Source string
	Search SearchFunc
	// StopAfter: see Run. Zero never stops (this registry); upstreams use
	// a few, so a dead one is not asked the whole set.
	StopAfter int
}

// Method says how a run measures, carried in every report.
var Method = []string{
	"Each task's query is asked once, with a limit of 10; the expected entry's rank is its position among the identifiers returned.",
	"recall@k: share of tasks whose entry is in the first k; MRR: mean of 1/rank (0 beyond rank 10, so MRR@10); nDCG@10: mean of 1/log2(rank+1) with one relevant entry per task (ideal DCG 1).",
	"A query that fails counts as a miss. Latency: nearest-rank percentiles of the queries asked one at a time, in milliseconds; this registry's are measured at its index (caches as a repeated query meets them), an upstream's over the network.",
	"Upstreams are asked with federation none, so each answers from its own index. Benchmark searches are marked as probe traffic in the demand log.",
	"The queries are held out of this registry's index of the expected entries; an upstream holds its own copy of the publishers' manifests and may still index them.",
}

// Measure runs set against local and then each upstream, in order. It
// returns the report with what was measured when ctx ends early, and
// ctx's error.
func Measure(ctx context.Context, set TaskSet, setSHA string, local Target, info IndexInfo, upstreams []Target, now func() time.Time) (Report, error) {
	start := now()
	rep := Report{
		RunAt:     start.UTC(),
		TaskSet:   TaskSetRef{Version: set.Version, Tasks: len(set.Tasks), SHA256: setSHA, URL: "/bench/tasks.json"},
		Upstreams: []Result{},
		Method:    Method,
	}
	one := func(t Target, misses bool) (Result, error) {
		outs, err := Run(ctx, set.Tasks, t.Search, t.StopAfter)
		res := Result{Source: t.Source}
		if err != nil {
			return res, err
		}
		m := Score(outs)
		res.Answered = m.Answered > 0
		if !res.Answered {
			res.Error = "answered none of the queries"
			for _, o := range outs {
				if o.Err != "" {
					res.Error += ": " + o.Err
					break
				}
			}
			return res, nil
		}
		res.Measures = &m
		if misses {
			for _, o := range outs {
				if o.Rank == 0 {
					res.Misses = append(res.Misses, o.Task)
				}
			}
		}
		return res, nil
	}
	var err error
	rep.Registry, err = one(local, true)
	rep.Registry.Index = &info
	for _, up := range upstreams {
		if err != nil {
			break
		}
		var r Result
		r, err = one(up, false)
		rep.Upstreams = append(rep.Upstreams, r)
	}
	rep.DurationMs = ms(now().Sub(start))
	return rep, err
}
