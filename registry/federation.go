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
	"strings"
	"sync"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
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
}

// searchFederated fuses this index's ranking with every upstream's for the
// page req asks for.
func (s *Service) searchFederated(r *http.Request, req searchRequest) ([]resultItem, string, []kv.UpstreamOutcome, error) {
	// Fusion needs each source's ranking down to the end of the requested
	// page; upstreams cap pageSize at 100 like we do.
	depth := req.Offset + req.Limit
	upSize := min(depth, maxSearchLimit)

	ups := s.federationTargets(r.Context())
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.FederationTimeout)
	defer cancel()
	results := make([]upstreamResult, len(ups))
	var wg sync.WaitGroup
	for i := range ups {
		wg.Go(func() {
			results[i] = s.askUpstream(ctx, ups[i], req, upSize)
		})
	}

	local, err := s.ix.Search(r.Context(), index.SearchRequest{Text: req.Text, Filter: req.Filter, From: 0, Size: depth})
	wg.Wait()
	if err != nil {
		return nil, "", nil, err
	}

	outcomes := make([]kv.UpstreamOutcome, len(ups))
	for i, up := range ups {
		res := results[i]
		outcomes[i] = kv.UpstreamOutcome{Upstream: up.base, Outcome: res.outcome}
		if res.err != nil {
			s.log.Warn("upstream registry skipped", "upstream", up.host, "outcome", res.outcome, "err", res.err)
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
	loaded, err := s.localItems(hits)
	if err != nil {
		return nil, "", nil, err
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
	return items, next, outcomes, nil
}

// upstreamRequest is the body we send each upstream: the same query, never
// federated further (so two registries that list each other do not loop).
type upstreamRequest struct {
	Query      upstreamQuery `json:"query"`
	Federation string        `json:"federation"`
	PageSize   int           `json:"pageSize"`
}

type upstreamQuery struct {
	Text   string       `json:"text"`
	Filter index.Filter `json:"filter,omitempty"`
}

// askUpstream runs one upstream search and validates what comes back.
func (s *Service) askUpstream(ctx context.Context, up upstream, req searchRequest, size int) upstreamResult {
	body, _ := json.Marshal(upstreamRequest{
		Query:      upstreamQuery{Text: req.Text, Filter: req.Filter},
		Federation: fedNone,
		PageSize:   size,
	})
	items, err := s.fetchUpstream(ctx, up, body, size)
	switch {
	case err == nil:
		return upstreamResult{items: items, outcome: outcomeOK}
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return upstreamResult{outcome: outcomeTimeout, err: err}
	default:
		return upstreamResult{outcome: outcomeError, err: err}
	}
}

func (s *Service) fetchUpstream(ctx context.Context, up upstream, body []byte, size int) ([]resultItem, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, up.base+"/search", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	client := up.client
	if client == nil {
		client = s.client
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	if len(raw) > maxUpstreamBody {
		return nil, fmt.Errorf("response larger than %d bytes", maxUpstreamBody)
	}
	return parseUpstreamResults(raw, up, size)
}

// parseUpstreamResults validates an upstream's search response. A body that
// is not an object with a results array fails the upstream; a single result
// that is not an object with a string identifier is dropped on its own.
func parseUpstreamResults(raw []byte, up upstream, size int) ([]resultItem, error) {
	var resp struct {
		Results *[]json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("malformed response: %w", err)
	}
	if resp.Results == nil {
		return nil, errors.New("malformed response: no results array")
	}
	list := *resp.Results
	if len(list) > size {
		list = list[:size]
	}
	items := make([]resultItem, 0, len(list))
	for _, it := range list {
		if len(it) == 0 || it[0] != '{' {
			continue
		}
		var probe struct {
			Identifier json.RawMessage `json:"identifier"`
			Score      json.RawMessage `json:"score"`
		}
		if json.Unmarshal(it, &probe) != nil {
			continue
		}
		id, ok := rawString(probe.Identifier)
		if !ok || id == "" || len(id) > maxIdentifierLen {
			continue
		}
		// Keep the upstream's own 0-100 score (clamped, rounded): it is that
		// registry's relevance, shown as such; fusion ignores it.
		score := 0
		var f float64
		if json.Unmarshal(probe.Score, &f) == nil && !math.IsNaN(f) {
			score = clampScore(int(math.Round(math.Max(-1, math.Min(f, 101)))))
		}
		items = append(items, resultItem{id: id, body: it, score: score, source: up.sourceJSON, visibility: visPublic, upstream: up.base})
	}
	return items, nil
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
	host := up.host
	if u, err := url.Parse(up.base); err == nil {
		host = u.Hostname()
	}
	// URN publishers are host names; a port or IPv6 colon would split the
	// URN, so they become dashes.
	publisher := strings.NewReplacer(":", "-", "[", "", "]", "").Replace(host)
	return referralEntry{
		Identifier:  "urn:air:" + publisher + ":registry",
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
		out = append(out, upstream{base: base, host: u.Host, sourceJSON: src, client: s.fetcher.HTTPClient(), discovered: true})
	}
	c.valid, c.seq, c.list = true, seq, out
	return out
}
