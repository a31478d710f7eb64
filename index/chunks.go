package index

import (
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
)

// Query analysis, chunk by chunk.
//
// Analysing a request's text through Bleve's chain (Unicode word
// segmentation, then five token filters, each token allocated) cost about
// 24 µs a natural-language request, most of it on words every other
// request holds too. In ASCII text a word never spans whitespace (Unicode
// word segmentation breaks on both sides of an ASCII space, tab or line
// break, and the characters that would attach to one are not ASCII), and
// every filter of the chain looks at one token alone: so a text's words
// are its whitespace-separated chunks' words, each chunk analysed alone,
// with offsets and positions carried on. A chunk's words ("papers?",
// "getTinyImage", "(ERP)") are kept in a cache bounded in bytes, so a request
// costs a map look-up per chunk. Text with any other byte is analysed
// whole. FuzzChunkedAnalysis and TestChunkedAnalysisMatchesBleve compare
// the two ways word for word.

// chunkCacheBytes bounds the analysed chunks kept, counted as their keys,
// words and a map entry's overhead (a request's chunk is about 100 bytes,
// one of many short identifier parts up to 2 KB); the cache starts afresh
// when full, so no text, however made, holds more.
const chunkCacheBytes = 8 << 20

// maxChunkBytes is the longest chunk cached: longer ones are analysed each
// time.
const maxChunkBytes = 64

// chunkWords is what a chunk analyses into: its words, their offsets and
// positions relative to the chunk (offset 0, first position 0), and how
// many positions it takes (its tokens, and the extra ones an identifier's
// words take).
type chunkWords struct {
	words     []word
	positions int
}

// chunkCache holds analysed chunks.
type chunkCache struct {
	mu     sync.RWMutex
	chunks map[string]chunkWords
	bytes  int
}

// size is what a cached chunk counts against chunkCacheBytes.
func (cw chunkWords) size(key string) int {
	n := len(key) + 64
	for _, w := range cw.words {
		n += len(w.term) + 48
	}
	return n
}

// analyseWords is wordsOf(the text analyzer's tokens of text), chunk by
// chunk for ASCII text.
func (ix *Index) analyseWords(text string) []word {
	// Chunks are cut from the raw text: an analyzer that rewrites it
	// first (char filters) is run whole.
	da, ok := ix.an.text.(*analysis.DefaultAnalyzer)
	if !ok || len(da.CharFilters) > 0 || !isASCII(text) {
		return wordsOf(ix.an.text.Analyze([]byte(text)))
	}
	words := make([]word, 0, len(text)/5)
	pos := 1 // Bleve numbers a text's positions from 1
	for i := 0; i < len(text); {
		if isSpace(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && !isSpace(text[j]) {
			j++
		}
		cw := ix.chunk(da, text[i:j])
		for _, w := range cw.words {
			words = append(words, word{term: w.term, at: i + w.at, pos: pos + w.pos})
		}
		pos += cw.positions
		i = j
	}
	return words
}

// chunk analyses one whitespace-free ASCII chunk, from the cache where it
// can.
func (ix *Index) chunk(da *analysis.DefaultAnalyzer, c string) chunkWords {
	cache := &ix.chunks
	if len(c) <= maxChunkBytes {
		cache.mu.RLock()
		cw, ok := cache.chunks[c]
		cache.mu.RUnlock()
		if ok {
			return cw
		}
	}
	cw := analyseChunk(da, c)
	if len(c) <= maxChunkBytes {
		size := cw.size(c)
		cache.mu.Lock()
		if cache.chunks == nil || cache.bytes+size > chunkCacheBytes {
			cache.chunks, cache.bytes = make(map[string]chunkWords, 1024), 0
		}
		if _, ok := cache.chunks[c]; !ok {
			cache.chunks[c] = cw
			cache.bytes += size
		}
		cache.mu.Unlock()
	}
	return cw
}

// analyseChunk runs the text analyzer da on one chunk, as its Analyze
// does: the tokenizer, then each filter in turn. The positions the chunk
// takes are counted between the two: its tokens (stop words included,
// which the filters drop without renumbering) plus the extra positions
// the identifier filter gives a token's words.
func analyseChunk(da *analysis.DefaultAnalyzer, c string) chunkWords {
	var cw chunkWords
	tokens := da.Tokenizer.Tokenize([]byte(c))
	for _, tok := range tokens {
		cw.positions++
		if parts := splitWordParts(tok.Term); len(parts) > 1 {
			cw.positions += len(parts) - 1
		}
	}
	for _, f := range da.TokenFilters {
		tokens = f.Filter(tokens)
	}
	for _, w := range wordsOf(tokens) {
		w.pos--
		cw.words = append(cw.words, w)
	}
	return cw
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// isSpace reports whether b is ASCII whitespace: no rule of Unicode word
// segmentation (UAX #29) joins a word to a space, tab, CR, LF, vertical
// tab or form feed.
func isSpace(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}
