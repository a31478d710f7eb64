package registry

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
)

const (
	defaultAgentsPageSize = 20
	maxAgentsPageSize     = 100
)

// parseAgents validates the query of GET /agents into a listing request.
func (s *Service) parseAgents(r *http.Request) (index.ListRequest, error) {
	var fe fieldErrors
	q := r.URL.Query()
	req := index.ListRequest{Size: defaultAgentsPageSize}
	params := []string{"filter", "orderBy", "pageSize", "pageToken"}
	fe.onlyParams(q, "GET /agents", params...)
	for _, k := range params {
		if len(q[k]) > 1 {
			fe.add(k, "is given more than once")
		}
	}
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
		payload, err := s.tokens.open(tokenAgents, agentsScope(filter, orderBy), tok)
		var after []string
		if err != nil || json.Unmarshal(payload, &after) != nil || len(after) == 0 {
			fe.add("pageToken", "is not a page token of this filter and orderBy; send the same filter and orderBy as the request that returned it")
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
			s.log.Warn("indexed entry missing from kv", "identifier", id)
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
		buf = append(buf, s.tokens.seal(tokenAgents, agentsScope(r.URL.Query().Get("filter"), r.URL.Query().Get("orderBy")), payload)...)
		buf = append(buf, '"')
	}
	buf = append(buf, `,"totalSize":`...)
	buf = strconv.AppendUint(buf, res.Total, 10)
	buf = append(buf, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf)
}
