package registry

// POST /plan: a task in plain words decomposed into steps (package plan),
// each with candidate resources ranked by the registry's own search.

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/probe"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/registry/pay"
	"github.com/ardx-dev/ardx/registry/plan"
	"github.com/ardx-dev/ardx/registry/sources"
)

const (
	maxPlanTaskBytes      = 2000
	defaultPlanCandidates = 3
	maxPlanCandidates     = 10
	// planVocabularySize bounds the capabilities and tags read from the
	// index for the decomposition (the most frequent first).
	planVocabularySize = 5000
)

// planNotice is carried in every plan: the registry proposes, the caller
// disposes.
const planNotice = "These are candidates, not choices. The caller chooses among them, connects to them and verifies their trust (identity, attestations, terms, price) itself; this registry called none of them and vouches for none."

// planMethod says how the plan was made.
const planMethod = "Deterministic, no language model: the task is split into sentences, then into clauses at sequencing words (then, after that, before, after, finally...) and at 'and' or a comma that opens a new action; each clause's leading action word is its verb and the rest its object; capabilities and tags are those of this registry's index that the clause names. Each step's candidates are this registry's search (federation none) for the step's words. The same task and index give the same plan."

// planRequest is a validated POST /plan body.
type planRequest struct {
	Task       string
	Candidates int
}

func (s *Service) parsePlan(m map[string]json.RawMessage) (planRequest, error) {
	var fe fieldErrors
	req := planRequest{Candidates: defaultPlanCandidates}
	fe.onlyMembers(m, "", "a plan request", "task", "candidates")
	raw, ok := m["task"]
	if !ok || isNull(raw) {
		fe.add("task", "is required: the task in plain words")
	} else if t, ok := rawString(raw); !ok {
		fe.add("task", "must be a string: the task in plain words")
	} else {
		t = strings.TrimSpace(t)
		switch {
		case t == "":
			fe.add("task", "must not be empty")
		case len(t) > maxPlanTaskBytes:
			fe.add("task", "must be at most "+strconv.Itoa(maxPlanTaskBytes)+" bytes")
		case !isPlainText(t):
			fe.add("task", "must be text in words: valid UTF-8 with letters, no control characters")
		default:
			req.Task = t
		}
	}
	if raw, ok := m["candidates"]; ok && !isNull(raw) {
		n, ok := rawInt(raw)
		if !ok || n < 1 || n > maxPlanCandidates {
			fe.add("candidates", "must be an integer from 1 to "+strconv.Itoa(maxPlanCandidates))
		} else {
			req.Candidates = n
		}
	}
	if p := fe.problem(s.problems); p != nil {
		return req, p
	}
	return req, nil
}

// isPlainText reports whether t reads as words: valid UTF-8 (JSON
// decoding turns invalid bytes into U+FFFD), no control characters but
// line breaks and tabs, and at least one letter.
func isPlainText(t string) bool {
	if !utf8.ValidString(t) || strings.ContainsRune(t, utf8.RuneError) {
		return false
	}
	letter := false
	for _, r := range t {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
		case unicode.IsControl(r):
			return false
		case unicode.IsLetter(r):
			letter = true
		}
	}
	return letter
}

// planResponse is the body of POST /plan.
type planResponse struct {
	Task   string     `json:"task"`
	Steps  []planStep `json:"steps"`
	Notice string     `json:"notice"`
	Method string     `json:"method"`
}

type planStep struct {
	plan.Step
	Candidates []planCandidate `json:"candidates"`
}

// planCandidate is one resource proposed for a step.
type planCandidate struct {
	Identifier  string          `json:"identifier"`
	DisplayName string          `json:"displayName,omitempty"`
	Type        string          `json:"type,omitempty"`
	Score       int             `json:"score"`
	Source      json.RawMessage `json:"source"`
	Visibility  string          `json:"visibility"`
	Why         planWhy         `json:"why"`
	Call        map[string]any  `json:"call"`
	// Reliability is what this registry's probes saw of the endpoint;
	// null when it has none or was never probed.
	Reliability *planReliability `json:"reliability"`
	// Price is the price per call where the entry states one; null when
	// unknown (which is not free).
	Price *planPrice `json:"price"`
}

type planWhy struct {
	Rank    int         `json:"rank"`
	Matched []wordMatch `json:"matched"` // the step's words the entry holds, and where
	// Capabilities are the step's capabilities this entry has.
	Capabilities []string `json:"capabilities"`
}

type wordMatch struct {
	Word   string   `json:"word"`
	Fields []string `json:"fields"`
}

type planReliability struct {
	Endpoint   string     `json:"endpoint"`
	State      string     `json:"state,omitempty"` // up or down, once known
	Probes     int64      `json:"probes"`
	Answered   int64      `json:"answered"`
	LowerBound *float64   `json:"lowerBound"` // Wilson lower bound of the answered share; null when withheld
	Withheld   string     `json:"withheld,omitempty"`
	WindowDays int        `json:"windowDays"`
	LastProbe  *time.Time `json:"lastProbeAt,omitempty"`
	Report     string     `json:"report"`
}

type planPrice struct {
	PerCall  string `json:"perCall"` // decimal dollars, exact
	Currency string `json:"currency"`
	Protocol string `json:"protocol"`          // x402, mpp or card
	Network  string `json:"network,omitempty"` // normalised: base, solana, ...
}

// handlePlan handles "POST /plan".
func (s *Service) handlePlan(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := s.parsePlan(m)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	vocab, err := s.planVocabulary(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	viewers := s.viewers(r)
	resp := planResponse{Task: req.Task, Notice: planNotice, Method: planMethod}
	for _, st := range plan.Decompose(req.Task, vocab) {
		cands, err := s.planCandidates(r.Context(), st, req.Candidates, viewers)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		resp.Steps = append(resp.Steps, planStep{Step: st, Candidates: cands})
	}
	writeJSONBody(w, resp)
}

func writeJSONBody(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode", http.StatusInternalServerError)
		return
	}
	writeResponse(w, append(b, '\n'))
}

// planCandidates ranks a step's candidates with the search POST /search
// runs with federation none, for the request's viewer, and records it in
// the demand log like one.
func (s *Service) planCandidates(ctx context.Context, st plan.Step, n int, viewers []string) ([]planCandidate, error) {
	res, err := s.ix.Search(ctx, index.SearchRequest{Text: st.Query, Size: n, Viewers: viewers})
	if err != nil {
		return nil, err
	}
	items, err := s.localItems(res.Hits, viewers)
	if err != nil {
		return nil, err
	}
	returned := make([]kv.ReturnedEntry, len(items))
	out := make([]planCandidate, 0, len(items))
	for i, it := range items {
		returned[i] = kv.ReturnedEntry{ID: it.id, Rank: i + 1}
		out = append(out, s.planCandidate(st, it, i+1))
	}
	s.recordSearch(ctx, searchRequest{queryModel: queryModel{Text: st.Query}, Limit: n, Federation: fedNone}, returned, nil)
	return out, nil
}

// candidateBody is what a candidate reads of an entry body.
type candidateBody struct {
	DisplayName  string                     `json:"displayName"`
	Description  string                     `json:"description"`
	Type         string                     `json:"type"`
	URL          string                     `json:"url"`
	Tags         []string                   `json:"tags"`
	Capabilities []string                   `json:"capabilities"`
	Metadata     map[string]json.RawMessage `json:"metadata"`
	Data         json.RawMessage            `json:"data"`
}

func (s *Service) planCandidate(st plan.Step, it resultItem, rank int) planCandidate {
	var b candidateBody
	_ = json.Unmarshal(it.body, &b)
	c := planCandidate{
		Identifier: it.id, DisplayName: b.DisplayName, Type: b.Type, Score: it.score,
		Source: it.source, Visibility: it.visibility,
		Why:  planWhy{Rank: rank, Matched: []wordMatch{}, Capabilities: []string{}},
		Call: callOf(b),
	}
	// Why: the step's words the entry holds, field by field.
	fields := []struct {
		name string
		text []string
	}{
		{"name", []string{b.DisplayName, ingest.SplitIdentifier(it.id[strings.LastIndex(it.id, ":")+1:])}},
		{"capabilities", splitAll(b.Capabilities)},
		{"tags", b.Tags},
		{"description", []string{b.Description}},
	}
	// Terms as the index analyses them (stems, identifier parts), so the
	// explanation names the words the ranking matched.
	terms := make([]map[string]bool, len(fields))
	for i, f := range fields {
		terms[i] = map[string]bool{}
		for _, t := range f.text {
			for _, term := range s.ix.Terms(t) {
				terms[i][term] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, w := range strings.Fields(st.Query) {
		if seen[w] {
			continue
		}
		seen[w] = true
		wordTerms := s.ix.Terms(w)
		var in []string
		for i, f := range fields {
			if slices.ContainsFunc(wordTerms, func(t string) bool { return terms[i][t] }) {
				in = append(in, f.name)
			}
		}
		if len(in) > 0 {
			c.Why.Matched = append(c.Why.Matched, wordMatch{Word: w, Fields: in})
		}
	}
	for _, capName := range st.Capabilities {
		if slices.ContainsFunc(b.Capabilities, func(x string) bool { return strings.EqualFold(x, capName) }) {
			c.Why.Capabilities = append(c.Why.Capabilities, capName)
		}
	}
	c.Reliability = s.planReliability(it.id)
	c.Price = priceOf(b)
	return c
}

func splitAll(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, ingest.SplitIdentifier(id))
	}
	return out
}

// callOf says how to call an entry, from what it publishes: an MCP
// server's remote, an operation's method, path, servers and auth, an A2A
// agent's card, or the entry's URL.
func callOf(b candidateBody) map[string]any {
	var d map[string]any
	_ = json.Unmarshal(b.Data, &d)
	str := func(k string) string { s, _ := d[k].(string); return s }
	switch b.Type {
	case sources.TypeMCPServer:
		call := map[string]any{"protocol": "mcp"}
		if rs, ok := d["remotes"].([]any); ok {
			call["remotes"] = rs
		}
		if b.URL != "" {
			call["card"] = b.URL
		}
		return call
	case sources.TypeMCPTool:
		call := map[string]any{"protocol": "mcp", "tool": str("name")}
		if srv, ok := d["server"].(map[string]any); ok {
			call["server"] = srv["identifier"]
		}
		return call
	case sources.TypeOpenAPIOperation:
		call := map[string]any{"protocol": "http", "method": str("method"), "path": str("path")}
		for _, k := range []string{"servers", "auth", "openapi"} {
			if v, ok := d[k]; ok {
				call[k] = v
			}
		}
		return call
	case typeA2ACard:
		return map[string]any{"protocol": "a2a", "agentCard": b.URL}
	}
	call := map[string]any{}
	if b.URL != "" {
		call["url"] = b.URL
	}
	return call
}

// planReliability is what the probes saw of the entry's endpoint (an MCP
// tool's through its server); nil when nothing was probed.
func (s *Service) planReliability(id string) *planReliability {
	e, err := s.db.GetEntry(id)
	if err != nil {
		return nil
	}
	ep, server, ok := endpointOf(e)
	if !ok && server != "" {
		if se, err := s.db.GetEntry(server); err == nil && se.Owner == e.Owner {
			ep, _, ok = endpointOf(se)
		}
	}
	if !ok {
		return nil
	}
	sum, err := probe.Summarize(s.db, ep.name(), s.cfg.Probe.Window, s.cfg.Now())
	if err != nil || sum.Probes == 0 {
		return nil
	}
	out := &planReliability{Endpoint: firstOf(ep.url, ep.cardURL), Probes: sum.Probes, Answered: sum.Successes,
		LowerBound: sum.LowerBound, Withheld: sum.Withheld, WindowDays: sum.WindowDays,
		Report: "/reliability?entry=" + id}
	if l := sum.Last; l != nil {
		at := l.At
		out.LastProbe, out.State = &at, l.State
	}
	return out
}

// priceOf is the lowest price per call in dollars among the payment
// options the entry states (registry/pay: catalogue items, flat pay.*
// metadata keys), compared exactly in decimal; nil when none is known.
func priceOf(b candidateBody) *planPrice {
	var best *planPrice
	var bestRat *big.Rat
	for _, o := range pay.FromEntry(b.Type, b.Data, b.Metadata) {
		r, ok := new(big.Rat).SetString(o.Price)
		if o.Price == "" || !ok {
			continue
		}
		if bestRat == nil || r.Cmp(bestRat) < 0 {
			bestRat = r
			best = &planPrice{PerCall: o.Price, Currency: "USD", Protocol: o.Protocol, Network: o.Network}
		}
	}
	return best
}

// planVocab caches the decomposition's vocabulary per index generation:
// reading every capability and tag is a facet pass over the index.
type planVocab struct {
	mu    sync.Mutex
	gen   uint64
	vocab *plan.Vocabulary
}

// planVocabulary returns the vocabulary of the public index: a private
// entry's capabilities never shape another caller's plan.
func (s *Service) planVocabulary(ctx context.Context) (*plan.Vocabulary, error) {
	pv := &s.planVocab
	gen, quiet := s.ix.Generation()
	pv.mu.Lock()
	defer pv.mu.Unlock()
	if pv.vocab != nil && quiet && pv.gen == gen {
		return pv.vocab, nil
	}
	facets, err := s.ix.Facets(ctx, "", nil, nil, []index.FacetRequest{
		{Field: "capabilities", Limit: planVocabularySize}, {Field: "tags", Limit: planVocabularySize},
	})
	if err != nil {
		return nil, err
	}
	var caps []plan.Capability
	for _, b := range facets["capabilities"].Buckets {
		caps = append(caps, plan.Capability{Name: b.Value, Words: strings.Fields(ingest.SplitIdentifier(b.Value))})
	}
	var tags []string
	for _, b := range facets["tags"].Buckets {
		tags = append(tags, b.Value)
	}
	v := plan.NewVocabulary(caps, tags)
	if quiet {
		pv.gen, pv.vocab = gen, v
	}
	return v, nil
}
