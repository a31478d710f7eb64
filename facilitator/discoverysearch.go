package facilitator

// GET /discovery/search: the query the official bazaar client (2.27.0,
// withBazaar(...).extensions.bazaar.search) sends a facilitator — query,
// type, payTo, scheme, network, extensions, limit, cursor — answered from
// this facilitator's catalogue in the client's SearchDiscoveryResources
// shape: {x402Version, resources, partialResults, pagination{limit,
// cursor}}. The same filters apply to GET /discovery/resources.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// Bounds on the search parameters.
const (
	maxSearchQuery = 256
	maxFilterParam = 128
)

// CatalogueQuery selects catalogue entries: words of Text (any of them,
// ranked by how many match), and exact filters, each ignored when empty.
type CatalogueQuery struct {
	Text      string
	Type      string // http or mcp
	PayTo     string // compared without case: EVM addresses have checksum spellings
	Scheme    string
	Network   string // a CAIP-2 id and its v1 name are one network
	Extension string // an extension key the resource declared; every entry here declared "bazaar"
}

// keep reports whether e passes q's filters (not its text).
func (q CatalogueQuery) keep(e kv.CatalogueEntry) bool {
	return (q.Type == "" || e.Type == q.Type) &&
		(q.PayTo == "" || strings.EqualFold(e.PayTo, q.PayTo)) &&
		(q.Scheme == "" || strings.EqualFold(e.Scheme, q.Scheme)) &&
		(q.Network == "" || sameNetwork(e.Network, q.Network)) &&
		(q.Extension == "" || q.Extension == "bazaar")
}

// Find returns every entry matching q, best first: more words of q.Text
// matched (in the URL, method, tool name, description, MIME type or
// declared shapes), then most recently paid. Without text it lists the
// filtered entries, most recently paid first.
func (c *Catalogue) Find(q CatalogueQuery) []CatalogueItem {
	words := strings.Fields(strings.ToLower(q.Text))
	type hit struct {
		e     kv.CatalogueEntry
		score int
	}
	var hits []hit
	for _, e := range c.sorted(q.keep) {
		hay := strings.ToLower(strings.Join([]string{e.Resource, e.Method, e.ToolName, e.Description, e.MimeType, string(e.DiscoveryInfo)}, " "))
		score := 0
		for _, w := range words {
			if strings.Contains(hay, w) {
				score++
			}
		}
		if len(words) == 0 || score > 0 {
			hits = append(hits, hit{e, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return b.score - a.score })
	out := make([]CatalogueItem, 0, len(hits))
	for _, h := range hits {
		out = append(out, itemOf(h.e))
	}
	return out
}

// searchResponse is the body of GET /discovery/search.
type searchResponse struct {
	X402Version    int              `json:"x402Version"`
	Resources      []CatalogueItem  `json:"resources"`
	PartialResults bool             `json:"partialResults"`
	Pagination     searchPagination `json:"pagination"`
}

type searchPagination struct {
	Limit  int     `json:"limit"`
	Cursor *string `json:"cursor"` // the next page's cursor; null on the last page
}

// catalogueFilters reads the filter parameters shared by /discovery/search
// and /discovery/resources.
func catalogueFilters(q map[string][]string, errs *[]web.FieldError) CatalogueQuery {
	var cq CatalogueQuery
	get := func(name string, max int) string {
		v, ok := q[name]
		if !ok {
			return ""
		}
		if v[0] == "" || len(v[0]) > max {
			*errs = append(*errs, web.FieldError{Field: name, Message: fmt.Sprintf("must be 1 to %d characters; leave it out to not filter", max)})
		}
		return v[0]
	}
	cq.Type = get("type", maxFilterParam)
	if _, ok := q["type"]; ok && cq.Type != "http" && cq.Type != "mcp" {
		*errs = append(*errs, web.FieldError{Field: "type", Message: `must be "http" or "mcp"`})
	}
	cq.PayTo = get("payTo", maxFilterParam)
	cq.Scheme = get("scheme", maxFilterParam)
	cq.Network = get("network", maxNetworkParam)
	cq.Extension = get("extensions", maxFilterParam)
	return cq
}

// handleDiscoverySearch handles "GET /discovery/search".
func (s *Service) handleDiscoverySearch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var errs []web.FieldError
	cq := catalogueFilters(q, &errs)
	cq.Text = q.Get("query")
	if strings.TrimSpace(cq.Text) == "" || len(cq.Text) > maxSearchQuery {
		errs = append(errs, web.FieldError{Field: "query", Message: fmt.Sprintf("is required: 1 to %d characters of search text", maxSearchQuery)})
	}
	limit, offset := DefaultDiscoveryLimit, 0
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > MaxDiscoveryLimit {
			errs = append(errs, web.FieldError{Field: "limit", Message: fmt.Sprintf("must be an integer from 1 to %d", MaxDiscoveryLimit)})
		}
		limit = n
	}
	if v, ok := q["cursor"]; ok {
		// The cursor is the next result's position, as the reference
		// catalogue writes it; it only ever comes from our own answer.
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 0 || n > MaxCatalogueEntries {
			errs = append(errs, web.FieldError{Field: "cursor", Message: "must be a cursor from a previous answer"})
		}
		offset = n
	}
	if len(errs) > 0 {
		s.problems.Write(w, r, s.problems.Invalid("invalid query parameters", errs...))
		return
	}
	resp := searchResponse{X402Version: x402.Version2, Resources: []CatalogueItem{}, Pagination: searchPagination{Limit: limit}}
	if s.cfg.Catalogue != nil {
		all := s.cfg.Catalogue.Find(cq)
		if offset < len(all) {
			resp.Resources = all[offset:min(offset+limit, len(all))]
		}
		if next := offset + limit; next < len(all) {
			c := strconv.Itoa(next)
			resp.Pagination.Cursor = &c
		}
	}
	web.WriteJSON(w, http.StatusOK, resp)
}

// bazaarExtensions is an item's extensions member: the bazaar declaration
// the merchant made, echoed as the official DiscoveryResource carries it.
func bazaarExtensions(e kv.CatalogueEntry) map[string]any {
	if len(e.DiscoveryInfo) == 0 {
		return nil
	}
	bz := map[string]any{"info": json.RawMessage(e.DiscoveryInfo)}
	if e.RouteTemplate != "" {
		bz["routeTemplate"] = e.RouteTemplate
	}
	return map[string]any{"bazaar": bz}
}
