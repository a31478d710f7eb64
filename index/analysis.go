package index

import (
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	unicodetok "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/registry"
)

// textAnalyzerName names the analyzer of every full-text field: the
// Unicode tokenizer, identifier splitting (wordPartsName), English
// possessives, lower case, English stop words and Porter stemming. Index
// and query side use the same chain, so "getTinyImage", "get_tiny_image"
// and "get tiny image" meet on the same stems.
const textAnalyzerName = "ardx_text"

// wordPartsName names the token filter that splits identifiers into words.
const wordPartsName = "ardx_word_parts"

func init() {
	// Registration is process-global in bleve; the names are ours alone.
	if err := registry.RegisterTokenFilter(wordPartsName, func(map[string]any, *registry.Cache) (analysis.TokenFilter, error) {
		return wordPartsFilter{}, nil
	}); err != nil {
		panic(err)
	}
}

// textAnalyzerConfig is the custom-analyzer definition added to the index
// mapping (so it is part of the mapping version).
var textAnalyzerConfig = map[string]any{
	"type":          custom.Name,
	"tokenizer":     unicodetok.Name,
	"token_filters": []any{wordPartsName, en.PossessiveName, lowercase.Name, en.StopName, porter.Name},
}

// wordPartsFilter splits identifier-like tokens into their words while
// keeping the original token: "getTinyImage" yields getTinyImage, get, Tiny,
// Image; "send_email" yields send_email, send, email; "api.example.com"
// yields the whole and api, example, com. Keeping the original matters for
// brand words written in camel case ("GitHub" must still match "github").
// The Unicode tokenizer already splits on hyphens and slashes but keeps
// underscores, dots and colons between letters inside one token.
type wordPartsFilter struct{}

// Filter implements analysis.TokenFilter.
func (wordPartsFilter) Filter(input analysis.TokenStream) analysis.TokenStream {
	var out analysis.TokenStream
	shift := 0 // positions added so far by emitted parts
	for i, tok := range input {
		parts := splitWordParts(tok.Term)
		if len(parts) < 2 {
			if out != nil {
				tok.Position += shift
				out = append(out, tok)
			}
			continue
		}
		if out == nil {
			out = make(analysis.TokenStream, 0, len(input)+4)
			out = append(out, input[:i]...)
		}
		pos := tok.Position + shift
		orig := *tok
		orig.Position = pos
		out = append(out, &orig)
		for j, p := range parts {
			out = append(out, &analysis.Token{
				Term:     tok.Term[p[0]:p[1]],
				Start:    tok.Start + p[0],
				End:      tok.Start + p[1],
				Position: pos + j,
				Type:     tok.Type,
			})
		}
		shift += len(parts) - 1
	}
	if out == nil {
		return input
	}
	return out
}

// splitWordParts returns the byte ranges of the words inside an identifier:
// separated by '_', '.', ':' and at lower→upper and UPPER→Upper-lower case
// changes ("HTTPServer" → HTTP, Server). It returns nil when the term is a
// single word.
func splitWordParts(term []byte) [][2]int {
	var parts [][2]int
	start := -1
	var prev rune
	for i := 0; i < len(term); {
		r, size := utf8.DecodeRune(term[i:])
		if r == '_' || r == '.' || r == ':' {
			if start >= 0 {
				parts = append(parts, [2]int{start, i})
				start = -1
			}
			i += size
			prev = r
			continue
		}
		if start < 0 {
			start = i
		} else if unicode.IsUpper(r) {
			split := unicode.IsLower(prev) || unicode.IsDigit(prev)
			if !split && unicode.IsUpper(prev) {
				// An upper-case run followed by a lower-case letter: the
				// last capital starts the next word.
				if next, _ := utf8.DecodeRune(term[i+size:]); i+size < len(term) && unicode.IsLower(next) {
					split = true
				}
			}
			if split && i > start {
				parts = append(parts, [2]int{start, i})
				start = i
			}
		}
		prev = r
		i += size
	}
	if start >= 0 && start < len(term) {
		parts = append(parts, [2]int{start, len(term)})
	}
	if len(parts) < 2 {
		return nil
	}
	return parts
}

// Terms returns the distinct terms the full-text analyzer makes of text,
// in order of first appearance: the words a search for text looks up, and
// the words a field holding text is found by. Callers that explain a match
// (POST /plan's "why") compare in these terms, so the explanation agrees
// with the ranking (stemming, identifier splitting, stop words).
func (ix *Index) Terms(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, tok := range ix.an.text.Analyze([]byte(text)) {
		if t := string(tok.Term); !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// pairsOf lists the adjacent word pairs of an analysed text's words, each
// once, in order: "a b" for a word a followed by b, stop words skipped (so
// "weather in London" pairs weather with london), an identifier's words
// standing in for the identifier ("getTinyImage" pairs get with tini and
// tini with imag). Index and query side make pairs the same way from the
// same analyser, so a request that says "tiny image" meets an entry named
// getTinyImage.
func pairsOf(words []word) []string {
	// One word per position: an identifier and its first word share one,
	// and the word (after it in the stream) is kept.
	seq := make([]string, 0, len(words))
	last := -1
	for _, w := range words {
		if w.pos == last && len(seq) > 0 {
			seq[len(seq)-1] = w.term
			continue
		}
		seq = append(seq, w.term)
		last = w.pos
	}
	if len(seq) < 2 {
		return nil
	}
	out := make([]string, 0, len(seq)-1)
	for i := 1; i < len(seq); i++ {
		if p := seq[i-1] + " " + seq[i]; !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// queryPairs is pairsOf(words) cut to the first maxQueryTerms pairs: what
// a request (or one of its parts) looks up.
func queryPairs(words []word) []string {
	pairs := pairsOf(words)
	return pairs[:min(len(pairs), maxQueryTerms)]
}

// wordsOf is the analysed words of tokens, in order, empty ones left out.
func wordsOf(tokens analysis.TokenStream) []word {
	words := make([]word, 0, len(tokens))
	for _, tok := range tokens {
		if len(tok.Term) > 0 {
			words = append(words, word{term: string(tok.Term), at: tok.Start, pos: tok.Position})
		}
	}
	return words
}
