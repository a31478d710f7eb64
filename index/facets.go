package index

import (
	"context"
	"fmt"

	"github.com/blevesearch/bleve/v2"
)

// Facet limits.
const (
	defaultFacetLimit = 20
	maxFacetLimit     = 1000
	maxFacetRequests  = 32
)

// Facets counts field values over every doc matching text and filter, with
// the same matching and relevance cutoff as Search. Empty text matches all.
// Counts cover the full matched set, not a page. Values below MinCount are
// folded into Other, which counts the matched values not shown in Buckets
// (bleve counts values, so a doc with two tags counts in two places).
func (ix *Index) Facets(ctx context.Context, text string, filter Filter, viewers []string, reqs []FacetRequest) (map[string]Facet, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if len(reqs) > maxFacetRequests {
		return nil, fmt.Errorf("index: facets: %d fields requested, at most %d", len(reqs), maxFacetRequests)
	}
	for _, r := range reqs {
		if !facetField(r.Field) {
			return nil, fmt.Errorf("%w: facet field %q", ErrUnknownFilterKey, r.Field)
		}
	}
	minCount := make(map[string]int, len(reqs))
	var res *bleve.SearchResult
	for {
		r, gen, err := ix.snapshot()
		if err != nil {
			return nil, err
		}
		m, err := ix.matchQuery(ctx, r, gen, text, filter, viewers)
		_ = r.Close()
		if err != nil {
			return nil, err
		}
		sr := bleve.NewSearchRequestOptions(m.query(), 0, 0, false)
		sr.Score = bleve.ScoreNone // counts only: skip scoring
		for _, r := range reqs {
			limit := r.Limit
			if limit <= 0 {
				limit = defaultFacetLimit
			}
			sr.AddFacet(r.Field, bleve.NewFacetRequest(r.Field, min(limit, maxFacetLimit)))
			minCount[r.Field] = r.MinCount
		}
		res, err = ix.bleve.SearchInContext(ctx, sr)
		if err != nil {
			return nil, fmt.Errorf("index: facets: %w", err)
		}
		if !ix.privateRace(m) {
			break
		}
	}
	out := make(map[string]Facet, len(reqs))
	for field := range minCount {
		f := Facet{Buckets: []Bucket{}}
		if fr := res.Facets[field]; fr != nil {
			f.Other = fr.Other
			if fr.Terms != nil {
				for _, t := range fr.Terms.Terms() {
					if t.Count < minCount[field] {
						f.Other += t.Count
						continue
					}
					f.Buckets = append(f.Buckets, Bucket{Value: t.Term, Count: t.Count})
				}
			}
		}
		out[field] = f
	}
	return out, nil
}
