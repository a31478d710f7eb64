package registry

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// Federation modes of POST /search (ARD §5.4, ADR-0006).
const (
	fedAuto      = "auto"
	fedNone      = "none"
	fedReferrals = "referrals"
)

const (
	defaultSearchLimit = 10
	maxSearchLimit     = 100
	// maxSearchOffset bounds how deep page tokens reach into a ranking;
	// deeper pages cost the index more than any caller needs.
	maxSearchOffset = 1000
	// Visibility labels; the member is "visibility" on every result.
	visPublic  = "public"
	visPrivate = "private"
)

// searchRequest is a validated POST /search body.
type searchRequest struct {
	queryModel
	Limit      int
	Federation string
	Offset     int      // from the page token
	scope      []byte   // page-token scope
	viewers    []string // owner tags of the private entries the caller sees
}

// parseSearch validates a POST /search body from r's caller. A non-nil
// error is a problem (or a body-read error) to write as it is.
func (s *Service) parseSearch(r *http.Request, m map[string]json.RawMessage) (searchRequest, error) {
	var fe fieldErrors
	req := searchRequest{Limit: defaultSearchLimit, Federation: fedAuto, viewers: s.viewers(r)}
	fe.onlyMembers(m, "", "a search request", "query", "limit", "pageSize", "pageToken", "federation")
	req.queryModel = parseQuery(m["query"], true, &fe)

	limit, haveLimit := -1, false
	for _, name := range []string{"limit", "pageSize"} {
		raw, ok := m[name]
		if !ok || isNull(raw) {
			continue
		}
		n, ok := rawInt(raw)
		if !ok || n < 1 || n > maxSearchLimit {
			fe.add(name, "must be an integer from 1 to "+strconv.Itoa(maxSearchLimit))
			continue
		}
		if haveLimit && n != limit {
			fe.add(name, "limit and pageSize are the same setting; give one, or the same value for both")
			continue
		}
		limit, haveLimit = n, true
	}
	if haveLimit {
		req.Limit = limit
	}
	if raw, ok := m["federation"]; ok && !isNull(raw) {
		f, ok := rawString(raw)
		switch {
		case !ok:
			fe.add("federation", "must be a string: auto, none or referrals")
		case f == fedAuto || f == fedNone || f == fedReferrals:
			req.Federation = f
		default:
			fe.add("federation", "must be one of auto, none, referrals")
		}
	}
	if p := fe.problem(s.problems); p != nil {
		return req, p
	}
	// The caller's view is part of the scope, so a page token or a cached
	// response made for one key never serves another, or no key.
	req.scope = s.appendViewScope(appendScope(append([]byte(req.Federation), 0), req.Text, req.Filter), r)
	if raw, ok := m["pageToken"]; ok && !isNull(raw) {
		tok, ok := rawString(raw)
		if !ok {
			fe.add("pageToken", "must be a string")
		} else if tok != "" {
			payload, err := s.tokens.open(tokenSearch, req.scope, tok)
			off, n := binary.Uvarint(payload)
			if err == nil && (n != len(payload) || off > maxSearchOffset) {
				err = errBadToken
			}
			if err != nil {
				fe.add("pageToken", tokenMessage(err, "query, filter and federation"))
			} else {
				req.Offset = int(off)
			}
		}
	}
	if p := fe.problem(s.problems); p != nil {
		return req, p
	}
	return req, nil
}

// nextToken seals the offset of the page after this one.
func (s *Service) nextToken(req searchRequest, next int) string {
	return s.tokens.seal(tokenSearch, req.scope, binary.AppendUvarint(nil, uint64(next)))
}

// Response cache bounds: at most 1,024 responses of at most 32 KiB each
// (a page of ten entries is ~8 KiB), so under 33 MB.
const (
	responseCacheSize      = 1024
	maxCachedResponseBytes = 32 << 10
	maxResponseKeyBytes    = 1024
)

// entryCacheSize bounds the entries kept for search results (kv reads
// cost a B+tree descent each): 6 MB of 350-byte entries, 24 MB of 1.5 KB
// ones. Unique MetaTool requests at 100k entries found 63% of their hits
// here at 4,096 entries and 91% at 16,384, when the cache started afresh
// whenever full (it now drops the entries asked for longest ago).
const entryCacheSize = 16384

// cachedResponse is a rendered local search response and the results it
// holds, which each search that it answers records in the demand log.
type cachedResponse struct {
	body    []byte
	results []kv.ReturnedEntry
}

// responseKey identifies what a local search's response depends on besides
// the index: the page-token scope (federation mode, text, filter) and the
// page.
func responseKey(req searchRequest, now time.Time) string {
	b := make([]byte, 0, len(req.scope)+40)
	// The hour: a cached body's page token is at most an hour old when
	// served, far inside its lifetime.
	b = strconv.AppendInt(b, now.Unix()/3600, 10)
	b = append(b, 0)
	b = append(b, req.scope...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(req.Offset), 10)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(req.Limit), 10)
	return string(b)
}

// recordSearch queues the demand record of a search. It is called before
// the response goes out, so a caller that has its answer can rely on Flush
// covering it.
func (s *Service) recordSearch(ctx context.Context, req searchRequest, results []kv.ReturnedEntry, outcomes []kv.UpstreamOutcome) {
	rec := kv.SearchRecord{
		Time:       s.cfg.Now().UTC(),
		Text:       req.Text,
		Federation: req.Federation,
		Offset:     req.Offset,
		Results:    results,
		Upstreams:  outcomes,
		Probe:      IsProbeTraffic(ctx),
	}
	if len(req.Filter) > 0 {
		rec.Filter = map[string][]string(req.Filter)
	}
	s.demand.record(rec)
	searchesTotal.WithLabelValues(req.Federation, resultsLabel(len(results))).Inc()
}

func writeResponse(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// resultItem is one result on its way to the response.
type resultItem struct {
	id         string
	body       []byte // the entry object as stored or as the upstream sent it
	score      int
	source     []byte // JSON-encoded source URL
	visibility string
	upstream   string // "" for local results
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// handleSearch handles "POST /search".
func (s *Service) handleSearch(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := s.parseSearch(r, m)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// An auto search asks the upstreams whose circuit is closed; the others
	// are reported as skipped. With none to ask it is a local search (cached
	// like one) that still carries the report.
	mode := req.Federation
	var (
		asked   []upstream
		reports []upstreamReport
	)
	if mode == fedAuto {
		asked, reports = s.admitUpstreams(r.Context())
	}
	local := mode == fedNone || mode == fedAuto && len(asked) == 0

	// A local search's response is a function of the request and the
	// index state: a repeated one is answered from the response cache.
	var (
		cacheKey string
		gen      uint64
		quiet    bool
	)
	if local {
		if key := responseKey(req, s.cfg.Now()); len(key) <= maxResponseKeyBytes {
			cacheKey = key
			if gen, quiet = s.ix.Generation(); quiet {
				if c, ok := s.responses.Get(gen, key); ok {
					s.recordSearch(r.Context(), req, c.results, nil)
					s.writeSearch(w, c.body, mode, reports)
					return
				}
			}
		}
	}

	var (
		items     []resultItem
		next      string
		outcomes  []kv.UpstreamOutcome
		referrals [][]byte
	)
	if !local && mode == fedAuto {
		var answered []upstreamReport
		items, next, outcomes, answered, err = s.searchFederated(r, req, asked)
		reports = append(answered, reports...)
	} else {
		items, next, err = s.searchLocal(r, req)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if mode == fedReferrals {
		if referrals, err = s.referrals(r); err != nil {
			s.writeError(w, r, err)
			return
		}
	}

	bp := bufPool.Get().(*[]byte)
	buf := append((*bp)[:0], `{"results":[`...)
	for i, it := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf, err = appendProjected(buf, it.body, projection{score: it.score, withScore: true, source: it.source, visibility: it.visibility})
		if err != nil {
			// Upstream bodies were checked on arrival and local ones are
			// compacted by kv, so this is drift between kv and the index.
			s.log.Error("stored entry is not an object", "identifier", it.id, "request_id", web.RequestID(r.Context()))
			*bp = buf
			bufPool.Put(bp)
			s.writeError(w, r, err)
			return
		}
	}
	buf = append(buf, ']')
	if next != "" {
		buf = append(buf, `,"pageToken":"`...)
		buf = append(buf, next...)
		buf = append(buf, '"')
	}
	if mode == fedReferrals {
		buf = append(buf, `,"referrals":[`...)
		for i, ref := range referrals {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, ref...)
		}
		buf = append(buf, ']')
	}
	buf = append(buf, "}\n"...)

	// The demand log is public material (reports, /stats): a private
	// result is left out of it; the public ones keep the rank they had.
	var results []kv.ReturnedEntry
	for i, it := range items {
		if it.visibility == visPrivate {
			continue
		}
		results = append(results, kv.ReturnedEntry{ID: it.id, Rank: req.Offset + i + 1, Source: it.upstream})
	}
	s.recordSearch(r.Context(), req, results, outcomes)
	if cacheKey != "" && len(buf) <= maxCachedResponseBytes && s.responses.Admit(cacheKey) && quiet {
		// Kept from the request's second sighting on, and only if the
		// index did not change while it was computed.
		if g, still := s.ix.Generation(); still && g == gen {
			s.responses.Put(gen, cacheKey, cachedResponse{body: bytes.Clone(buf), results: results})
		}
	}
	s.writeSearch(w, buf, mode, reports)
	*bp = buf
	if cap(buf) <= 1<<20 { // keep the pool from pinning huge pages
		bufPool.Put(bp)
	}
}

// writeSearch writes a search response body. An auto search's body also
// carries "upstreams": what each upstream registry did for it (answered,
// failed or skipped, and why), spliced in before the closing brace so the
// cached body of a local answer stays one body for every report.
func (s *Service) writeSearch(w http.ResponseWriter, body []byte, mode string, reports []upstreamReport) {
	if mode != fedAuto {
		writeResponse(w, body)
		return
	}
	if reports == nil {
		reports = []upstreamReport{}
	}
	rep, _ := json.Marshal(reports)
	end := bytes.LastIndexByte(body, '}')
	out := make([]byte, 0, len(body)+len(rep)+16)
	out = append(out, body[:end]...)
	out = append(out, `,"upstreams":`...)
	out = append(out, rep...)
	out = append(out, "}\n"...)
	writeResponse(w, out)
}

// searchLocal answers from this index alone.
func (s *Service) searchLocal(r *http.Request, req searchRequest) ([]resultItem, string, error) {
	res, err := s.ix.Search(r.Context(), index.SearchRequest{
		Text: req.Text, Filter: req.Filter, From: req.Offset, Size: req.Limit, Viewers: req.viewers,
	})
	if err != nil {
		return nil, "", err
	}
	items, err := s.localItems(res.Hits, req.viewers)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if end := req.Offset + len(res.Hits); len(res.Hits) > 0 && res.More && end <= maxSearchOffset {
		next = s.nextToken(req, end)
	}
	return items, next, nil
}

// localItems loads the entries of hits from kv, in hit order. A hit whose
// entry is missing (index and kv briefly out of step during ingestion) is
// left out rather than failing the search.
func (s *Service) localItems(hits []index.Hit, viewers []string) ([]resultItem, error) {
	if len(hits) == 0 {
		return nil, nil
	}
	// Entries read while the index is quiet are kept for its generation:
	// ingestion writes kv before the index, so a changed entry always
	// moves the generation on.
	gen, quiet := s.ix.Generation()
	entries := make(map[string]kv.EntryBody, len(hits))
	var missing []string
	for _, h := range hits {
		if quiet {
			if e, ok := s.bodies.Get(gen, h.ID); ok {
				entries[h.ID] = e
				continue
			}
		}
		missing = append(missing, h.ID)
	}
	if len(missing) > 0 {
		read, err := s.db.GetEntryBodies(missing)
		if err != nil {
			return nil, err
		}
		now, still := s.ix.Generation()
		for id, e := range read {
			entries[id] = e
			if quiet && still && now == gen {
				s.bodies.Put(gen, id, e)
			}
		}
	}
	items := make([]resultItem, 0, len(hits))
	for _, h := range hits {
		e, ok := entries[h.ID]
		if !ok {
			s.warnMissing(h.ID, viewers)
			continue
		}
		if !mayView(e.Owner, viewers) {
			continue
		}
		vis := visPublic
		if e.Owner != "" {
			vis = visPrivate
		}
		items = append(items, resultItem{id: h.ID, body: e.Body, score: clampScore(h.Score), source: s.sourceJSON, visibility: vis})
	}
	return items, nil
}

func clampScore(n int) int {
	return min(max(n, 0), 100)
}
