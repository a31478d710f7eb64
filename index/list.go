package index

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// List limits.
const (
	defaultListSize = 20
	maxListSize     = 1000
)

// Order fields accepted by List.
const (
	OrderDisplayName = "displayName"
	OrderUpdatedAt   = "updatedAt"
	OrderCreatedAt   = "createdAt"
	OrderIdentifier  = "identifier"
)

// List browses docs in a deterministic order. Pages follow each other with
// After set to the previous page's Next (bleve's search-after), so no page
// costs more than the first and concurrent writes never shift an item onto
// two pages.
func (ix *Index) List(ctx context.Context, req ListRequest) (ListResult, error) {
	if err := checkContext(ctx); err != nil {
		return ListResult{}, err
	}
	order, err := sortOrder(req.OrderBy)
	if err != nil {
		return ListResult{}, err
	}
	if req.After != nil && len(req.After) != len(order) {
		return ListResult{}, fmt.Errorf("%w: %d values for %d sort keys", ErrBadCursor, len(req.After), len(order))
	}
	size := req.Size
	if size <= 0 {
		size = defaultListSize
	}
	size = min(size, maxListSize)

	var filters []query.Query
	if q := anyOf(fieldType, req.Types); q != nil {
		filters = append(filters, q)
	}
	if q := anyOf(fieldPublisher, req.Publishers); q != nil {
		filters = append(filters, q)
	}
	if q := displayNameQuery(req.DisplayName); q != nil {
		filters = append(filters, q)
	}
	if !req.CreatedAfter.IsZero() {
		filters = append(filters, afterQuery(fieldCreatedAt, req.CreatedAfter))
	}
	if !req.UpdatedAfter.IsZero() {
		filters = append(filters, afterQuery(fieldUpdatedAt, req.UpdatedAfter))
	}

	// One extra hit tells whether another page follows.
	var q query.Query = query.NewMatchAllQuery()
	if len(filters) > 0 {
		q = query.NewConjunctionQuery(filters)
	}
	q = withFilters(q, hiddenQuery(req.Viewers), nil)
	sr := bleve.NewSearchRequestOptions(q, size+1, 0, false)
	sr.Score = bleve.ScoreNone
	sr.SortByCustom(order)
	if req.After != nil {
		sr.SearchAfter = req.After
	}
	res, err := ix.bleve.SearchInContext(ctx, sr)
	if err != nil {
		return ListResult{}, fmt.Errorf("index: list: %w", err)
	}
	out := ListResult{Total: res.Total, IDs: make([]string, 0, min(len(res.Hits), size))}
	for i, h := range res.Hits {
		if i == size {
			out.Next = append([]string(nil), res.Hits[i-1].Sort...)
			break
		}
		out.IDs = append(out.IDs, h.ID)
	}
	return out, nil
}

// sortOrder translates OrderBy, appending the identifier tie-break.
func sortOrder(by []Order) (search.SortOrder, error) {
	order := make(search.SortOrder, 0, len(by)+1)
	hasID := false
	for _, o := range by {
		var field string
		switch o.Field {
		case OrderDisplayName:
			field = fieldSortName
		case OrderUpdatedAt:
			field = fieldUpdatedAt
		case OrderCreatedAt:
			field = fieldCreatedAt
		case OrderIdentifier:
			order = append(order, &search.SortDocID{Desc: o.Desc})
			hasID = true
		default:
			return nil, fmt.Errorf("%w: order field %q", ErrUnknownFilterKey, o.Field)
		}
		if hasID {
			// Nothing after a unique key can change the order.
			break
		}
		// AsString: a value that happens to look like a prefix-coded
		// number must never be compared as one.
		order = append(order, &search.SortField{Field: field, Desc: o.Desc, Type: search.SortFieldAsString})
	}
	if !hasID {
		order = append(order, &search.SortDocID{})
	}
	return order, nil
}

// displayNameQuery matches docs whose lower-cased display name contains any
// of subs.
func displayNameQuery(subs []string) query.Query {
	var clean []string
	for _, s := range subs {
		s = strings.ToLower(strings.Join(strings.Fields(s), " "))
		if s != "" && !slices.Contains(clean, s) {
			clean = append(clean, s)
		}
	}
	if len(clean) == 0 {
		return nil
	}
	return &substringQuery{field: fieldSortName, subs: clean}
}

// substringQuery matches docs with a term in field containing any of subs.
// It scans the field's term dictionary with strings.Contains and unions the
// postings of the terms found, as bleve's regexp query does after its
// automaton: compiling ".*x.*" into an automaton costs tens of
// milliseconds and grows with x, while a dictionary scan costs about
// 100 ns per distinct display name and treats input as plain text.
type substringQuery struct {
	field string
	subs  []string
}

// Searcher implements query.Query.
func (q *substringQuery) Searcher(ctx context.Context, r bleveindex.IndexReader, _ mapping.IndexMapping, opts search.SearcherOptions) (search.Searcher, error) {
	dict, err := r.FieldDict(q.field)
	if err != nil {
		return nil, err
	}
	defer dict.Close()
	var terms []string
	for {
		e, err := dict.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		if slices.ContainsFunc(q.subs, func(s string) bool { return strings.Contains(e.Term, s) }) {
			terms = append(terms, e.Term)
		}
	}
	if len(terms) == 0 {
		return searcher.NewMatchNoneSearcher(r)
	}
	return searcher.NewMultiTermSearcher(ctx, r, terms, q.field, 1.0, opts, false)
}

// afterQuery matches docs whose timestamp field is strictly after t.
func afterQuery(field string, t time.Time) query.Query {
	f := false
	q := query.NewTermRangeInclusiveQuery(formatTime(t), "", &f, nil)
	q.SetField(field)
	return q
}
