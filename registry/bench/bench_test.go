package bench_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/registry/bench"
)

// TestScore: hand-computed measures at the edges: rank 1, rank 10, rank
// 11 (a miss), a failed query.
func TestScore(t *testing.T) {
	outs := []bench.Outcome{
		{Task: "a", Rank: 1, Latency: 1 * time.Millisecond},
		{Task: "b", Rank: 10, Latency: 2 * time.Millisecond},
		{Task: "c", Rank: 0, Latency: 3 * time.Millisecond},
		{Task: "d", Err: "down", Latency: 4 * time.Millisecond},
	}
	m := bench.Score(outs)
	want := bench.Measures{Tasks: 4, Answered: 3, Failed: 1, Found: 2, Recall1: 0.25, Recall5: 0.25, Recall10: 0.5,
		MRR: math.Round((1+0.1)/4*1e4) / 1e4, NDCG10: math.Round((1+1/math.Log2(11))/4*1e4) / 1e4,
		Latency: bench.Latency{P50: 2, P90: 4, P99: 4, Max: 4}}
	if m != want {
		t.Fatalf("got  %+v\nwant %+v", m, want)
	}
	if z := bench.Score(nil); z.Tasks != 0 || z.Recall10 != 0 {
		t.Fatalf("empty %+v", z)
	}
}

// TestRunStopsAfterFailures: a registry that fails stopAfter queries in a
// row is not asked the rest, which count as failed.
func TestRunStopsAfterFailures(t *testing.T) {
	tasks := make([]bench.Task, 10)
	for i := range tasks {
		tasks[i] = bench.Task{ID: string(rune('a' + i)), Query: "q", Expected: "x"}
	}
	asked := 0
	outs, err := bench.Run(context.Background(), tasks, func(context.Context, string, int) ([]string, error) {
		asked++
		return nil, errors.New("down")
	}, 3)
	if err != nil || asked != 3 || len(outs) != 10 || bench.Score(outs).Failed != 10 {
		t.Fatalf("asked %d, %d outcomes, err %v", asked, len(outs), err)
	}
}

// TestFreeze: one task per entry with enough queries, its last query, in
// source and identifier order whatever the input order.
func TestFreeze(t *testing.T) {
	ms := []bench.Manifest{
		{Source: "fs:b.json", SHA256: "bb", Entries: []bench.ManifestEntry{{ID: "urn:air:b:2", Queries: []string{"one", " two  words "}}, {ID: "urn:air:b:1", Queries: []string{"only"}}}},
		{Source: "fs:a.json", SHA256: "aa", Entries: []bench.ManifestEntry{{ID: "urn:air:a:1", Queries: []string{"x", "y", "z"}}}},
	}
	set := bench.Freeze("7", ms)
	if set.Version != "7" || len(set.Tasks) != 2 {
		t.Fatalf("%+v", set)
	}
	if got := set.Tasks[0]; got != (bench.Task{ID: "t001", Query: "z", Expected: "urn:air:a:1", Manifest: "fs:a.json", SHA256: "aa"}) {
		t.Fatalf("first %+v", got)
	}
	if got := set.Tasks[1]; got.Query != "two words" || got.Expected != "urn:air:b:2" {
		t.Fatalf("second %+v", got)
	}
	ms[0], ms[1] = ms[1], ms[0]
	if again := bench.Freeze("7", ms); again.Tasks[0] != set.Tasks[0] || again.Tasks[1] != set.Tasks[1] {
		t.Fatal("order dependent")
	}
}

// TestHoldOut: the frozen query leaves its own entry's queries only,
// compared case- and space-insensitively.
func TestHoldOut(t *testing.T) {
	task := bench.Frozen().Tasks[0]
	qs := []string{"  " + upper(task.Query) + " ", "something else"}
	if got := bench.HoldOut(task.Expected, qs); len(got) != 1 || got[0] != "something else" {
		t.Fatalf("held out of its entry: %q", got)
	}
	if got := bench.HoldOut("urn:air:other.example:x", qs); len(got) != 2 {
		t.Fatalf("held out of another entry: %q", got)
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
