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
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Search limits. The window bounds the collector heap bleve allocates
// (From+Size); deeper pages are what List is for. A request of three or
// four intents (80-120 words) runs past 32 distinct terms, and cut there
// it lost its last intents' words; one of five to ten (Seal-Tools' longest
// requests, 150 words and more) ran past 64. 128 still bounds a hostile
// text's cost (POST /search takes 1 KiB, about 170 words).
const (
	defaultSearchSize = 10
	maxSearchSize     = 1000
	maxSearchWindow   = 10000
	maxQueryTerms     = 128 // longer texts keep their first 128 distinct terms
)

// Relevance cutoff. A term is "common" when it occurs in more than
// commonTermShare of the docs; a doc that matches only common terms of a
// query that also has uncommon ones is noise (it shares a "service" or an
// "api" with the query and nothing else) and is excluded from hits, Total
// and facets alike. Below cutoffMinDocs every term looks common, so small
// indexes never cut: there, scoring every match is cheap, and in a few
// hundred operations of one domain the words the right one shares with a
// request are often the common ones ("get", "movie"). The rule is a query condition rather than a score
// threshold so that bleve's Total and facet counts obey it exactly.
const (
	commonTermShare = 0.2
	cutoffMinDocs   = 1000
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

	// A result is cached only when the index stayed in one quiet
	// generation (no write, calibration settled) throughout the search,
	// under that generation.
	key := resultKey(req, from, size)
	gen, quiet := ix.Generation()
	if quiet {
		if r, ok := ix.results.Get(gen, key); ok {
			r.Hits = slices.Clone(r.Hits)
			return r, nil
		}
	}
	out, err := ix.search(ctx, req, from, size)
	// Kept from its second sighting on (see gencache.Admit).
	if err == nil && cacheable(key, out) && ix.results.Admit(key) && quiet {
		if g, q := ix.Generation(); q && g == gen {
			ix.results.Put(gen, key, SearchResult{Total: out.Total, More: out.More, Hits: slices.Clone(out.Hits)})
		}
	}
	return out, err
}

// search runs one search against the index: a ranked text search by
// rankText, a browse without text by Bleve in identifier order.
func (ix *Index) search(ctx context.Context, req SearchRequest, from, size int) (SearchResult, error) {
	for {
		out, m, err := ix.searchOnce(ctx, req, from, size)
		if err != nil {
			return SearchResult{}, err
		}
		if !ix.privateRace(m) {
			return out, nil
		}
	}
}

func (ix *Index) searchOnce(ctx context.Context, req SearchRequest, from, size int) (SearchResult, matched, error) {
	r, gen, err := ix.snapshot()
	if err != nil {
		return SearchResult{}, matched{}, err
	}
	defer r.Close()
	m, err := ix.matchQuery(ctx, r, gen, req.Text, req.Filter, req.Viewers)
	if err != nil {
		return SearchResult{}, m, err
	}
	if m.unranked {
		// Without text every match scores the same; order by identifier
		// so pages are stable.
		sr := bleve.NewSearchRequestOptions(m.query(), size, min(from, maxSearchWindow), false)
		sr.SortByCustom(search.SortOrder{&search.SortDocID{}})
		sr.Score = bleve.ScoreNone
		res, err := ix.bleve.SearchInContext(ctx, sr)
		if err != nil {
			return SearchResult{}, m, fmt.Errorf("index: search: %w", err)
		}
		out := SearchResult{Total: res.Total, More: uint64(from+len(res.Hits)) < res.Total, Hits: make([]Hit, 0, len(res.Hits))}
		for _, h := range res.Hits {
			out.Hits = append(out.Hits, Hit{ID: h.ID})
		}
		return out, m, nil
	}
	if m.text == nil {
		return SearchResult{Hits: []Hit{}}, m, nil
	}
	// One more than the page, to tell whether another page follows, and
	// never fewer than the hits the word pairs re-score, so that every
	// page starts the same ranking.
	window := min(from, maxSearchWindow) + size
	depth := max(window+1, pairDepth)
	// A request of several sentences (or clauses): each one's best answers
	// too (segment.go).
	parts, clauses := ix.parts(m.text, req.Text)
	hits, total, err := ix.rankText(ctx, r, m, depth, req.Count, noCut)
	if err == nil {
		hits, err = ix.rescorePairs(ctx, r, m.text, hits)
	}
	switch {
	case err != nil:
	case clauses:
		hits, err = ix.fuseClauses(ctx, r, m, parts, hits, depth)
	case parts != nil:
		hits, err = ix.fuse(ctx, r, m, parts, hits, depth)
	}
	if err != nil {
		return SearchResult{}, m, err
	}
	// Then the first hits by their categories (tags.go).
	if hits, err = ix.rescoreTags(ctx, r, m.text, parts, hits); err != nil {
		return SearchResult{}, m, err
	}
	// Then by the request's words they hold as written (exact.go).
	if hits, err = ix.rescoreExact(ctx, r, m.text, req.Text, hits); err != nil {
		return SearchResult{}, m, err
	}
	out := SearchResult{More: len(hits) > window}
	if req.Count {
		out.Total = total
	}
	hits = hits[:min(len(hits), window)]
	out.Hits = hits[min(from, len(hits)):]
	if err := ix.postings.withIDs(m.text.snap, r, out.Hits); err != nil {
		return SearchResult{}, m, err
	}
	k := ix.scale(ctx)
	for i := range out.Hits {
		out.Hits[i].Score = scoreOf(out.Hits[i].Raw, k)
	}
	return out, m, nil
}

// snapshot opens a reader on the index as it is now, and the generation
// read just before (see textQuery).
func (ix *Index) snapshot() (bleveindex.IndexReader, uint64, error) {
	gen := ix.gen.Load()
	adv, err := ix.bleve.Advanced()
	if err != nil {
		return nil, 0, fmt.Errorf("index: search: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, 0, fmt.Errorf("index: search: %w", err)
	}
	return r, gen, nil
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

// matched is a built query: the scored match plus its filters, in the
// parts rankText runs; query puts them together for Bleve.
type matched struct {
	unranked bool      // no text: every visible doc passing the filters, unscored
	text     *textPlan // the scored match; nil when no term is in the index
	filter   query.Query
	hidden   query.Query
	// public is set when the query omits the private docs' exclusion
	// because the index held none when it was built.
	public bool
}

// query is m as one Bleve query, for facets and browsing: what rankText
// ranks, Bleve's searchers match.
func (m matched) query() query.Query {
	switch {
	case m.unranked:
		return withFilters(query.NewMatchAllQuery(), m.hidden, m.filter)
	case m.text == nil:
		// Not wrapped: bleve treats a match-none Must as absent and would
		// fall back to matching everything the must-not leaves.
		return query.NewMatchNoneQuery()
	}
	return withFilters(m.text.query(), m.hidden, m.filter)
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
// (with the relevance cutoff), the visibility rule and the filters. r is a
// snapshot opened after gen was read.
func (ix *Index) matchQuery(ctx context.Context, r bleveindex.IndexReader, gen uint64, text string, f Filter, viewers []string) (matched, error) {
	filters, err := filterQueries(f)
	if err != nil {
		return matched{}, err
	}
	m := matched{public: !ix.anyPrivate.Load()}
	switch len(filters) {
	case 0:
	case 1:
		m.filter = filters[0]
	default:
		m.filter = query.NewConjunctionQuery(filters)
	}
	// With no private doc in the index, the must-not is left out: it costs
	// a boolean searcher around every query, a step per matching doc.
	if !m.public {
		m.hidden = hiddenQuery(viewers)
	}
	if strings.TrimSpace(text) == "" {
		m.unranked = true
		return m, nil
	}
	p, err := ix.textQuery(ctx, r, gen, text)
	if err != nil {
		return matched{}, err
	}
	if len(p.terms) > 0 {
		m.text = &p
	}
	return m, nil
}

// withFilters attaches a non-scoring filter and the hidden docs' exclusion
// (each none when nil) to a scored query.
func withFilters(q, hidden, filter query.Query) query.Query {
	if hidden == nil && filter == nil {
		return q
	}
	bq := query.NewBooleanQuery(nil, nil, nil)
	bq.Must = q // not AddMust: that wraps q in a one-child conjunction
	if hidden != nil {
		bq.AddMustNot(hidden)
	}
	if filter != nil {
		bq.AddFilter(filter)
	}
	return bq
}

// queryTerm is one analysed query term with the text fields that hold it.
// A cached queryTerm is shared: never modified once stored.
type queryTerm struct {
	term   string
	fields []int    // indexes into textFields with df > 0
	df     []uint64 // per entry of fields
	maxDF  uint64
}

// textPlan is an analysed text query as rankText runs it: the terms found
// in the index, in query order, split into the group every match must hit
// and the optional group that only adds to the score.
type textPlan struct {
	terms  []queryTerm
	must   []int    // indexes into terms: the rare terms, or every term
	should []int    // the common terms when there are rare ones, else empty
	words  []word   // the request's analysed tokens, for its parts (segment.go)
	pairs  []string // its adjacent word pairs (pairs.go)
	docs   uint64
	// cache says the statistics may be read from and stored in ix.dfs:
	// the reader is exactly the index generation gen, snapshot snap (see
	// snapshotKey), whose decoded postings ix.postings may hold.
	cache bool
	gen   uint64
	snap  string
}

// textQuery analyses text into a plan: per distinct term, the text fields
// that contain it; over the terms, a disjunction whose coordination factor
// rewards docs matching more of the query. Terms found nowhere are
// dropped, so a typo or an unknown word neither matches nor dilutes the
// coordination factor; a plan without terms matches nothing. The
// relevance cutoff: when the query has rare terms, a match must hit one
// of them, and the common ones only add to its score. r must have been
// opened after gen was read.
func (ix *Index) textQuery(ctx context.Context, r bleveindex.IndexReader, gen uint64, text string) (textPlan, error) {
	terms, words, pairs := ix.analyse(text)
	if len(terms) == 0 {
		return textPlan{}, nil
	}
	docs, err := r.DocCount()
	if err != nil {
		return textPlan{}, fmt.Errorf("index: search: %w", err)
	}
	// The cache holds statistics of generation gen; they fit r only if no
	// write began or ended since gen was read, before r was opened.
	p := textPlan{docs: docs, words: words, pairs: pairs, gen: gen, cache: ix.writing.Load() == 0 && ix.gen.Load() == gen}
	if p.cache {
		p.snap = snapshotKey(r, gen)
	}
	var rare, common []int
	for _, t := range terms {
		qt, ok := queryTerm{}, false
		if p.cache {
			qt, ok = ix.dfs.Get(gen, t)
		}
		if !ok {
			qt = queryTerm{term: t}
			// A word in no dictionary (a typo, a word never indexed) is
			// cached too: requests repeat such words as much as others.
			counts, err := ix.postings.counts(ctx, p.snap, r, t)
			if err != nil {
				return textPlan{}, err
			}
			for fi, n := range counts {
				if n > 0 {
					qt.fields = append(qt.fields, fi)
					qt.df = append(qt.df, n)
					qt.maxDF = max(qt.maxDF, n)
				}
			}
			if p.cache && len(qt.term) <= maxCachedTermBytes {
				ix.dfs.Put(gen, qt.term, qt)
			}
		}
		if len(qt.fields) == 0 {
			continue
		}
		p.terms = append(p.terms, qt)
		if docs >= cutoffMinDocs && float64(qt.maxDF) <= commonTermShare*float64(docs) {
			rare = append(rare, len(p.terms)-1)
		} else {
			common = append(common, len(p.terms)-1)
		}
	}
	if len(rare) == 0 {
		p.must = common
	} else {
		p.must, p.should = rare, common
	}
	return p, nil
}

// query is the plan as a Bleve query: per term a disjunction over its
// fields (boosted per field), a disjunction over the must terms and, when
// there are common terms besides, a boolean whose should clause adds
// them. rankText scores exactly what Bleve's searchers would score for it.
func (p *textPlan) query() query.Query {
	group := func(idx []int) []query.Query {
		qs := make([]query.Query, 0, len(idx))
		for _, ti := range idx {
			qt := &p.terms[ti]
			leaves := make([]query.Query, 0, len(qt.fields))
			for li, fi := range qt.fields {
				tq := query.NewTermQuery(qt.term)
				tq.SetField(textFields[fi].name)
				tq.SetBoost(leafBoost(fi, idf(p.docs, qt.df[li]), idf(p.docs, qt.maxDF), len(p.terms)))
				leaves = append(leaves, tq)
			}
			qs = append(qs, disjunction(leaves))
		}
		return qs
	}
	must := disjunction(group(p.must))
	if len(p.should) == 0 {
		return must
	}
	bq := query.NewBooleanQuery(nil, nil, nil)
	bq.Must = must // not AddMust: that wraps it in a conjunction
	bq.Should = query.NewDisjunctionQuery(group(p.should))
	return bq
}

// idfPower is the power of a term's idf in its score (W_t, rank.go). 1 is
// textbook BM25; Bleve's weighs a term by idf twice, so a rare word a
// request mentions in passing outweighs the words that name the
// operation; 1.5 measured best, in Bleve's form and in BM25F
// (docs/decisions.md). The idf is the term's, not the field's (as in
// BM25F): "find" is rare among names but common in text, and a name-field
// idf made every tool named "find" outrank the tools a request that says
// "find" is about.
const idfPower = 1.5

// idf is BM25's inverse document frequency of a term in df of n docs, as
// Bleve computes it.
func idf(n, df uint64) float64 {
	N, d := float64(n), float64(df)
	return math.Log(1 + (N-d+0.5)/(d+0.5))
}

// nameFullTerms is the longest query (in terms found in the index) whose
// name-field hits keep the field's whole boost; past it the name boost
// falls with the square of the share (nameFullTerms/terms). A name is a
// few words: a keyword search of a few words that hits it says most, a
// request of fifteen words that shares one word with a name says little,
// and at 100k entries those one-word name hits crowded out the entries
// whose descriptions answered the request (docs/decisions.md).
const nameFullTerms = 4

// fieldWeight is the weight of text field fi in a query of terms terms
// (words found in the index): the field's boost, and for the name field
// past nameFullTerms that boost times (nameFullTerms/terms)².
func fieldWeight(fi, terms int) float64 {
	b := textFields[fi].boost
	if textFields[fi].name == fieldName && terms > nameFullTerms {
		share := float64(nameFullTerms) / float64(terms)
		b *= share * share
	}
	return b
}

// leafBoost is the query boost of a term in text field fi whose idf there
// is leafIDF, termIDF being its idf over the doc (from its largest df over
// the fields), in a query of terms terms. Bleve scores a leaf
// boost·leafIDF² (times the query norm and the term-frequency part); the
// boost makes that the field's weight times termIDF^idfPower. The plan's
// Bleve query (facets, counts) and the ranker's Bleve form
// (Index.bleveScoring) use it, so their scores agree.
func leafBoost(fi int, leafIDF, termIDF float64, terms int) float64 {
	return fieldWeight(fi, terms) * math.Pow(termIDF, idfPower) / (leafIDF * leafIDF)
}

func disjunction(qs []query.Query) query.Query {
	if len(qs) == 1 {
		return qs[0]
	}
	return query.NewDisjunctionQuery(qs)
}

// analyseQuery returns the distinct analysed terms of text, in order.
func (ix *Index) analyseQuery(text string) []string {
	terms, _, _ := ix.analyse(text)
	return terms
}

// word is an analysed term of a request, where its token starts in the
// request's text, and its position (an identifier and its first word
// share one).
type word struct {
	term string
	at   int
	pos  int
}

// analyse returns the distinct analysed terms of text, in order, the first
// maxQueryTerms of them, every analysed token as a word, in order, and the
// first maxQueryTerms of its word pairs (pairsOf).
func (ix *Index) analyse(text string) ([]string, []word, []string) {
	words := ix.analyseWords(text)
	terms := make([]string, 0, len(words))
	for _, w := range words {
		if len(terms) < maxQueryTerms && !slices.Contains(terms, w.term) {
			terms = append(terms, w.term)
		}
	}
	return terms, words, queryPairs(words)
}

// hiddenQuery matches the private docs viewers may not see: every private
// doc for an anonymous caller, else those owned by none of viewers. Searches
// exclude it with a must-not.
func hiddenQuery(viewers []string) query.Query {
	private := query.NewTermQuery(privateMarker)
	private.SetField(fieldPrivate)
	var own []query.Query
	for _, v := range viewers {
		if v = normaliseValue(fieldOwner, v); v != "" {
			t := query.NewTermQuery(v)
			t.SetField(fieldOwner)
			own = append(own, t)
		}
	}
	if len(own) == 0 {
		return private
	}
	bq := query.NewBooleanQuery(nil, nil, nil)
	bq.Must = private
	bq.AddMustNot(own...)
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
		if isPriceKey(k) {
			q, err := priceQuery(k, f[k])
			if err != nil {
				return nil, err
			}
			out = append(out, q)
			continue
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

// softenedTerms is the query length the name field's weight is softened
// by: the plan's terms, or 0 (no softening) below cutoffMinDocs docs. In a
// registry of a few hundred entries a name that shares a word with a long
// request is one of few and says much; among thousands, one-word name
// hits crowd out the entries whose descriptions answer it.
func (p *textPlan) softenedTerms() int {
	if p.docs < cutoffMinDocs {
		return 0
	}
	return len(p.terms)
}
