package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/ingest"
)

// Federation (ARD §5.4): federation=auto asks every upstream registry with
// federation=none under one deadline and fuses the rankings with reciprocal
// rank fusion, because scores from different registries are not comparable.
// A failed, slow or malformed upstream is skipped; the search still answers.

const (
	// rrfK is the usual reciprocal-rank-fusion constant: a result at rank r
	// contributes 1/(rrfK+r) from each ranking it appears in.
	rrfK = 60
	// maxUpstreamBody caps what one upstream may send back.
	maxUpstreamBody = 2 << 20
	// maxIdentifierLen drops upstream results with absurd identifiers.
	maxIdentifierLen = 512

	outcomeOK      = "ok"
	outcomeError   = "error"
	outcomeTimeout = "timeout"
)

// upstreamResult is what one upstream contributed to a federated search.
type upstreamResult struct {
	items   []resultItem
	outcome string
	err     error
	dropped int // results refused: malformed, or outside the query's filter
}

// upstreamReport is one upstream's line in an auto search's "upstreams"
// member: whether it answered, failed or was skipped, and why.
type upstreamReport struct {
	Source  string `json:"source"`
	Kind    string `json:"kind"`    // configured, public or discovered
	Outcome string `json:"outcome"` // ok, error, timeout or skipped
	Results int    `json:"results"` // results it contributed to the fusion
	Dropped int    `json:"dropped,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

const outcomeSkipped = "skipped"

// admitUpstreams splits the federation targets into those a search asks
// now and reports for those it skips (circuit open), starting a
// background trial for each skipped one whose trial is due.
func (s *Service) admitUpstreams(ctx context.Context) (asked []upstream, skipped []upstreamReport) {
	now := s.cfg.Now()
	for _, up := range s.federationTargets(ctx) {
		ask, trial, reason := s.breakers.get(up.base).admit(now)
		if ask {
			asked = append(asked, up)
			continue
		}
		skipped = append(skipped, upstreamReport{Source: up.base, Kind: up.kind, Outcome: outcomeSkipped, Detail: reason})
		if trial {
			s.startTrial(up)
		}
	}
	return asked, skipped
}

// startTrial asks up one small search in the background and closes or
// re-opens its breaker by the answer.
func (s *Service) startTrial(up upstream) {
	bs := &s.breakers
	bs.wg.Add(1)
	go func() {
		defer bs.wg.Done()
		ctx, cancel := context.WithTimeout(bs.ctx, trialTimeout)
		defer cancel()
		res := s.askUpstream(ctx, up, searchRequest{queryModel: queryModel{Text: "registry"}}, 1)
		if bs.ctx.Err() != nil {
			return // shutting down: say nothing of the upstream
		}
		b := bs.get(up.base)
		if res.err != nil {
			s.log.Info("upstream registry still unreachable", "upstream", up.host, "err", res.err)
			b.failure(s.cfg.Now(), upstreamFailure(res))
			return
		}
		s.log.Info("upstream registry reachable", "upstream", up.host)
		b.success()
	}()
}

// searchFederated fuses this index's ranking with the ranking of every
// upstream in ups for the page req asks for, and reports each upstream.
func (s *Service) searchFederated(r *http.Request, req searchRequest, ups []upstream) ([]resultItem, string, []kv.UpstreamOutcome, []upstreamReport, error) {
	// Fusion needs each source's ranking down to the end of the requested
	// page; upstreams cap pageSize at 100 like we do.
	depth := req.Offset + req.Limit
	upSize := min(depth, maxSearchLimit)

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.FederationTimeout)
	defer cancel()
	results := make([]upstreamResult, len(ups))
	var wg sync.WaitGroup
	for i := range ups {
		wg.Go(func() {
			results[i] = s.askUpstream(ctx, ups[i], req, upSize)
		})
	}

	local, err := s.ix.Search(r.Context(), index.SearchRequest{Text: req.Text, Filter: req.Filter, From: 0, Size: depth, Viewers: req.viewers})
	wg.Wait()
	if err != nil {
		return nil, "", nil, nil, err
	}

	outcomes := make([]kv.UpstreamOutcome, len(ups))
	reports := make([]upstreamReport, len(ups))
	now := s.cfg.Now()
	for i, up := range ups {
		res := results[i]
		outcomes[i] = kv.UpstreamOutcome{Upstream: up.base, Outcome: res.outcome}
		reports[i] = upstreamReport{Source: up.base, Kind: up.kind, Outcome: res.outcome, Results: len(res.items), Dropped: res.dropped}
		if res.err != nil {
			// A caller that hung up says nothing about the upstream.
			reports[i].Detail = upstreamFailure(res)
			if r.Context().Err() == nil {
				s.breakers.get(up.base).failure(now, reports[i].Detail)
			}
			s.log.Warn("upstream registry skipped", "upstream", up.host, "outcome", res.outcome, "err", res.err)
		} else {
			s.breakers.get(up.base).success()
		}
	}

	// Fuse. The local copy of an identifier wins over any upstream copy;
	// among upstreams the copy ranked best wins (ties: configuration order).
	type candidate struct {
		rrf      float64
		local    bool
		bestRank int
		item     resultItem // body nil for local until loaded
	}
	cands := make(map[string]*candidate, len(local.Hits)+len(ups)*upSize)
	order := make([]string, 0, len(local.Hits)+len(ups)*upSize)
	for rank, h := range local.Hits {
		if _, dup := cands[h.ID]; dup {
			continue
		}
		cands[h.ID] = &candidate{rrf: 1 / float64(rrfK+rank+1), local: true, bestRank: rank + 1,
			item: resultItem{id: h.ID, score: clampScore(h.Score)}}
		order = append(order, h.ID)
	}
	for _, res := range results {
		seen := map[string]bool{}
		for rank, it := range res.items {
			if seen[it.id] {
				continue // an upstream listing an identifier twice counts once
			}
			seen[it.id] = true
			c := cands[it.id]
			if c == nil {
				c = &candidate{bestRank: math.MaxInt, item: it}
				cands[it.id] = c
				order = append(order, it.id)
			} else if !c.local && rank+1 < c.bestRank {
				c.item = it
			}
			c.bestRank = min(c.bestRank, rank+1)
			c.rrf += 1 / float64(rrfK+rank+1)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		ca, cb := cands[order[a]], cands[order[b]]
		if ca.rrf != cb.rrf {
			return ca.rrf > cb.rrf
		}
		if ca.local != cb.local {
			return ca.local
		}
		return order[a] < order[b]
	})

	end := min(req.Offset+req.Limit, len(order))
	page := order[min(req.Offset, end):end]

	// Load the local entries of this page only.
	var hits []index.Hit
	for _, id := range page {
		if c := cands[id]; c.local {
			hits = append(hits, index.Hit{ID: id, Score: c.item.score})
		}
	}
	loaded, err := s.localItems(hits, req.viewers)
	if err != nil {
		return nil, "", nil, nil, err
	}
	byID := make(map[string]resultItem, len(loaded))
	for _, it := range loaded {
		byID[it.id] = it
	}
	items := make([]resultItem, 0, len(page))
	for _, id := range page {
		c := cands[id]
		if !c.local {
			items = append(items, c.item)
		} else if it, ok := byID[id]; ok {
			items = append(items, it)
		}
	}

	next := ""
	more := len(order) > end || local.More
	if more && len(page) > 0 && end <= maxSearchOffset {
		next = s.nextToken(req, end)
	}
	return items, next, outcomes, reports, nil
}

// upstreamFailure says why an upstream failed, without echoing what it
// sent: its body is a stranger's text.
func upstreamFailure(res upstreamResult) string {
	if res.outcome == outcomeTimeout {
		return "no answer within the federation deadline"
	}
	var se *upstreamStatusError
	if errors.As(res.err, &se) {
		return "answered HTTP " + strconv.Itoa(se.status)
	}
	if errors.Is(res.err, errUpstreamMalformed) {
		return res.err.Error()
	}
	return "unreachable"
}

// upstreamStatusError is an upstream's non-200 answer.
type upstreamStatusError struct{ status int }

func (e *upstreamStatusError) Error() string { return "status " + strconv.Itoa(e.status) }

var errUpstreamMalformed = errors.New("malformed answer")

// upstreamRequest is the body we send each upstream: the same query, never
// federated further (so two registries that list each other do not loop).
type upstreamRequest struct {
	Query      upstreamQuery `json:"query"`
	Federation string        `json:"federation"`
	PageSize   int           `json:"pageSize"`
}

type upstreamQuery struct {
	Text   string         `json:"text"`
	Filter map[string]any `json:"filter,omitempty"`
}

// askUpstream runs one upstream search and validates what comes back.
func (s *Service) askUpstream(ctx context.Context, up upstream, req searchRequest, size int) upstreamResult {
	body, _ := json.Marshal(upstreamRequest{
		Query:      upstreamQuery{Text: req.Text, Filter: wireFilter(req.Filter)},
		Federation: fedNone,
		PageSize:   size,
	})
	items, dropped, err := s.fetchUpstream(ctx, up, body, size, req.Filter)
	switch {
	case err == nil:
		return upstreamResult{items: items, outcome: outcomeOK, dropped: dropped}
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return upstreamResult{outcome: outcomeTimeout, err: err}
	default:
		return upstreamResult{outcome: outcomeError, err: err}
	}
}

func (s *Service) fetchUpstream(ctx context.Context, up upstream, body []byte, size int, filter index.Filter) ([]resultItem, int, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, up.base+"/search", bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	client := up.client
	if client == nil {
		client = s.client
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, &upstreamStatusError{status: resp.StatusCode}
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody+1))
	if err != nil {
		return nil, 0, err
	}
	if len(raw) > maxUpstreamBody {
		return nil, 0, fmt.Errorf("%w: larger than %d bytes", errUpstreamMalformed, maxUpstreamBody)
	}
	return parseUpstreamResults(raw, up, size, filter)
}

// maxUpstreamItem caps one upstream result as we re-encode it: a page of
// ours stays a page, whatever a stranger sends.
const maxUpstreamItem = 64 << 10

// parseUpstreamResults validates an upstream's search response. A body that
// is not an object with a results array fails the upstream; a single result
// that is not a well-formed ARD entry, or that does not satisfy the query's
// filter (an upstream may ignore filters), is dropped on its own and
// counted in dropped.
func parseUpstreamResults(raw []byte, up upstream, size int, filter index.Filter) (items []resultItem, dropped int, err error) {
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, 0, fmt.Errorf("%w: not a JSON object", errUpstreamMalformed)
	}
	var list []json.RawMessage
	if r := resp["results"]; len(r) == 0 || r[0] != '[' || json.Unmarshal(r, &list) != nil {
		return nil, 0, fmt.Errorf("%w: no results array", errUpstreamMalformed)
	}
	if len(list) > size {
		list = list[:size]
	}
	items = make([]resultItem, 0, len(list))
	seen := make(map[string]bool, len(list))
	for _, it := range list {
		item, ok := checkUpstreamItem(it, up, filter)
		if !ok || seen[item.id] {
			dropped++
			continue
		}
		seen[item.id] = true
		items = append(items, item)
	}
	return items, dropped, nil
}

// upstreamEntry is what this registry passes on of an upstream's result:
// the ARD entry members, each checked for its type and written by us. The
// upstream's own score, source and visibility, unknown members, duplicate
// members and escaped spellings of names never reach a caller.
type upstreamEntry struct {
	Identifier    string          `json:"identifier"`
	DisplayName   string          `json:"displayName"`
	Type          string          `json:"type"`
	URL           string          `json:"url,omitempty"`
	Data          json.RawMessage `json:"data,omitempty"`
	Description   string          `json:"description,omitempty"`
	Tags          []string        `json:"tags,omitempty"`
	Capabilities  []string        `json:"capabilities,omitempty"`
	Version       string          `json:"version,omitempty"`
	UpdatedAt     string          `json:"updatedAt,omitempty"`
	Publisher     json.RawMessage `json:"publisher,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	TrustManifest json.RawMessage `json:"trustManifest,omitempty"`
}

// checkUpstreamItem decodes one upstream result (member names unescaped, a
// repeated member read once) into the entry we pass on, and checks it
// against the query's filter.
func checkUpstreamItem(raw json.RawMessage, up upstream, filter index.Filter) (resultItem, bool) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return resultItem{}, false
	}
	var e upstreamEntry
	rawID, ok := rawString(m["identifier"])
	if !ok {
		return resultItem{}, false
	}
	id, _, msg := ingest.NormalizeIdentifier(rawID)
	if msg != "" || len(id) > maxIdentifierLen {
		return resultItem{}, false
	}
	e.Identifier = id
	if e.DisplayName, ok = rawString(m["displayName"]); !ok || strings.TrimSpace(e.DisplayName) == "" {
		return resultItem{}, false
	}
	t, ok := rawString(m["type"])
	if !ok {
		return resultItem{}, false
	}
	if e.Type, msg = ingest.NormalizeType(t); msg != "" {
		return resultItem{}, false
	}
	if u, ok := rawString(m["url"]); ok {
		if pu, err := url.Parse(u); err == nil && (pu.Scheme == "https" || pu.Scheme == "http") && pu.Host != "" {
			e.URL = u
		}
	}
	e.Data = canonicalJSON(m["data"], false)
	if e.URL == "" && e.Data == nil {
		return resultItem{}, false // ARD: an entry carries url or data
	}
	e.Description, _ = rawString(m["description"])
	e.Version, _ = rawString(m["version"])
	e.UpdatedAt, _ = rawString(m["updatedAt"])
	e.Tags = rawStrings(m["tags"])
	e.Capabilities = rawStrings(m["capabilities"])
	e.Publisher = canonicalJSON(m["publisher"], true)
	e.Metadata = canonicalJSON(m["metadata"], true)
	e.TrustManifest = canonicalJSON(m["trustManifest"], true)
	body, err := json.Marshal(e)
	if err != nil || len(body) > maxUpstreamItem {
		return resultItem{}, false
	}
	if len(filter) > 0 {
		d, err := ingest.ToDoc(kv.Entry{ID: id, Body: body})
		if err != nil || !filter.Matches(&d) {
			return resultItem{}, false
		}
	}
	// Keep the upstream's own 0-100 score (clamped, rounded): it is that
	// registry's relevance, shown as such; fusion ignores it.
	score := 0
	var f float64
	if json.Unmarshal(m["score"], &f) == nil && !math.IsNaN(f) {
		score = clampScore(int(math.Round(math.Max(-1, math.Min(f, 101)))))
	}
	return resultItem{id: id, body: body, score: score, source: up.sourceJSON, visibility: visPublic, upstream: up.base}, true
}

// rawStrings decodes an array of strings; anything else is nothing.
func rawStrings(raw json.RawMessage) []string {
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		if s, ok := rawString(e); ok {
			out = append(out, s)
		}
	}
	return out
}

// canonicalJSON re-encodes a nested value from its decoded form, so its
// member names are plain and each appears once; nil for null or absent,
// and for a non-object when object is set.
func canonicalJSON(raw json.RawMessage, object bool) json.RawMessage {
	if isNull(raw) || (object && raw[0] != '{') {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return out
}

// maxReferrals bounds the referrals list.
const maxReferrals = 50

// registryType is the ARD media type of a registry entry.
const registryType = "application/ai-registry+json"

// referrals lists the registries a caller may follow (federation=referrals):
// the indexed entries of type application/ai-registry+json, then each
// configured upstream not already among them, as ARD entries.
func (s *Service) referrals(r *http.Request) ([][]byte, error) {
	list, err := s.ix.List(r.Context(), index.ListRequest{Types: []string{registryType}, Size: maxReferrals})
	if err != nil {
		return nil, err
	}
	entries, err := s.db.GetEntries(list.IDs)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	known := map[string]bool{}
	for _, id := range list.IDs {
		e, ok := entries[id]
		if !ok {
			continue
		}
		b, err := appendProjected(nil, e.Body, projection{source: s.sourceJSON})
		if err != nil {
			continue
		}
		var u struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(e.Body, &u) == nil && u.URL != "" {
			known[strings.TrimSuffix(strings.TrimRight(u.URL, "/"), "/search")] = true
		}
		out = append(out, b)
	}
	for _, up := range s.upstreams {
		if known[up.base] || len(out) >= maxReferrals {
			continue
		}
		b, _ := json.Marshal(upstreamReferral(up, s.cfg.PublicURL))
		out = append(out, b)
	}
	return out, nil
}

// referralID names an upstream by its base URL: urn:air:<host>:registry,
// with a last segment from the port and path when the base has them, so
// two registries on one host never share an identifier. A port or an IPv6
// colon would split the URN, so they become dashes.
func referralID(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return "urn:air:invalid:registry"
	}
	publisher := strings.NewReplacer(":", "-", "[", "", "]", "").Replace(u.Hostname())
	var parts []string
	if u.Scheme == "http" {
		parts = append(parts, "http") // http and https on one host are two registries
	}
	if p := u.Port(); p != "" {
		parts = append(parts, p)
	}
	for _, seg := range strings.Split(strings.Trim(u.EscapedPath(), "/"), "/") {
		if seg = urnSafe(seg); seg != "" {
			parts = append(parts, seg)
		}
	}
	if len(parts) == 0 {
		return "urn:air:" + publisher + ":registry"
	}
	return "urn:air:" + publisher + ":registry:" + strings.Join(parts, "-")
}

// urnSafe keeps the characters an ARD URN name segment allows.
func urnSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '-'
	}, s)
}

// referralEntry is a configured upstream described as an ARD entry.
type referralEntry struct {
	Identifier  string `json:"identifier"`
	DisplayName string `json:"displayName"`
	Type        string `json:"type"`
	URL         string `json:"url"`
	Description string `json:"description"`
	Source      string `json:"source"`
}

func upstreamReferral(up upstream, self string) referralEntry {
	return referralEntry{
		Identifier:  referralID(up.base),
		DisplayName: up.host,
		Type:        registryType,
		URL:         up.base,
		Description: "Upstream ARD registry that " + self + " federates searches to.",
		Source:      self,
	}
}

// Registries discovered in the index (entries of type
// application/ai-registry+json) join federation=auto only when their host is
// on the operator's allowlist (Config.FederateDiscovered): an indexed entry
// is a publisher's claim, and asking it means sending every query there.
// They are called through the SSRF-safe Fetcher, since their URL came from a
// publisher, and their outcomes land in the demand log like any upstream's,
// so GET /stats counts them.

// discoveredCache holds the allowed discovered upstreams, valid while the kv
// change sequence has not moved.
type discoveredCache struct {
	allow map[string]bool // lower-cased hosts; empty: none are asked

	mu    sync.Mutex
	valid bool
	seq   uint64
	list  []upstream
}

// federationTargets returns the configured upstreams followed by the
// allowed discovered ones.
func (s *Service) federationTargets(ctx context.Context) []upstream {
	disc := s.discoveredUpstreams(ctx)
	if len(disc) == 0 {
		return s.upstreams
	}
	out := make([]upstream, 0, len(s.upstreams)+len(disc))
	out = append(out, s.upstreams...)
	return append(out, disc...)
}

// discoveredUpstreams lists the allowed registries of the index. A failure
// to read them is logged and federation goes on with the configured ones.
func (s *Service) discoveredUpstreams(ctx context.Context) []upstream {
	c := &s.discovered
	if len(c.allow) == 0 {
		return nil
	}
	seq, err := s.db.LastChangeSeq()
	if err != nil {
		s.log.Warn("discovered registries: change sequence", "err", err)
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid && c.seq == seq {
		return c.list
	}
	list, err := s.ix.List(ctx, index.ListRequest{Types: []string{registryType}, Size: maxReferrals,
		OrderBy: []index.Order{{Field: index.OrderIdentifier}}})
	if err != nil {
		s.log.Warn("discovered registries: list", "err", err)
		return nil
	}
	entries, err := s.db.GetEntries(list.IDs)
	if err != nil {
		s.log.Warn("discovered registries: load", "err", err)
		return nil
	}
	known := map[string]bool{s.cfg.PublicURL: true}
	for _, up := range s.upstreams {
		known[up.base] = true
	}
	var out []upstream
	for _, id := range list.IDs {
		e, ok := entries[id]
		if !ok || e.Owner != "" {
			continue
		}
		var body struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(e.Body, &body) != nil || body.URL == "" {
			continue
		}
		base := strings.TrimSuffix(strings.TrimRight(strings.TrimSpace(body.URL), "/"), "/search")
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
			continue
		}
		if !c.allow[strings.ToLower(u.Hostname())] || known[base] {
			continue
		}
		known[base] = true
		src, _ := json.Marshal(base)
		out = append(out, upstream{base: base, host: u.Host, sourceJSON: src, client: s.fetcher.HTTPClient(), kind: kindDiscovered})
	}
	c.valid, c.seq, c.list = true, seq, out
	return out
}
