package registry

// The frozen retrieval benchmark (package bench): GET /bench/tasks.json,
// GET /bench.json, GET /bench, the scheduled runs and RunBench for
// `ardx bench`.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/bench"
	"github.com/ardx-dev/ardx/web"
)

// BenchConfig configures the scheduled benchmark runs.
type BenchConfig struct {
	// Interval between two scheduled runs; zero runs none (RunBench still
	// runs on demand). The first run comes Interval after the last stored
	// one, or a minute after StartBench when none is stored.
	Interval time.Duration
	// QueryTimeout bounds one upstream query; zero means 5 s.
	QueryTimeout time.Duration
}

// Bench triggers, recorded in each report.
const (
	BenchScheduled = "scheduled"
	BenchOnDemand  = "on demand"
)

// benchHistory is how many past runs /bench.json summarises.
const benchHistory = 30

// benchState is the service's benchmark state.
type benchState struct {
	runMu sync.Mutex // one run at a time
	stop  context.CancelFunc
	done  chan struct{}

	mu     sync.Mutex
	body   []byte    // the /bench.json body, nil until built
	doc    *benchDoc // what body encodes
	active bool      // a run is under way
	next   time.Time
}

// RunBench runs the frozen benchmark now against this registry and every
// configured and public upstream, stores the report and returns it. Runs
// never overlap: a second caller waits for the first.
func (s *Service) RunBench(ctx context.Context, trigger string) (bench.Report, error) {
	s.bench.runMu.Lock()
	defer s.bench.runMu.Unlock()
	s.setBenchActive(true)
	defer s.setBenchActive(false)

	ctx = WithProbeTraffic(ctx)
	set := bench.Frozen()
	_, sha := bench.FrozenJSON()
	entries, err := s.ix.CountPublic(ctx)
	if err != nil {
		return bench.Report{}, err
	}
	info := bench.IndexInfo{Entries: entries, Version: s.ix.MappingVersion()}
	local := bench.Target{Source: s.cfg.PublicURL, Search: s.benchLocalSearch}
	var ups []bench.Target
	for _, up := range s.upstreams {
		if up.kind == kindDiscovered {
			continue
		}
		ups = append(ups, bench.Target{Source: up.base, Search: s.benchUpstreamSearch(up), StopAfter: 3})
	}
	rep, err := bench.Measure(ctx, set, sha, local, info, ups, s.cfg.Now)
	if err != nil {
		return rep, err
	}
	rep.Trigger = trigger
	body, err := json.Marshal(rep)
	if err != nil {
		return rep, err
	}
	if err := s.db.PutBenchRun(rep.RunAt, body); err != nil {
		return rep, err
	}
	s.bench.mu.Lock()
	s.bench.body = nil // rebuilt from kv on the next read
	s.bench.mu.Unlock()
	if m := rep.Registry.Measures; m != nil {
		s.log.Info("benchmark run", "trigger", trigger, "tasks", rep.TaskSet.Tasks,
			"recall_at_10", m.Recall10, "mrr", m.MRR, "upstreams", len(rep.Upstreams))
	} else {
		s.log.Warn("benchmark run: this registry answered none of the queries", "trigger", trigger, "error", rep.Registry.Error)
	}
	return rep, nil
}

func (s *Service) setBenchActive(on bool) {
	s.bench.mu.Lock()
	s.bench.active = on
	s.bench.body = nil
	s.bench.mu.Unlock()
}

// benchLocalSearch is the search POST /search runs with federation none
// (public entries only: the benchmark has no viewer), recorded in the
// demand log like one, marked as probe traffic by ctx.
func (s *Service) benchLocalSearch(ctx context.Context, text string, limit int) ([]string, error) {
	res, err := s.ix.Search(ctx, index.SearchRequest{Text: text, Size: limit})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(res.Hits))
	var returned []kv.ReturnedEntry
	for i, h := range res.Hits {
		ids[i] = h.ID
		returned = append(returned, kv.ReturnedEntry{ID: h.ID, Rank: i + 1})
	}
	s.recordSearch(ctx, searchRequest{queryModel: queryModel{Text: text}, Limit: limit, Federation: fedNone}, returned, nil)
	return ids, nil
}

// benchUpstreamSearch asks one upstream the way federation does, with
// federation none so that its own index answers.
func (s *Service) benchUpstreamSearch(up upstream) bench.SearchFunc {
	timeout := s.cfg.Bench.QueryTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return func(ctx context.Context, text string, limit int) ([]string, error) {
		qctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		res := s.askUpstream(qctx, up, searchRequest{queryModel: queryModel{Text: text}, Limit: limit, Federation: fedNone}, limit)
		if res.err != nil {
			return nil, fmt.Errorf("%s: %w", res.outcome, res.err)
		}
		ids := make([]string, len(res.items))
		for i, it := range res.items {
			ids[i] = it.id
		}
		return ids, nil
	}
}

// StartBench runs the benchmark on cfg.Bench.Interval until Close. A
// registry restarted within the interval does not run again early: the
// schedule counts from the last stored run.
func (s *Service) StartBench(ctx context.Context) {
	iv := s.cfg.Bench.Interval
	if iv <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	s.bench.stop = cancel
	s.bench.done = make(chan struct{})
	next := s.cfg.Now().Add(time.Minute)
	if runs, err := s.db.BenchRuns(1); err == nil && len(runs) == 1 {
		var last struct {
			RunAt time.Time `json:"runAt"`
		}
		if json.Unmarshal(runs[0], &last) == nil && !last.RunAt.IsZero() {
			next = last.RunAt.Add(iv)
		}
	}
	go func() {
		defer close(s.bench.done)
		for {
			s.bench.mu.Lock()
			s.bench.next = next
			s.bench.body = nil
			s.bench.mu.Unlock()
			t := time.NewTimer(max(next.Sub(s.cfg.Now()), 0))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if _, err := s.RunBench(ctx, BenchScheduled); err != nil && ctx.Err() == nil {
				s.log.Error("scheduled benchmark run failed", "err", err)
			}
			next = s.cfg.Now().Add(iv)
		}
	}()
}

// closeBench stops the schedule and waits for a run under way.
func (s *Service) closeBench(ctx context.Context) error {
	if s.bench.stop == nil {
		return nil
	}
	s.bench.stop()
	select {
	case <-s.bench.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// benchDoc is the body of /bench.json.
type benchDoc struct {
	Latest   *bench.Report    `json:"latest"` // null until the first run
	History  []benchPoint     `json:"history"`
	Schedule benchSchedule    `json:"schedule"`
	TaskSet  bench.TaskSetRef `json:"taskSet"`
}

// benchPoint summarises one past run, newest first.
type benchPoint struct {
	RunAt    time.Time `json:"runAt"`
	TaskSet  string    `json:"taskSetVersion"`
	Recall1  float64   `json:"recallAt1"`
	Recall10 float64   `json:"recallAt10"`
	MRR      float64   `json:"mrr"`
	NDCG10   float64   `json:"ndcgAt10"`
	P50      float64   `json:"latencyP50Ms"`
}

type benchSchedule struct {
	IntervalSeconds int        `json:"intervalSeconds"` // 0: no scheduled runs
	NextRunAt       *time.Time `json:"nextRunAt,omitempty"`
	Running         bool       `json:"running"` // a run is under way
	OnDemand        string     `json:"onDemand"`
}

// benchJSON returns the /bench.json body and its ETag, built from kv once
// per run.
func (s *Service) benchJSON() ([]byte, string, *benchDoc, error) {
	s.bench.mu.Lock()
	defer s.bench.mu.Unlock()
	if s.bench.body != nil {
		return s.bench.body, etagOf(s.bench.body), s.bench.doc, nil
	}
	runs, err := s.db.BenchRuns(benchHistory)
	if err != nil {
		return nil, "", nil, err
	}
	set := bench.Frozen()
	_, sha := bench.FrozenJSON()
	doc := benchDoc{
		History: []benchPoint{},
		Schedule: benchSchedule{IntervalSeconds: int(s.cfg.Bench.Interval / time.Second), Running: s.bench.active,
			OnDemand: "ardx bench (on the registry's data dir, with the server stopped)"},
		TaskSet: bench.TaskSetRef{Version: set.Version, Tasks: len(set.Tasks), SHA256: sha, URL: "/bench/tasks.json"},
	}
	if !s.bench.next.IsZero() {
		n := s.bench.next.UTC()
		doc.Schedule.NextRunAt = &n
	}
	for i, raw := range runs {
		var rep bench.Report
		if err := json.Unmarshal(raw, &rep); err != nil {
			continue // a report of an older format: leave it out
		}
		if i == 0 {
			doc.Latest = &rep
		}
		p := benchPoint{RunAt: rep.RunAt, TaskSet: rep.TaskSet.Version}
		if m := rep.Registry.Measures; m != nil {
			p.Recall1, p.Recall10, p.MRR, p.NDCG10, p.P50 = m.Recall1, m.Recall10, m.MRR, m.NDCG10, m.Latency.P50
		}
		doc.History = append(doc.History, p)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, "", nil, err
	}
	s.bench.body, s.bench.doc = append(b, '\n'), &doc
	return s.bench.body, etagOf(s.bench.body), &doc, nil
}

func etagOf(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// serveCacheable writes body with its ETag, answering a matching
// If-None-Match with 304 (http.ServeContent does the conditional part).
func serveCacheable(w http.ResponseWriter, r *http.Request, contentType, etag, cacheControl string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("ETag", etag)
	h.Set("Cache-Control", cacheControl)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// handleBenchTasks handles "GET /bench/tasks.json".
func (s *Service) handleBenchTasks(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.benchNoParams(w, r, "GET /bench/tasks.json") {
		return
	}
	body, sha := bench.FrozenJSON()
	// The set changes only with the binary.
	serveCacheable(w, r, "application/json", `"`+sha+`"`, "public, max-age=86400", body)
}

// handleBenchJSON handles "GET /bench.json": always JSON, never negotiated.
func (s *Service) handleBenchJSON(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.benchNoParams(w, r, "GET /bench.json") {
		return
	}
	body, etag, _, err := s.benchJSON()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	serveCacheable(w, r, "application/json", etag, "public, max-age=300", body)
}

// handleBench handles "GET /bench": the report as HTML to a browser, as
// /bench.json's body to anyone else.
func (s *Service) handleBench(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.benchNoParams(w, r, "GET /bench") {
		return
	}
	body, etag, doc, err := s.benchJSON()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Vary", "Accept")
	if !web.WantsHTML(r) {
		serveCacheable(w, r, "application/json", etag, "public, max-age=300", body)
		return
	}
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, "bench.html", benchPage(doc)); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeHTMLPage(w, buf.Bytes())
}

func (s *Service) benchNoParams(w http.ResponseWriter, r *http.Request, what string) bool {
	var fe fieldErrors
	fe.onlyParams(r.URL.Query(), what)
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return false
	}
	return true
}

// page data of templates/bench.html.
type benchView struct {
	Doc    *benchDoc
	Rows   []benchRow
	Chart  template.HTML
	Legend []legendItem
}

type benchRow struct {
	Source                 string
	Self                   bool
	Answered               bool
	Error                  string
	R1, R5, R10, MRR, NDCG string
	P50, P90, P99          string
	Tasks, Found, Failed   int
}

// benchMeasureNames are the chart's bars per registry, with their colours.
var benchMeasureNames = []struct{ name, colour string }{
	{"recall@1", "#1f5fa8"}, {"recall@5", "#3f8fd0"}, {"recall@10", "#8cc3ea"}, {"MRR", "#2e8b57"}, {"nDCG@10", "#c8553d"},
}

func benchPage(doc *benchDoc) benchView {
	v := benchView{Doc: doc}
	for _, m := range benchMeasureNames {
		v.Legend = append(v.Legend, legendItem{Class: m.name, Colour: m.colour})
	}
	if doc.Latest == nil {
		return v
	}
	results := append([]bench.Result{doc.Latest.Registry}, doc.Latest.Upstreams...)
	for i, res := range results {
		row := benchRow{Source: res.Source, Self: i == 0, Answered: res.Answered, Error: res.Error}
		if m := res.Measures; m != nil {
			row.R1, row.R5, row.R10 = pctText(m.Recall1), pctText(m.Recall5), pctText(m.Recall10)
			row.MRR, row.NDCG = fmt.Sprintf("%.3f", m.MRR), fmt.Sprintf("%.3f", m.NDCG10)
			row.P50, row.P90, row.P99 = fmt.Sprintf("%.1f ms", m.Latency.P50), fmt.Sprintf("%.1f ms", m.Latency.P90), fmt.Sprintf("%.1f ms", m.Latency.P99)
			row.Tasks, row.Found, row.Failed = m.Tasks, m.Found, m.Failed
		}
		v.Rows = append(v.Rows, row)
	}
	// A grouped bar chart: per registry that answered, one bar per measure,
	// on a 0-1 scale.
	const width, labelW, barH, gap = 640, 200, 12, 14
	var answered []bench.Result
	for _, res := range results {
		if res.Measures != nil {
			answered = append(answered, res)
		}
	}
	groupH := barH*len(benchMeasureNames) + gap
	height := groupH*len(answered) + 30
	var svg bytes.Buffer
	fmt.Fprintf(&svg, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" style="max-width:760px" role="img" aria-label="recall, MRR and nDCG of each registry on the frozen task set">`, width, height)
	barW := float64(width - labelW - 50)
	for _, tick := range []float64{0, 0.25, 0.5, 0.75, 1} {
		x := float64(labelW) + tick*barW
		fmt.Fprintf(&svg, `<line x1="%.1f" y1="0" x2="%.1f" y2="%d" stroke="#dde2e8"/><text x="%.1f" y="%d" font-size="11" fill="#39424d" text-anchor="middle">%.2g</text>`, x, x, height-18, x, height-4, tick)
	}
	for i, res := range answered {
		y := i * groupH
		label := res.Source
		if len(label) > 30 {
			label = label[:29] + "…"
		}
		fmt.Fprintf(&svg, `<text x="0" y="%d" font-size="13" fill="#1b1f24">%s</text>`, y+groupH/2+2, template.HTMLEscapeString(label))
		vals := []float64{res.Measures.Recall1, res.Measures.Recall5, res.Measures.Recall10, res.Measures.MRR, res.Measures.NDCG10}
		for j, val := range vals {
			by := y + j*barH
			fmt.Fprintf(&svg, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %.3f</title></rect>`, labelW, by, max(val*barW, 1), barH-2, benchMeasureNames[j].colour, benchMeasureNames[j].name, val)
			fmt.Fprintf(&svg, `<text x="%.1f" y="%d" font-size="10" fill="#1b1f24">%.2f</text>`, float64(labelW)+max(val*barW, 1)+4, by+barH-3, val)
		}
	}
	svg.WriteString(`</svg>`)
	v.Chart = template.HTML(svg.String()) // numbers and escaped labels only
	return v
}

func pctText(x float64) string { return fmt.Sprintf("%.1f%%", x*100) }
