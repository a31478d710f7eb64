package registry

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/web"
)

const (
	defaultFacetLimit = 20
	maxFacetLimit     = 1000
)

// exploreRequest is a validated POST /explore body.
type exploreRequest struct {
	queryModel
	Facets []index.FacetRequest
}

// parseExplore validates a POST /explore body. Every member is optional; a
// body without resultType.facets asks for every supported facet.
func (s *Service) parseExplore(m map[string]json.RawMessage) (exploreRequest, error) {
	var fe fieldErrors
	var req exploreRequest
	fe.onlyMembers(m, "", "an explore request", "query", "resultType")
	req.queryModel = parseQuery(m["query"], false, &fe)
	supported := index.FacetFields()
	if raw, ok := m["resultType"]; ok && !isNull(raw) {
		if s, ok := rawString(raw); ok && s == "facets" {
			// The response's own spelling; read it as "all facets".
		} else if rt, ok := rawObject(raw); !ok {
			fe.add("resultType", "must be an object with a facets array")
		} else {
			fe.onlyMembers(rt, "resultType.", "resultType", "facets")
			if f, ok := rt["facets"]; ok && !isNull(f) {
				req.Facets = parseFacets(f, supported, &fe)
			}
		}
	}
	if p := fe.problem(s.problems); p != nil {
		return req, p
	}
	if len(req.Facets) == 0 {
		for _, f := range supported {
			req.Facets = append(req.Facets, index.FacetRequest{Field: f, Limit: defaultFacetLimit})
		}
	}
	return req, nil
}

func parseFacets(raw json.RawMessage, supported []string, fe *fieldErrors) []index.FacetRequest {
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		fe.add("resultType.facets", "must be an array of facet names or {field, limit, minCount} objects")
		return nil
	}
	if len(items) > len(supported)+8 {
		fe.add("resultType.facets", "lists more facets than there are")
		return nil
	}
	var out []index.FacetRequest
	seen := map[string]bool{}
	for i, it := range items {
		path := "resultType.facets[" + strconv.Itoa(i) + "]"
		fr := index.FacetRequest{Limit: defaultFacetLimit}
		if name, ok := rawString(it); ok {
			fr.Field = name
		} else if obj, ok := rawObject(it); ok {
			fe.onlyMembers(obj, path+".", "a facet request", "field", "limit", "minCount")
			name, ok := rawString(obj["field"])
			if !ok {
				fe.add(path+".field", "is required and must be a string")
				continue
			}
			fr.Field = name
			if l, ok := obj["limit"]; ok && !isNull(l) {
				n, ok := rawInt(l)
				if !ok || n < 1 || n > maxFacetLimit {
					fe.add(path+".limit", "must be an integer from 1 to "+strconv.Itoa(maxFacetLimit))
					continue
				}
				fr.Limit = n
			}
			if mc, ok := obj["minCount"]; ok && !isNull(mc) {
				n, ok := rawInt(mc)
				if !ok || n < 0 {
					fe.add(path+".minCount", "must be a non-negative integer")
					continue
				}
				fr.MinCount = n
			}
		} else {
			fe.add(path, "must be a facet name or a {field, limit, minCount} object")
			continue
		}
		if !slices.Contains(supported, fr.Field) {
			fe.add(path, "facet field "+strconv.Quote(fr.Field)+" is not supported; supported: "+joinQuoted(supported))
			continue
		}
		if seen[fr.Field] {
			fe.add(path, "facet field "+strconv.Quote(fr.Field)+" is asked for twice")
			continue
		}
		seen[fr.Field] = true
		out = append(out, fr)
	}
	return out
}

func joinQuoted(list []string) string {
	b := make([]byte, 0, 16*len(list))
	for i, s := range list {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, s...)
	}
	return string(b)
}

// exploreResponse is the body of POST /explore (ARD §5.3).
type exploreResponse struct {
	ResultType string                 `json:"resultType"`
	Facets     map[string]facetResult `json:"facets"`
}

type facetResult struct {
	Buckets    []bucket `json:"buckets"`
	OtherCount int      `json:"otherCount"`
}

type bucket struct {
	Value string `json:"value"`
	Count int    `json:"count"`
	// PrivateCount is how many of Count are the caller's private entries,
	// for a caller with a key that sees some; absent otherwise.
	PrivateCount *int `json:"privateCount,omitempty"`
}

// handleExplore handles "POST /explore". It never federates (ADR-0005).
func (s *Service) handleExplore(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	m, err := readObject(w, r, s.problems)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := s.parseExplore(m)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	viewers := s.viewers(r)
	facets, err := s.ix.Facets(r.Context(), req.Text, req.Filter, viewers, req.Facets)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A caller who sees private entries gets each bucket's private share:
	// its count less the public count of the same value.
	var public map[string]index.Facet
	if len(viewers) > 0 {
		if public, err = s.ix.Facets(r.Context(), req.Text, req.Filter, nil, req.Facets); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	resp := exploreResponse{ResultType: "facets", Facets: make(map[string]facetResult, len(req.Facets))}
	for _, fr := range req.Facets {
		f := facets[fr.Field]
		out := facetResult{Buckets: make([]bucket, 0, len(f.Buckets)), OtherCount: f.Other}
		for _, b := range f.Buckets {
			out.Buckets = append(out.Buckets, bucket{Value: b.Value, Count: b.Count, PrivateCount: privateShare(b, public, fr)})
		}
		resp.Facets[fr.Field] = out
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// privateShare is b's count less the public count of its value, when that
// is known: the value is among the public buckets, or the public buckets
// are fewer than the limit (so a value absent there has none). nil when no
// public counts were taken or the share cannot be told.
func privateShare(b index.Bucket, public map[string]index.Facet, fr index.FacetRequest) *int {
	if public == nil {
		return nil
	}
	pf := public[fr.Field]
	n := b.Count
	found := false
	for _, pb := range pf.Buckets {
		if pb.Value == b.Value {
			n -= pb.Count
			found = true
			break
		}
	}
	limit := fr.Limit
	if limit <= 0 {
		limit = 20
	}
	if !found && len(pf.Buckets) >= limit {
		return nil
	}
	n = max(n, 0)
	return &n
}
