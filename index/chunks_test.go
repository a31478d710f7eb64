package index

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/internal/shareddata"
)

// chunkCases are texts whose words depend on the punctuation inside a
// chunk, on whitespace other than spaces, or on bytes past ASCII.
var chunkCases = []string{
	"",
	"   ",
	"weather in London",
	"Can you help me search for research papers from Arxiv?",
	"getTinyImage get_tiny_image HTTPServer api.example.com a:b x86_64 C++ v2.0.1",
	"can't it's John's users' e.g. U.S.A. 3.14 1,000 50% $150 #tag @user --flag 'quoted' \"double\"",
	"tab\tseparated\nlines\r\nand\vvertical\fform feed",
	"trailing.dots... (ERP) [x] {y} <z> a/b a-b a—b",
	"the of and to a in that is was he for it with as his on be at by",
	"café naïve 日本語 テキスト emoji 🙂 mixed ascii",
	"word\u00a0nbsp and\u2028separator",
	"The The the THE tHe",
	"a.b.c.d_e_f:g:h getURLForHTTPSRequest ABCDef abc123def 123abc",
}

// TestChunkedAnalysisMatchesBleve checks that a request's words, analysed
// chunk by chunk from the cache, are the words Bleve's analyzer makes of
// the whole text: term, offset and position, on hand-made cases and on
// every MetaTool request and tool description (twice, the second time from
// the cache).
func TestChunkedAnalysisMatchesBleve(t *testing.T) {
	ix := openChunkIndex(t)
	texts := slices.Clone(chunkCases)
	if shareddata.Locate() != "" {
		tools, queries := shareddata.MetaTool(t)
		for _, q := range queries {
			texts = append(texts, q.Text)
		}
		for _, tool := range tools {
			texts = append(texts, tool.Description)
		}
	}
	for pass := range 2 {
		for _, text := range texts {
			want := wordsOf(ix.an.text.Analyze([]byte(text)))
			got := ix.analyseWords(text)
			if !slices.Equal(got, want) {
				t.Fatalf("pass %d, %q:\n got %v\nwant %v", pass, text, got, want)
			}
		}
	}
	if len(ix.chunks.chunks) == 0 {
		t.Fatal("no chunk was cached")
	}
}

// FuzzChunkedAnalysis compares the two ways on any text.
func FuzzChunkedAnalysis(f *testing.F) {
	for _, c := range chunkCases {
		f.Add(c)
	}
	ix := openChunkIndex(f)
	f.Fuzz(func(t *testing.T, text string) {
		want := wordsOf(ix.an.text.Analyze([]byte(text)))
		if got := ix.analyseWords(text); !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", text, got, want)
		}
		// From the cache now.
		if got := ix.analyseWords(text); !slices.Equal(got, want) {
			t.Fatalf("%q, cached:\n got %v\nwant %v", text, got, want)
		}
	})
}

func openChunkIndex(tb testing.TB) *Index {
	tb.Helper()
	ix, _, err := OpenWith("", Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ix.Close() })
	return ix
}

// TestChunkCacheStaysBounded feeds chunks that analyse into many words
// each and checks the cache's count never passes its bound, and that it
// still answers as Bleve does after starting afresh.
func TestChunkCacheStaysBounded(t *testing.T) {
	ix := openChunkIndex(t)
	var b strings.Builder
	for i := range 20000 {
		b.Reset()
		for j := range 16 {
			fmt.Fprintf(&b, "w%dx%d.", i, j)
		}
		text := b.String()[:min(b.Len(), maxChunkBytes)]
		got := ix.analyseWords(text)
		if want := wordsOf(ix.an.text.Analyze([]byte(text))); !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", text, got, want)
		}
		if ix.chunks.bytes > chunkCacheBytes {
			t.Fatalf("after %d chunks the cache counts %d bytes, over %d", i+1, ix.chunks.bytes, chunkCacheBytes)
		}
	}
	if len(ix.chunks.chunks) == 0 {
		t.Fatal("nothing cached")
	}
}
