package index

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Search limits. The window bounds the collector heap bleve allocates
// (From+Size); deeper pages are what List is for.
const (
	defaultSearchSize = 10
	maxSearchSize     = 1000
	maxSearchWindow   = 10000
	maxQueryTerms     = 32 // longer texts keep their first 32 distinct terms
)

// Relevance cutoff. A term is "common" when it occurs in more than
// commonTermShare of the docs; a doc that matches only common terms of a
// query that also has uncommon ones is noise (it shares a "service" or an
// "api" with the query and nothing else) and is excluded from hits, Total
// and facets alike. Below cutoffMinDocs every term looks common, so small
// indexes never cut. The rule is a query condition rather than a score
// threshold so that bleve's Total and facet counts obey it exactly.
const (
	commonTermShare = 0.2
	cutoffMinDocs   = 50
)

// Search ranks the docs matching req.
func (ix *Index) Search(ctx context.Context, req SearchRequest) (SearchResult, error) {
	if err := checkContext(ctx); err != nil {
		return SearchResult{}, err
	}
	size := req.Size
	if size <= 0 {
		size = defaultSearchSize
	}
	size = min(size, maxSearchSize)
	from := max(req.From, 0)
	if from >= maxSearchWindow {
		size = 0 // past the window: report Total only
	} else {
		size = min(size, maxSearchWindow-from)
	}

	// A result is cached only when no write overlapped the search, under
	// the generation it was computed for.
	key := resultKey(req, from, size)
	gen, quiet := ix.gen.Load(), ix.writing.Load() == 0
	if quiet {
		if r, ok := ix.results.get(gen, key); ok {
			r.Hits = slices.Clone(r.Hits)
			// Scores follow the calibration now in force, as a fresh
			// search's would.
			if k := ix.scale(ctx); k > 0 {
				for i := range r.Hits {
					r.Hits[i].Score = scoreOf(r.Hits[i].Raw, k)
				}
			}
			return r, nil
		}
	}
	out, err := ix.search(ctx, req, from, size)
	if err == nil && quiet && cacheable(key, out) && ix.writing.Load() == 0 && ix.gen.Load() == gen {
		ix.results.put(gen, key, SearchResult{Total: out.Total, Hits: slices.Clone(out.Hits)})
	}
	return out, err
}

// search runs one search against the index.
func (ix *Index) search(ctx context.Context, req SearchRequest, from, size int) (SearchResult, error) {
	var m matched
	var res *bleve.SearchResult
	for {
		var err error
		m, err = ix.matchQuery(ctx, req.Text, req.Filter, req.Viewer)
		if err != nil {
			return SearchResult{}, err
		}
		sr := bleve.NewSearchRequestOptions(m.q, size, min(from, maxSearchWindow), false)
		if m.unranked {
			// Without text every match scores the same; order by
			// identifier so pages are stable.
			sr.SortByCustom(search.SortOrder{&search.SortDocID{}})
			sr.Score = bleve.ScoreNone
		}
		res, err = ix.bleve.SearchInContext(ctx, sr)
		if err != nil {
			return SearchResult{}, fmt.Errorf("index: search: %w", err)
		}
		if !ix.privateRace(m) {
			break
		}
	}
	out := SearchResult{Total: res.Total, Hits: make([]Hit, 0, len(res.Hits))}
	if m.unranked {
		for _, h := range res.Hits {
			out.Hits = append(out.Hits, Hit{ID: h.ID})
		}
		return out, nil
	}
	k := ix.scale(ctx)
	for _, h := range res.Hits {
		out.Hits = append(out.Hits, Hit{ID: h.ID, Raw: h.Score, Score: scoreOf(h.Score, k)})
	}
	return out, nil
}

// scoreOf maps a raw BM25 score onto 0-100 with the saturating function
// 100·raw/(raw+k). It is monotone in raw, never reaches 100, and, since k is
// fixed per index (not per query), a score means the same in every query.
func scoreOf(raw, k float64) int {
	if raw <= 0 || k <= 0 || math.IsNaN(raw) {
		return 0
	}
	if math.IsInf(raw, 1) {
		return 100
	}
	return int(math.Round(100 * raw / (raw + k)))
}

// matched is a built query: the scored match plus its filters.
type matched struct {
	q        query.Query
	unranked bool // no text: every visible doc passing the filters, unscored
	// public is set when the query omits the private docs' exclusion
	// because the index held none when it was built.
	public bool
}

// privateRace reports whether a search run with m must be run again: m
// omitted the private docs' exclusion, and a private doc arrived meanwhile.
// Put raises anyPrivate before the doc becomes searchable, so if it is
// still down after the search, no private doc can have been in its
// snapshot.
func (ix *Index) privateRace(m matched) bool {
	return m.public && ix.anyPrivate.Load()
}

// matchQuery builds the query shared by Search and Facets: the text match
// (with the relevance cutoff), the visibility rule and the filters.
func (ix *Index) matchQuery(ctx context.Context, text string, f Filter, viewer string) (matched, error) {
	filters, err := filterQueries(f)
	if err != nil {
		return matched{}, err
	}
	// With no private doc in the index, the must-not is left out: it costs
	// a boolean searcher around every query, a step per matching doc.
	var hidden query.Query
	public := !ix.anyPrivate.Load()
	if !public {
		hidden = hiddenQuery(viewer)
	}
	if strings.TrimSpace(text) == "" {
		return matched{q: withFilters(query.NewMatchAllQuery(), hidden, filters), unranked: true, public: public}, nil
	}
	tq, err := ix.textQuery(ctx, text)
	if err != nil {
		return matched{}, err
	}
	if _, none := tq.match.(*query.MatchNoneQuery); none {
		// Not wrapped: bleve treats a match-none Must as absent and would
		// fall back to matching everything the must-not leaves.
		return matched{q: tq.match}, nil
	}
	return matched{q: withFilters(tq.match, hidden, filters), public: public}, nil
}

// withFilters attaches non-scoring filters and the hidden docs' exclusion
// (none when hidden is nil) to a scored query.
func withFilters(q, hidden query.Query, filters []query.Query) query.Query {
	if hidden == nil && len(filters) == 0 {
		return q
	}
	bq := query.NewBooleanQuery(nil, nil, nil)
	bq.Must = q // not AddMust: that wraps q in a one-child conjunction
	if hidden != nil {
		bq.AddMustNot(hidden)
	}
	switch len(filters) {
	case 0:
	case 1:
		bq.AddFilter(filters[0])
	default:
		bq.AddFilter(query.NewConjunctionQuery(filters))
	}
	return bq
}

// textMatch is the scored part of a text search, relevance cutoff included.
type textMatch struct {
	match query.Query
}

// queryTerm is one analysed query term with the fields that hold it.
type queryTerm struct {
	term   string
	fields []int // indexes into textFields with df > 0
	maxDF  uint64
}

// textQuery analyses text and builds, per distinct term, a disjunction over
// the text fields that contain it (boosted per field), and over the terms a
// disjunction whose coordination factor rewards docs matching more of the
// query. Terms found nowhere are dropped, so a typo or an unknown word
// neither matches nor dilutes the coordination factor.
func (ix *Index) textQuery(ctx context.Context, text string) (textMatch, error) {
	terms := ix.analyseQuery(text)
	if len(terms) == 0 {
		return textMatch{match: query.NewMatchNoneQuery()}, nil
	}
	adv, err := ix.bleve.Advanced()
	if err != nil {
		return textMatch{}, fmt.Errorf("index: search: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return textMatch{}, fmt.Errorf("index: search: %w", err)
	}
	defer r.Close()
	docs, err := r.DocCount()
	if err != nil {
		return textMatch{}, fmt.Errorf("index: search: %w", err)
	}
	gen := ix.gen.Load()
	var rare, common []query.Query
	for _, t := range terms {
		qt, ok := ix.dfs.get(gen, t)
		if !ok {
			qt = queryTerm{term: t}
			for fi, f := range textFields {
				tfr, err := r.TermFieldReader(ctx, []byte(t), f.name, false, false, false)
				if err != nil {
					return textMatch{}, fmt.Errorf("index: search: %w", err)
				}
				n := tfr.Count()
				_ = tfr.Close()
				if n > 0 {
					qt.fields = append(qt.fields, fi)
					qt.maxDF = max(qt.maxDF, n)
				}
			}
			if len(qt.term) <= maxCachedTermBytes {
				ix.dfs.put(gen, qt.term, qt)
			}
		}
		if len(qt.fields) == 0 {
			continue
		}
		leaves := make([]query.Query, 0, len(qt.fields))
		for _, fi := range qt.fields {
			tq := query.NewTermQuery(qt.term)
			tq.SetField(textFields[fi].name)
			tq.SetBoost(textFields[fi].boost)
			leaves = append(leaves, tq)
		}
		if docs >= cutoffMinDocs && float64(qt.maxDF) <= commonTermShare*float64(docs) {
			rare = append(rare, disjunction(leaves))
		} else {
			common = append(common, disjunction(leaves))
		}
	}
	switch {
	case len(rare) == 0 && len(common) == 0:
		return textMatch{match: query.NewMatchNoneQuery()}, nil
	case len(rare) == 0:
		return textMatch{match: disjunction(common)}, nil
	case len(common) == 0:
		return textMatch{match: disjunction(rare)}, nil
	}
	// The cutoff: the rare terms must match, the common ones only add to
	// the score. The boolean searcher walks the rare terms' postings and
	// advances the common ones to each candidate, so a doc that shares
	// only a common word with the query is never visited, let alone
	// scored.
	bq := query.NewBooleanQuery(nil, nil, nil)
	bq.Must = disjunction(rare) // not AddMust: that wraps it in a conjunction
	bq.Should = query.NewDisjunctionQuery(common)
	return textMatch{match: bq}, nil
}

func disjunction(qs []query.Query) query.Query {
	if len(qs) == 1 {
		return qs[0]
	}
	return query.NewDisjunctionQuery(qs)
}

// analyseQuery returns the distinct analysed terms of text, in order.
func (ix *Index) analyseQuery(text string) []string {
	tokens := ix.an.text.Analyze([]byte(text))
	terms := make([]string, 0, len(tokens))
	for _, tok := range tokens {
		t := string(tok.Term)
		if t == "" || slices.Contains(terms, t) {
			continue
		}
		terms = append(terms, t)
		if len(terms) == maxQueryTerms {
			break
		}
	}
	return terms
}

// hiddenQuery matches the private docs viewer may not see: every private
// doc for an anonymous viewer, else those owned by someone else. Searches
// exclude it with a must-not.
func hiddenQuery(viewer string) query.Query {
	private := query.NewTermQuery(privateMarker)
	private.SetField(fieldPrivate)
	viewer = normaliseValue(fieldOwner, viewer)
	if viewer == "" {
		return private
	}
	own := query.NewTermQuery(viewer)
	own.SetField(fieldOwner)
	bq := query.NewBooleanQuery(nil, nil, nil)
	bq.Must = private
	bq.AddMustNot(own)
	return bq
}

// filterQueries turns a Filter into one query per key: OR within a key, AND
// across keys. Keys are visited in sorted order so the query (and any error)
// is deterministic. A key whose values are all empty constrains nothing.
func filterQueries(f Filter) ([]query.Query, error) {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]query.Query, 0, len(keys)+2)
	for _, k := range keys {
		if !FilterKey(k) {
			return nil, fmt.Errorf("%w: filter key %q", ErrUnknownFilterKey, k)
		}
		if q := anyOf(k, f[k]); q != nil {
			out = append(out, q)
		}
	}
	return out, nil
}

// anyOf matches docs whose field holds any of values (normalised).
func anyOf(field string, values []string) query.Query {
	var qs []query.Query
	seen := make(map[string]bool, len(values))
	for _, v := range values {
		v = normaliseValue(field, v)
		if v == "" || seen[v] {
			continue
		}
		seen[v] = true
		tq := query.NewTermQuery(v)
		tq.SetField(field)
		qs = append(qs, tq)
	}
	if len(qs) == 0 {
		return nil
	}
	return disjunction(qs)
}

// dfCacheSize bounds the term statistics cache. Looking a term's document
// frequency up costs a dictionary probe per segment, a large share of a
// short query's cost, and query terms repeat.
const dfCacheSize = 20000

// maxCachedTermBytes keeps a hostile query's giant tokens out of the term
// statistics cache (20,000 of them must stay small).
const maxCachedTermBytes = 128
