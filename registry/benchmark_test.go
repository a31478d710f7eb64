package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/internal/pagecheck"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/bench"
	"github.com/ardx-dev/ardx/registry/ingest"
)

// newCorpusServer serves a registry over the embedded default corpus,
// ingested the way a first start ingests it.
func newCorpusServer(tb testing.TB, cfg registry.Config) *fixture {
	tb.Helper()
	f := newTestServer(tb, cfg, []string{})
	in := &ingest.Ingester{DB: f.db, Index: f.ix}
	rep, err := in.IngestFS(tb.Context(), os.DirFS("../testdata/corpus"), ".")
	if err != nil {
		tb.Fatal(err)
	}
	if rep.Rejected() > 0 || len(rep.Errors()) > 0 {
		tb.Fatalf("corpus: %d rejected, errors %v", rep.Rejected(), rep.Errors())
	}
	return f
}

// TestBenchTasksMatchCorpus: every frozen task names a manifest of the
// default corpus by the key and sha256 the ingester records, an entry that
// manifest holds, and one of that entry's representative queries.
func TestBenchTasksMatchCorpus(t *testing.T) {
	f := newCorpusServer(t, registry.Config{})
	status, body := f.do(t, http.MethodGet, "/bench/tasks.json", "")
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	var set bench.TaskSet
	if err := json.Unmarshal(body, &set); err != nil {
		t.Fatal(err)
	}
	if set.Version == "" || len(set.Tasks) < 50 {
		t.Fatalf("set version %q with %d tasks", set.Version, len(set.Tasks))
	}
	ids := map[string]bool{}
	for _, task := range set.Tasks {
		if ids[task.ID] {
			t.Fatalf("task id %s twice", task.ID)
		}
		ids[task.ID] = true
		e, err := f.db.GetEntry(task.Expected)
		if err != nil {
			t.Fatalf("%s: expected %s: %v", task.ID, task.Expected, err)
		}
		if e.Provenance.Source != task.Manifest || e.Provenance.SHA256 != task.SHA256 {
			t.Errorf("%s: read from %s %s, the index has it from %s %s: the default corpus changed; regenerate the task set on purpose (go generate ./registry/bench with a new -version)",
				task.ID, task.Manifest, task.SHA256, e.Provenance.Source, e.Provenance.SHA256)
		}
		var b struct {
			DisplayName string   `json:"displayName"`
			RQ          []string `json:"representativeQueries"`
		}
		_ = json.Unmarshal(e.Body, &b)
		if !slices.Contains(b.RQ, task.Query) {
			t.Errorf("%s: %q is not a representative query of %s", task.ID, task.Query, task.Expected)
		}
		if strings.EqualFold(strings.TrimSpace(b.DisplayName), task.Query) {
			t.Errorf("%s: the query is %s's display name, an exact match in the name field", task.ID, task.Expected)
		}
		// Held out: the entry's indexed queries do not hold it, and keep
		// at least one other.
		d, err := ingest.ToDoc(e)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(d.Queries, task.Query) || len(d.Queries) == 0 {
			t.Errorf("%s: indexed queries of %s: %q", task.ID, task.Expected, d.Queries)
		}
	}
}

// TestBenchTasksCacheable: the set carries an ETag and a matching
// If-None-Match gets 304.
func TestBenchTasksCacheable(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	for _, path := range []string{"/bench/tasks.json", "/bench.json"} {
		resp, err := http.Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		etag := resp.Header.Get("ETag")
		if resp.StatusCode != http.StatusOK || etag == "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("%s: %d etag %q type %q", path, resp.StatusCode, etag, resp.Header.Get("Content-Type"))
		}
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
		req.Header.Set("If-None-Match", etag)
		req.Header.Set("Accept", "text/html") // never negotiated
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Fatalf("%s with If-None-Match: %d", path, resp.StatusCode)
		}
	}
	if status, _ := f.do(t, http.MethodGet, "/bench.json?x=1", ""); status != http.StatusUnprocessableEntity {
		t.Fatalf("unknown parameter: %d", status)
	}
}

// benchUpstream is a registry that answers each frozen query with the
// expected entry at a rank it chooses per task (0: not at all), after
// filler results; it records the federation mode it was asked with.
func benchUpstream(t *testing.T, set bench.TaskSet, rankOf func(i int) int) (*httptest.Server, *[]string) {
	byQuery := map[string]int{}
	for i, task := range set.Tasks {
		byQuery[task.Query] = i
	}
	var modes []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Query struct {
				Text string `json:"text"`
			} `json:"query"`
			Federation string `json:"federation"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		modes = append(modes, req.Federation)
		i, ok := byQuery[req.Query.Text]
		var results []map[string]any
		rank := 0
		if ok {
			rank = rankOf(i)
		}
		for k := 1; k <= 10; k++ {
			id := fmt.Sprintf("urn:air:filler.example:x:%d", k)
			if k == rank {
				id = set.Tasks[i].Expected
			}
			results = append(results, map[string]any{"identifier": id, "displayName": id, "type": "application/mcp-server-card+json", "url": "https://filler.example/card.json", "score": 50, "source": "x"})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
	}))
	t.Cleanup(srv.Close)
	return srv, &modes
}

// measuresOf computes the measures from ranks, independently of package
// bench: recall@k, MRR@10 and nDCG@10 with one relevant entry.
func measuresOf(ranks []int) (r1, r5, r10, mrr, ndcg float64) {
	for _, r := range ranks {
		if r < 1 || r > 10 {
			continue
		}
		if r == 1 {
			r1++
		}
		if r <= 5 {
			r5++
		}
		r10++
		mrr += 1.0 / float64(r)
		ndcg += math.Log(2) / math.Log(float64(r)+1)
	}
	n := float64(len(ranks))
	return r1 / n, r5 / n, r10 / n, mrr / n, ndcg / n
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-4 }

// TestBenchRun runs the benchmark and recomputes every number of
// /bench.json independently: this registry's from POST /search with each
// frozen query, an upstream's from the ranks the fake answered with, and a
// dead upstream is listed without measures.
func TestBenchRun(t *testing.T) {
	set := bench.Frozen()
	up, modes := benchUpstream(t, set, func(i int) int { return i % 12 }) // ranks 0..11: some beyond 10
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer dead.Close()
	f := newCorpusServer(t, registry.Config{Upstreams: []string{up.URL, dead.URL}})

	rep, err := f.svc.RunBench(t.Context(), registry.BenchOnDemand)
	if err != nil {
		t.Fatal(err)
	}
	status, body := f.do(t, http.MethodGet, "/bench.json", "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var doc struct {
		Latest  *bench.Report `json:"latest"`
		History []struct {
			RunAt time.Time `json:"runAt"`
		} `json:"history"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Latest == nil || len(doc.History) != 1 || !doc.Latest.RunAt.Equal(rep.RunAt) {
		t.Fatalf("latest %+v history %d", doc.Latest, len(doc.History))
	}
	got := doc.Latest

	// This registry, recomputed through the public search.
	var ranks []int
	for _, task := range set.Tasks {
		res := f.search(t, mustJSON(t, map[string]any{"query": map[string]any{"text": task.Query}, "federation": "none", "limit": 10}))
		ranks = append(ranks, slices.Index(ids(res.Results), task.Expected)+1)
	}
	r1, r5, r10, mrr, ndcg := measuresOf(ranks)
	m := got.Registry.Measures
	if m == nil || m.Tasks != len(set.Tasks) || !near(m.Recall1, r1) || !near(m.Recall5, r5) || !near(m.Recall10, r10) || !near(m.MRR, mrr) || !near(m.NDCG10, ndcg) {
		t.Fatalf("registry measures %+v, recomputed r1 %.4f r5 %.4f r10 %.4f mrr %.4f ndcg %.4f", m, r1, r5, r10, mrr, ndcg)
	}
	if m.Latency.P50 <= 0 || m.Latency.P50 > m.Latency.P90 || m.Latency.P90 > m.Latency.P99 || m.Latency.P99 > m.Latency.Max {
		t.Fatalf("latency %+v", m.Latency)
	}
	n, _ := f.ix.CountPublic(t.Context())
	if got.Registry.Index == nil || got.Registry.Index.Entries != n || got.Registry.Index.Version == "" {
		t.Fatalf("index %+v, want %d entries", got.Registry.Index, n)
	}
	t.Logf("this registry: %+v", *m)
	// Held out, the set is not trivially solved, and not hopeless either.
	if r10 == 1 || r10 < 0.5 {
		t.Errorf("recall@10 %.3f: held-out queries should be hard but findable", r10)
	}

	// The upstream that answered, from the ranks it was told to give.
	if len(got.Upstreams) != 2 {
		t.Fatalf("upstreams %+v", got.Upstreams)
	}
	ranks = ranks[:0]
	for i := range set.Tasks {
		ranks = append(ranks, i%12)
	}
	r1, r5, r10, mrr, ndcg = measuresOf(ranks)
	um := got.Upstreams[0].Measures
	if got.Upstreams[0].Source != up.URL || um == nil || !near(um.Recall1, r1) || !near(um.Recall5, r5) || !near(um.Recall10, r10) || !near(um.MRR, mrr) || !near(um.NDCG10, ndcg) {
		t.Fatalf("upstream %+v measures %+v; recomputed r1 %.4f r5 %.4f r10 %.4f mrr %.4f ndcg %.4f", got.Upstreams[0], um, r1, r5, r10, mrr, ndcg)
	}
	for _, mode := range *modes {
		if mode != "none" {
			t.Fatalf("upstream asked with federation %q", mode)
		}
	}
	if len(*modes) != len(set.Tasks) {
		t.Fatalf("upstream asked %d queries, want %d", len(*modes), len(set.Tasks))
	}
	if d := got.Upstreams[1]; d.Source != dead.URL || d.Answered || d.Measures != nil || d.Error == "" {
		t.Fatalf("dead upstream %+v", d)
	}

	// Benchmark searches are probe traffic; the test's own are not.
	var probes, callers int
	for _, rec := range f.records(t) {
		if rec.Probe {
			probes++
		} else {
			callers++
		}
	}
	if probes != len(set.Tasks) || callers != len(set.Tasks) {
		t.Fatalf("demand log: %d probe and %d caller searches, want %d each", probes, callers, len(set.Tasks))
	}
	// /stats counts what callers asked, not the benchmark.
	_, statsBody := f.do(t, http.MethodGet, "/stats", "")
	var stats struct {
		Searches struct {
			Total int `json:"total"`
		} `json:"searches"`
	}
	if err := json.Unmarshal(statsBody, &stats); err != nil || stats.Searches.Total != len(set.Tasks) {
		t.Fatalf("/stats counts %d searches, want %d: %s", stats.Searches.Total, len(set.Tasks), statsBody)
	}

	// The HTML form: a table row per registry and the chart.
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/bench", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page strings.Builder
	_, _ = io.Copy(&page, resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(page.String(), "<svg") || !strings.Contains(page.String(), up.URL) || !strings.Contains(page.String(), "did not answer") {
		t.Fatalf("html page: %s", page.String())
	}
}

// TestBenchSchedule: a scheduled registry runs the benchmark on its own
// and /bench.json says when the next run is.
func TestBenchSchedule(t *testing.T) {
	now := time.Now()
	// A stored run an interval ago makes the first scheduled run due now.
	f := newTestServer(t, registry.Config{Bench: registry.BenchConfig{Interval: time.Hour}}, nil)
	old := bench.Report{RunAt: now.Add(-time.Hour - time.Second), Trigger: registry.BenchOnDemand}
	b, _ := json.Marshal(old)
	if err := f.db.PutBenchRun(old.RunAt, b); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f.svc.StartBench(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runs, err := f.db.BenchRuns(0)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 2 {
			var rep bench.Report
			if err := json.Unmarshal(runs[0], &rep); err != nil || rep.Trigger != registry.BenchScheduled {
				t.Fatalf("scheduled run %s: %v", runs[0], err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no scheduled run")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, body := f.do(t, http.MethodGet, "/bench.json", "")
	var doc struct {
		Schedule struct {
			IntervalSeconds int        `json:"intervalSeconds"`
			NextRunAt       *time.Time `json:"nextRunAt"`
		} `json:"schedule"`
	}
	_ = json.Unmarshal(body, &doc)
	if doc.Schedule.IntervalSeconds != 3600 || doc.Schedule.NextRunAt == nil || doc.Schedule.NextRunAt.Before(now.Add(59*time.Minute)) {
		t.Fatalf("schedule %s", body)
	}
}

// TestBenchPageReadableInChromium measures the contrast of every piece of
// text of /bench in headless Chromium, before any run and after one with
// an upstream that answered and one that did not.
func TestBenchPageReadableInChromium(t *testing.T) {
	set := bench.Frozen()
	up, _ := benchUpstream(t, set, func(i int) int { return i % 7 })
	dead := httptest.NewServer(http.NotFoundHandler())
	defer dead.Close()
	f := newCorpusServer(t, registry.Config{Upstreams: []string{up.URL, dead.URL}})
	pagecheck.Check(t, f.svc.Handler(), "/bench")
	if _, err := f.svc.RunBench(t.Context(), registry.BenchOnDemand); err != nil {
		t.Fatal(err)
	}
	pagecheck.Check(t, f.svc.Handler(), "/bench")
	if dir := os.Getenv("ARDX_BENCH_PAGE_DIR"); dir != "" {
		// For a look at the page: ARDX_BENCH_PAGE_DIR=/tmp/x go test -run ...
		req := httptest.NewRequest(http.MethodGet, "/bench", nil)
		req.Header.Set("Accept", "text/html")
		rec := httptest.NewRecorder()
		f.svc.Handler().ServeHTTP(rec, req)
		if err := os.WriteFile(dir+"/bench.html", rec.Body.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkBenchRun measures one on-demand run of the frozen set against
// the default corpus, no upstreams.
func BenchmarkBenchRun(b *testing.B) {
	f := newCorpusServer(b, registry.Config{})
	for b.Loop() {
		if _, err := f.svc.RunBench(b.Context(), registry.BenchOnDemand); err != nil {
			b.Fatal(err)
		}
	}
}
