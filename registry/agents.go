package registry

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/web"
)

const (
	defaultAgentsPageSize = 20
	maxAgentsPageSize     = 100
)

// parseAgents validates the query of GET /agents into a listing request.
func (s *Service) parseAgents(r *http.Request) (index.ListRequest, error) {
	var fe fieldErrors
	q := r.URL.Query()
	req := index.ListRequest{Size: defaultAgentsPageSize, Viewers: s.viewers(r)}
	params := []string{"filter", "orderBy", "pageSize", "pageToken"}
	fe.onlyParams(q, "GET /agents", params...)
	filter, orderBy := q.Get("filter"), q.Get("orderBy")
	if err := parseAgentsFilter(filter, &req); err != nil {
		fe.add("filter", err.Error())
	}
	order, oerr := parseOrderBy(orderBy)
	if oerr != nil {
		fe.add("orderBy", oerr.Error())
	}
	req.OrderBy = order
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAgentsPageSize {
			fe.add("pageSize", "must be an integer from 1 to "+strconv.Itoa(maxAgentsPageSize))
		} else {
			req.Size = n
		}
	}
	if tok := q.Get("pageToken"); tok != "" {
		payload, err := s.tokens.open(tokenAgents, s.appendViewScope(agentsScope(filter, orderBy), r), tok)
		var after []string
		if err == nil && (json.Unmarshal(payload, &after) != nil || len(after) == 0) {
			err = errBadToken
		}
		if err != nil {
			fe.add("pageToken", tokenMessage(err, "filter and orderBy"))
		} else {
			req.After = after
		}
	}
	if p := fe.problem(s.problems); p != nil {
		return req, p
	}
	return req, nil
}

// agentsScope binds a page token to the filter and order it pages through.
func agentsScope(filter, orderBy string) []byte {
	return appendLenString(appendLenString(nil, filter), orderBy)
}

// handleAgents handles "GET /agents": deterministic browsing (ARD Appendix
// A). The body is {items, nextPageToken?, totalSize}.
func (s *Service) handleAgents(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	req, err := s.parseAgents(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.ix.List(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	entries, err := s.db.GetEntries(res.IDs)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	buf := make([]byte, 0, 1024*len(res.IDs)+64)
	buf = append(buf, `{"items":[`...)
	n := 0
	for _, id := range res.IDs {
		e, ok := entries[id]
		if !ok {
			s.warnMissing(id, req.Viewers)
			continue
		}
		if !mayView(e.Owner, req.Viewers) {
			continue
		}
		vis := visPublic
		if e.Owner != "" {
			vis = visPrivate
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		buf, err = appendProjected(buf, e.Body, projection{visibility: vis, keepRQ: true})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		n++
	}
	buf = append(buf, ']')
	if len(res.Next) > 0 {
		payload, _ := json.Marshal(res.Next)
		buf = append(buf, `,"nextPageToken":"`...)
		buf = append(buf, s.tokens.seal(tokenAgents, s.appendViewScope(agentsScope(r.URL.Query().Get("filter"), r.URL.Query().Get("orderBy")), r), payload)...)
		buf = append(buf, '"')
	}
	buf = append(buf, `,"totalSize":`...)
	buf = strconv.AppendUint(buf, res.Total, 10)
	buf = append(buf, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf)
}

// handleAgent handles "GET /agents/{identifier}": one entry by its exact
// identifier, percent-encoded once as the rest of the path (ARD direct
// lookup). It answers from this index alone, never federates, and carries
// the stored entry with its visibility label but no score or source. A
// private entry is found only by its owner's viewer; to anyone else it does
// not exist.
func (s *Service) handleAgent(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.noParams(w, r) {
		return
	}
	// The escaped path, decoded once here: the identifier is one segment,
	// so an encoded slash (%2F) belongs to it rather than splitting it.
	raw := strings.TrimPrefix(r.URL.EscapedPath(), "/agents/")
	id, err := url.PathUnescape(raw)
	if err != nil || id == "" || strings.Contains(raw, "/") {
		s.writeError(w, r, s.badIdentifier(id, "must be one path segment: the identifier percent-encoded once"))
		return
	}
	// Stored identifiers are normalised as ingestion does (urn:ai: alias,
	// lower-cased publisher domain); the name stays case-sensitive.
	norm, _, msg := ingest.NormalizeIdentifier(id)
	if msg == "" && strings.TrimSpace(id) != id {
		msg = "has surrounding space"
	}
	if msg != "" {
		s.writeError(w, r, s.badIdentifier(id, msg))
		return
	}
	id = norm
	entries, err := s.db.GetEntries([]string{id})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	e, ok := entries[id]
	if !ok || e.Owner != "" {
		// A private identifier (or a guess at one) stays out of the log.
		web.LogPathAs(r, "/agents/{identifier}")
	}
	vis := visPublic
	if ok && e.Owner != "" {
		vis = visPrivate
		if !mayView(e.Owner, s.viewers(r)) {
			ok = false
		}
	}
	if !ok {
		s.writeError(w, r, s.problems.New(web.SlugNotFound, "no entry "+strconv.Quote(id)+" in this registry"))
		return
	}
	buf, err := appendProjected(make([]byte, 0, len(e.Body)+32), e.Body, projection{visibility: vis, keepRQ: true})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if vis == visPrivate {
		w.Header().Set("Cache-Control", "private, no-store")
	}
	writeResponse(w, append(buf, '\n'))
}

// badIdentifier is the 400 of a lookup whose identifier is no ARD URN.
func (s *Service) badIdentifier(id, msg string) *web.Problem {
	p := s.problems.New(web.SlugBadRequest, "identifier "+strconv.Quote(id)+" is not an ARD identifier: "+msg)
	p.Errors = []web.FieldError{{Field: "identifier", Message: msg}}
	return p
}
