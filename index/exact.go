package index

import (
	"context"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Words as written.
//
// The ranking matches stems: "tags" finds "tag", "repositories" finds
// "repository". Stemming also joins words that only share a stem: a
// request's "interested" matches an operation named "interests", its
// "general" one that will "generate", its "news" an entry that is "new".
// So after the categories, the first exactDepth hits are re-scored by how
// much of the request each holds word for word. The request's words are
// its runs of letters and digits, lower-cased, English stop words out (as
// plain BM25 cuts them), those the analyzer made terms of the request, but
// the ones the relevance cutoff finds common, at most maxExactWords; an
// entry's are those of its name, display name, description, tags,
// capabilities, publisher and representative queries, indexed once each
// as keywords of fieldExact, so the field's length is the entry's count of
// distinct words. A hit's share is the sum, over the
// request's words it holds, of the word's idf times its BM25 weight in
// the hit (one occurrence over the length norm with pivot exactPivot,
// saturated: an entry of exactPivot words counts 1 a word, a longer one
// less), over the sum of the idf of the request's words some entry holds
// (idf over the entries holding the word as written).
// Its raw score is multiplied by 1 + exactWeight × its share. A hit's
// factor depends on the request and the index alone, so filters change no
// score; only the first exactDepth move, among themselves, and no factor
// is under 1, so each still scores at least as much as any hit after
// them: a page of any size starts the same ranking. Each word's docs are
// decoded as a text leaf's (cached the same way; an absent word as an
// empty list, which the dictionaries tell).
//
// Measured in docs/decisions.md (issue 19, fifteenth session): without
// the length norm the step lost among 100k entries (long entries hold
// more of any request); with per-part shares (as the categories weigh
// parts) it lost on the multi-intent sets, so the share is the whole
// request's.
const (
	exactDepth  = pairDepth
	exactWeight = 0.5
	// exactPivot is the length (in distinct words as written) at which an
	// entry's words count as they are: a longer one's count less, a
	// shorter one's more, as BM25's length norm has it (b 0.75).
	exactPivot = 8
	// maxExactWords bounds the words of a request looked up, as many as
	// the terms it may keep, counted after the rule above.
	maxExactWords = maxQueryTerms
)

// exactPostings is the docs holding word in fieldExact, each with its
// length-normalised weight (fieldTF of one occurrence over exactPivot);
// nil when none does.
func (ix *Index) exactPostings(ctx context.Context, r bleveindex.IndexReader, snap, word string) (*decoded, error) {
	d, err := ix.postings.load(snap, r, leafKey{word, exactField}, source{
		whole: func() (*decoded, error) {
			if snap != "" && ix.postings.absentFrom(snap, r, word, exactField, exactField+1) {
				return &decoded{block: 1 << blockBits}, nil
			}
			return decode(ctx, r, word, fieldExact, 0, exactPivot, false, 1<<blockBits)
		},
		part: func(sp span) (*decoded, error) {
			return decodePart(ctx, sp, word, fieldExact, exactPivot, false, 1<<blockBits)
		},
		avg: [2]float64{exactPivot},
	})
	if err != nil || len(d.docs) == 0 {
		return nil, err
	}
	return d, nil
}

// exactField is fieldExact's index in dictFields and its key in the
// posting cache (leafKey.field).
var exactField = pairField + 1

// exactStop is the English stop list the text analyzer drops too, read
// by Bleve's own loader.
var exactStop = func() analysis.TokenMap {
	m := analysis.NewTokenMap()
	if err := m.LoadBytes(en.EnglishStopWords); err != nil {
		panic("index: English stop words: " + err.Error())
	}
	return m
}()

// eachWord calls fn with each word of s as written and its byte offset,
// in order, while fn returns true: its runs of letters and digits,
// lower-cased, but English stop words.
func eachWord(s string, fn func(at int, w string) bool) {
	for i := 0; i < len(s); {
		j := strings.IndexFunc(s[i:], isWordRune)
		if j < 0 {
			return
		}
		i += j
		k := strings.IndexFunc(s[i:], func(r rune) bool { return !isWordRune(r) })
		if k < 0 {
			k = len(s) - i
		}
		at, w := i, strings.ToLower(s[i:i+k])
		i += k
		if !exactStop[w] && !fn(at, w) {
			return
		}
	}
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// exactWordsOf is d's distinct words as written over every value of its
// text fields (see toDocument), in order of first use.
func exactWordsOf(d *Doc) []string {
	var out []string
	seen := map[string]bool{}
	for _, values := range [][]string{{d.Name, d.DisplayName, d.Description, d.Publisher}, d.Tags, d.Capabilities, d.Queries, d.Text} {
		for _, v := range values {
			eachWord(v, func(_ int, w string) bool {
				if !seen[w] {
					seen[w] = true
					out = append(out, w)
				}
				return true
			})
		}
	}
	return out
}

// exactWordsFor is the words of text as written that rescoreExact looks
// up: those the analyzer turned into one of p's terms (the term of the
// analysed word that starts where the word does: an identifier's part
// comes after the whole, and is the word), and not one the relevance
// cutoff finds common. No entry holds the others as written, and a common
// word's list is long and says little.
func exactWordsFor(p *textPlan, text string) []string {
	var out []string
	w := 0 // into p.words, in text order
	eachWord(text, func(at int, word string) bool {
		for w < len(p.words) && p.words[w].at < at {
			w++
		}
		term := ""
		for ; w < len(p.words) && p.words[w].at == at; w++ {
			term = p.words[w].term
		}
		ti := slices.IndexFunc(p.terms, func(t queryTerm) bool { return t.term == term })
		if term != "" && ti >= 0 && !slices.Contains(p.should, ti) && !slices.Contains(out, word) {
			out = append(out, word)
		}
		return len(out) < maxExactWords
	})
	return out
}

// rescoreExact re-scores the first exactDepth of hits, ranked for the plan
// p of text and ordered best first, by the words of text they hold as
// written (see above), and orders them again; the hits after them stay as
// they are.
func (ix *Index) rescoreExact(ctx context.Context, r bleveindex.IndexReader, p *textPlan, text string, hits []Hit) ([]Hit, error) {
	top := hits[:min(len(hits), exactDepth)]
	if len(top) == 0 || ix.bleveScoring {
		return hits, nil
	}
	held := make([]float64, len(top))
	total := 0.0
	for _, word := range exactWordsFor(p, text) {
		list, err := ix.exactPostings(ctx, r, p.snap, word)
		if err != nil {
			return nil, err
		}
		if list == nil {
			continue
		}
		weight := idf(p.docs, uint64(len(list.docs)))
		total += weight
		for i, h := range top {
			if h.doc > math.MaxUint32 {
				continue
			}
			if at, ok := list.find(uint32(h.doc)); ok {
				held[i] += weight * saturate(1, list.s[at])
			}
		}
	}
	if total <= 0 {
		return hits, nil
	}
	for i := range top {
		top[i].Raw *= 1 + exactWeight*held[i]/total
	}
	slices.SortFunc(top, byRank)
	return hits, nil
}
