package index

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	bleveindex "github.com/blevesearch/bleve_index_api"
	porterstemmer "github.com/blevesearch/go-porterstemmer"
)

// rankCorpus is a few thousand docs over a Zipf vocabulary, put in several
// batches with replacements and deletes, so the index has several segments,
// deleted docs, common and rare terms, private docs and filterable fields.
func rankCorpus(t testing.TB, ix *Index, rng *rand.Rand) []string {
	t.Helper()
	vocab := make([]string, 400)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%dx", i)
	}
	zipf := rand.NewZipf(rng, 1.1, 2, uint64(len(vocab)-1))
	words := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = vocab[zipf.Uint64()]
		}
		return strings.Join(ws, " ")
	}
	types := []string{"application/mcp-server-card+json", "application/a2a-agent-card+json", "application/vnd.skill+json"}
	doc := func(i int) Doc {
		d := Doc{
			ID:          fmt.Sprintf("urn:air:p%d.test:ns:doc-%d", i%37, i),
			Name:        fmt.Sprintf("doc-%d", i),
			DisplayName: words(1 + rng.IntN(3)),
			Description: words(3 + rng.IntN(60)),
			Publisher:   fmt.Sprintf("p%d.test", i%37),
			Type:        types[rng.IntN(len(types))],
		}
		for range 1 + rng.IntN(3) { // every doc a category: tags.go re-scores
			d.Tags = append(d.Tags, vocab[zipf.Uint64()])
		}
		for range rng.IntN(4) {
			d.Capabilities = append(d.Capabilities, vocab[zipf.Uint64()]+"_"+vocab[zipf.Uint64()])
		}
		if rng.IntN(3) == 0 {
			d.Queries = []string{words(2 + rng.IntN(4))}
		}
		if rng.IntN(20) == 0 {
			d.Owner = []string{"a.test", "b.test"}[rng.IntN(2)]
		}
		return d
	}
	const n = 3000
	for start := 0; start < n; start += 700 {
		var docs []Doc
		for i := start; i < min(start+700, n); i++ {
			docs = append(docs, doc(i))
		}
		if err := ix.Put(docs); err != nil {
			t.Fatal(err)
		}
	}
	// Replace some, delete some: deleted postings stay in old segments.
	var docs []Doc
	var gone []string
	for i := 0; i < n; i += 11 {
		docs = append(docs, doc(i))
		gone = append(gone, fmt.Sprintf("urn:air:p%d.test:ns:doc-%d", (i+5)%37, i+5))
	}
	if err := ix.Put(docs); err != nil {
		t.Fatal(err)
	}
	if err := ix.Delete(gone); err != nil {
		t.Fatal(err)
	}
	return vocab
}

// zipfIndex is an in-memory index of rankCorpus (in Bleve's scoring with
// bleve), closed at the end of the test, the generator it was made with,
// and queries' words: vocab drawn by zipf.
func zipfIndex(t *testing.T, bleve bool, seed1, seed2 uint64) (*Index, *rand.Rand, []string, *rand.Zipf) {
	t.Helper()
	ix, err := OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	ix.bleveScoring = bleve
	ix.blockDocs = 256 // many blocks: the ranker prunes
	ix.split = 3       // and splits a ranking into up to 3 ranges
	rng := rand.New(rand.NewPCG(seed1, seed2))
	vocab := rankCorpus(t, ix, rng)
	return ix, rng, vocab, rand.NewZipf(rng, 1.05, 1, uint64(len(vocab)-1))
}

// scoreTolerance is how far rankText's scores may be from Bleve's,
// relatively: not at all where Go does not fuse multiply-adds (amd64).
func scoreTolerance() float64 {
	if runtime.GOARCH != "amd64" {
		return 1e-12
	}
	return 0
}

// sameRanking fails t unless got holds want's hits: scores equal within
// tol, relatively, and, with sameIDs, the same docs in the same order.
func sameRanking(t testing.TB, label string, got, want []Hit, tol float64, sameIDs bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, Bleve %d", label, len(got), len(want))
	}
	for i := range want {
		if math.IsNaN(got[i].Raw) || math.IsNaN(want[i].Raw) {
			t.Fatalf("%s: hit %d scores NaN: %v, Bleve %v", label, i, got[i], want[i])
		}
		if (sameIDs && got[i].ID != want[i].ID) || math.Abs(got[i].Raw-want[i].Raw) > tol*want[i].Raw {
			t.Fatalf("%s: hit %d is %s %v, Bleve %s %v", label, i, got[i].ID, got[i].Raw, want[i].ID, want[i].Raw)
		}
	}
}

// bleveRanking is what Bleve's own searchers answer for req: the oracle
// rankText must match.
func bleveRanking(t testing.TB, ix *Index, req SearchRequest) ([]Hit, uint64) {
	t.Helper()
	r, gen, err := ix.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ix.matchQuery(context.Background(), r, gen, req.Text, req.Filter, req.Viewers)
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}
	res, err := ix.bleve.Search(bleve.NewSearchRequestOptions(m.query(), req.Size, req.From, false))
	if err != nil {
		t.Fatal(err)
	}
	hits := make([]Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		hits = append(hits, Hit{ID: h.ID, Raw: h.Score})
	}
	return hits, res.Total
}

// TestRankTextMatchesBleve compares rankText with Bleve's searchers on
// hundreds of queries: the same docs in the same order with the same
// scores, and with Count the same total, for every mix of rare and common
// terms, filters, viewers, page offsets and sizes.
func TestRankTextMatchesBleve(t *testing.T) {
	// A fixed seed keeps CI deterministic; 30 random seeds passed when
	// this was written (set ARDX_RANK_SEED to try another).
	seed := uint64(7)
	if v, err := strconv.ParseUint(os.Getenv("ARDX_RANK_SEED"), 10, 64); err == nil {
		seed = v
	}
	ix, rng, vocab, zipf := zipfIndex(t, true, seed, 11) // Bleve's scoring: the oracle's
	ctx := context.Background()
	tolerance := scoreTolerance()
	compared := 0
	for q := 0; q < 400; q++ {
		var words []string
		n := 1 + rng.IntN(6)
		if q%10 == 0 {
			n = 11 + rng.IntN(20) // a pasted paragraph
		}
		for range n {
			words = append(words, vocab[zipf.Uint64()])
		}
		if rng.IntN(5) == 0 {
			words = append(words, "nosuchword")
		}
		req := SearchRequest{Text: strings.Join(words, " "), Size: []int{1, 3, 10, 25}[rng.IntN(4)]}
		if rng.IntN(3) == 0 {
			req.From = rng.IntN(12)
		}
		switch rng.IntN(4) {
		case 1:
			req.Filter = Filter{"type": {"application/mcp-server-card+json"}}
		case 2:
			req.Filter = Filter{"tags": {vocab[zipf.Uint64()], vocab[zipf.Uint64()]}, "type": {"application/a2a-agent-card+json", "application/vnd.skill+json"}}
		}
		if rng.IntN(3) == 0 {
			req.Viewers = []string{"a.test"}
		}
		want, wantTotal := bleveRanking(t, ix, req)
		ix.split = 1 + 2*(q%2) // one range, or split in up to 3
		for _, count := range []bool{false, true} {
			req.Count = count
			got, err := ix.search(ctx, req, req.From, req.Size)
			if err != nil {
				t.Fatal(err)
			}
			// Over ten clauses Bleve's disjunction switches to a heap and
			// sums in heap order, so scores may differ in the last bits
			// and near-ties in order; the scores must still agree.
			tol, sameIDs := tolerance, true
			if len(words) > 10 {
				tol, sameIDs = 1e-12, false
			}
			sameRanking(t, fmt.Sprintf("%+v", req), got.Hits, want, tol, sameIDs)
			if wantMore := uint64(req.From+len(want)) < wantTotal; got.More != wantMore {
				t.Fatalf("%+v: More %v, bleve total %d", req, got.More, wantTotal)
			}
			if count && got.Total != wantTotal {
				t.Fatalf("%+v: Total %d, bleve %d", req, got.Total, wantTotal)
			}

		}
		compared++
	}
	t.Logf("%d queries compared", compared)
}

// TestRankTextUnderWrites searches while docs are put, replaced and
// deleted, and merges renumber them: every search must succeed with
// distinct hits in score order, and once the writes stop the rankings
// must agree with Bleve's again.
func TestRankTextUnderWrites(t *testing.T) {
	ix, err := OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	ix.bleveScoring = true // Bleve's scoring: the oracle's
	defer ix.Close()
	rng := rand.New(rand.NewPCG(3, 5))
	vocab := rankCorpus(t, ix, rng)
	ctx := t.Context()
	stop := make(chan struct{})
	var writeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		wrng := rand.New(rand.NewPCG(9, 9))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var docs []Doc
			for j := range 50 {
				n := wrng.IntN(3500)
				docs = append(docs, Doc{ID: fmt.Sprintf("urn:air:p%d.test:ns:doc-%d", n%37, n), Name: fmt.Sprintf("doc-%d", n),
					DisplayName: vocab[j%20] + " " + vocab[wrng.IntN(len(vocab))], Description: vocab[wrng.IntN(40)] + " " + vocab[wrng.IntN(len(vocab))],
					Type: "application/mcp-server-card+json"})
			}
			if err := ix.Put(docs); err != nil {
				writeErr = err
				return
			}
			if i%3 == 0 {
				if err := ix.Delete([]string{docs[0].ID, docs[1].ID}); err != nil {
					writeErr = err
					return
				}
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	searches := 0
	for time.Now().Before(deadline) {
		q := vocab[rng.IntN(30)] + " " + vocab[rng.IntN(len(vocab))]
		res, err := ix.Search(ctx, SearchRequest{Text: q + fmt.Sprintf(" zq%dx", searches), Size: 10})
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		seen := map[string]bool{}
		for i, h := range res.Hits {
			if !strings.HasPrefix(h.ID, "urn:air:p") || seen[h.ID] || (i > 0 && h.Raw > res.Hits[i-1].Raw) {
				t.Fatalf("search %q: hit %d %q (%v) is foreign, repeated or out of order: %+v", q, i, h.ID, h.Raw, res.Hits)
			}
			seen[h.ID] = true
		}
		searches++
	}
	close(stop)
	<-done
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	t.Logf("%d searches during writes", searches)

	// Once the writes stop, nothing decoded or cached during them may
	// linger: rankings agree with Bleve's again.
	for q := range 50 {
		req := SearchRequest{Text: vocab[q] + " " + vocab[rng.IntN(len(vocab))], Size: 10}
		want, _ := bleveRanking(t, ix, req)
		got, err := ix.Search(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		sameRanking(t, fmt.Sprintf("%q after the writes", req.Text), got.Hits, want, scoreTolerance(), true)
	}
}

// TestRankTextTies compares rankText with Bleve on an index of exact
// duplicates, where every score is tied many times over: a tie must go to
// the earlier doc, as in Bleve, whatever the page already holds.
func TestRankTextTies(t *testing.T) {
	ix, err := OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	ix.bleveScoring = true // Bleve's scoring: the oracle's
	ix.blockDocs = 256     // many blocks: the ranker prunes
	defer ix.Close()
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
	var docs []Doc
	// 40 distinct texts, 150 copies each, spread over the index.
	for i := 0; i < 6000; i++ {
		g := i % 40
		docs = append(docs, Doc{
			ID:          fmt.Sprintf("urn:air:p.test:ns:doc-%d", i),
			Name:        fmt.Sprintf("doc-%d", i),
			DisplayName: words[g%8] + " " + words[(g/8)%8],
			Description: strings.Repeat(words[(g+3)%8]+" ", 1+g%3) + words[(g*5)%8] + " tool",
		})
	}
	if err := ix.Put(docs); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, text := range []string{"alpha", "alpha bravo", "delta echo golf", "hotel tool", "charlie foxtrot tool alpha", "echo"} {
		for _, size := range []int{1, 3, 10, 20} {
			req := SearchRequest{Text: text, Size: size}
			want, _ := bleveRanking(t, ix, req)
			got, err := ix.search(ctx, req, 0, size)
			if err != nil {
				t.Fatal(err)
			}
			sameRanking(t, fmt.Sprintf("%q size %d", text, size), got.Hits, want, scoreTolerance(), true)
		}
	}
}

// TestAbsentTerms checks the dictionary look-up that lets a search skip
// the statistics of words no doc has: never absent for a word some doc
// has in a text field, across segments, deletions and merges, and absent
// for words none has; and that the statistics' counts are Bleve's term
// readers' counts.
func TestAbsentTerms(t *testing.T) {
	ix, _, err := OpenWith(filepath.Join(t.TempDir(), "index"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	rng := rand.New(rand.NewPCG(3, 5))
	vocab := rankCorpus(t, ix, rng)
	check := func(when string) {
		t.Helper()
		r, gen, err := ix.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		snap := snapshotKey(r, gen)
		absent := func(w string) bool {
			dicts, err := ix.postings.dictionaries(snap, r.(*scorch.IndexSnapshot))
			if err != nil {
				t.Fatal(err)
			}
			return absentIn(dicts, w, 0, len(textFields))
		}
		for _, w := range append(vocab, "doc", "test", "nosuchword") {
			present := false
			want := make([]uint64, len(textFields))
			for fi, f := range textFields {
				tfr, err := r.TermFieldReader(context.Background(), []byte(w), f.name, false, false, false)
				if err != nil {
					t.Fatal(err)
				}
				want[fi] = tfr.Count()
				present = present || tfr.Count() > 0
				_ = tfr.Close()
			}
			if present && absent(w) {
				t.Fatalf("%s: %q is indexed but reported absent", when, w)
			}
			if got, err := ix.postings.counts(context.Background(), snap, r, w); err != nil || !slices.Equal(got, want) {
				t.Fatalf("%s: counts of %q %v (%v), Bleve's term readers %v", when, w, got, err, want)
			}
		}
		for _, w := range []string{"nosuchword", "zq1x", "w4000x"} {
			if !absent(w) {
				t.Fatalf("%s: %q is in no doc but not reported absent", when, w)
			}
		}
	}
	check("after load")
	// New words in a new segment, then merges.
	if err := ix.Put([]Doc{{ID: "urn:air:p.test:ns:late", Name: "late", DisplayName: "Latecomer", Description: "zebra quagga"}}); err != nil {
		t.Fatal(err)
	}
	check("after a write")
	if r, gen, err := ix.snapshot(); err == nil {
		dicts, err := ix.postings.dictionaries(snapshotKey(r, gen), r.(*scorch.IndexSnapshot))
		if err != nil {
			t.Fatal(err)
		}
		if absentIn(dicts, "zebra", 0, len(textFields)) || absentIn(dicts, "quagga", 0, len(textFields)) {
			t.Fatal("a word of the newest segment is reported absent")
		}
		r.Close()
	}
	if err := ix.Settle(context.Background(), 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	check("after merges")
}

// TestRankTextMatchesFormula compares rankText in the form in use with
// BM25F computed here from Bleve's postings, doc by doc, as the formula in
// rank.go reads: the same docs in the same order, the same scores up to
// the rounding of another summation order, for queries of every length
// over an index of several segments with deleted docs, where the
// relevance cutoff and the name softening both apply.
func TestRankTextMatchesFormula(t *testing.T) {
	ix, rng, vocab, zipf := zipfIndex(t, false, 5, 13)
	ctx := context.Background()
	for q := range 200 {
		n := 1 + rng.IntN(6)
		if q%5 == 0 {
			n = 8 + rng.IntN(20)
		}
		var words []string
		for range n {
			words = append(words, vocab[zipf.Uint64()])
		}
		req := SearchRequest{Text: strings.Join(words, " "), Size: []int{1, 10, 25}[rng.IntN(3)], Viewers: []string{"a.test", "b.test"}}
		want, wantTotal := formulaRanking(t, ix, req.Text, req.Size, true)
		ix.split = 1 + 2*(q%2) // one range, or split in up to 3
		for _, count := range []bool{false, true} {
			req.Count = count
			got, err := ix.search(ctx, req, 0, req.Size)
			if err != nil {
				t.Fatal(err)
			}
			if count && got.Total != wantTotal {
				t.Fatalf("%q: total %d, formula %d", req.Text, got.Total, wantTotal)
			}
			label := fmt.Sprintf("%q count %v", req.Text, count)
			sameRanking(t, label, got.Hits, want, 1e-12, false)
			for i := range want {
				// The same docs in the same order, but for near-ties.
				if got.Hits[i].ID != want[i].ID && math.Abs(got.Hits[i].Raw-want[i].Raw) > 1e-12*want[i].Raw {
					t.Fatalf("%s: hit %d is %s, formula %s", label, i, got.Hits[i].ID, want[i].ID)
				}
			}
		}
		// With a floor (how a request's parts are ranked), the page is
		// the page's hits that score the floor or more (those within
		// rounding of it either way).
		// rankText alone, without the word pairs' re-scoring.
		want, _ = formulaRanking(t, ix, req.Text, req.Size, false)
		if len(want) > 1 {
			floor := want[len(want)/2].Raw
			got := floorRanking(t, ix, req.Text, req.Size, floor)
			surely, maybe := 0, 0
			for _, h := range want {
				if h.Raw > floor*(1+1e-12) {
					surely++
				}
				if h.Raw >= floor*(1-1e-12) {
					maybe++
				}
			}
			if len(got) < surely || len(got) > maybe {
				t.Fatalf("%q floor %v: %d hits, want %d to %d", req.Text, floor, len(got), surely, maybe)
			}
			sameRanking(t, fmt.Sprintf("%q floor", req.Text), got, want[:len(got)], 1e-12, false)
		}
	}
}

// floorRanking is rankText's n best for text scoring floor or more.
func floorRanking(t *testing.T, ix *Index, text string, n int, floor float64) []Hit {
	t.Helper()
	r, gen, err := ix.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := ix.matchQuery(context.Background(), r, gen, text, nil, []string{"a.test", "b.test"})
	if err != nil {
		t.Fatal(err)
	}
	hits, _, err := ix.rankText(context.Background(), r, m, n, false, cut{floor: floor})
	if err == nil {
		err = withIDs(r, hits)
	}
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// formulaRanking is the top size docs for text by the BM25F of rank.go's
// doc comment, computed doc by doc from Bleve's postings, and how many
// docs match; with pairs, the first pairDepth re-scored by the word pairs
// they hold, as pairs.go's doc comment has it, then by their categories
// (tags.go), then by the words they hold as written (exact.go).
func formulaRanking(t *testing.T, ix *Index, text string, size int, pairs bool) ([]Hit, uint64) {
	t.Helper()
	ctx := context.Background()
	r, gen, err := ix.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := ix.textQuery(ctx, r, gen, text)
	if err != nil {
		t.Fatal(err)
	}
	var norm float64
	for _, qt := range p.terms {
		norm += math.Pow(idf(p.docs, qt.maxDF), 2*idfPower)
	}
	// Per doc and term, the weighted field-normalised frequencies.
	x := map[string][]float64{}
	for ti, qt := range p.terms {
		for fi, f := range textFields {
			avg := f.pivot
			eachPosting(t, r, qt.term, f.name, func(id string, d *bleveindex.TermFieldDoc) {
				if x[id] == nil {
					x[id] = make([]float64, len(p.terms))
				}
				length := 1 / (d.Norm * d.Norm)
				x[id][ti] += fieldWeight(fi, p.softenedTerms()) * math.Sqrt(float64(d.Freq)) / (1 - 0.75 + 0.75*length/avg)
			})
		}
	}
	group := func(xs []float64, idx []int) (float64, bool) {
		sum, k := 0.0, 0
		for _, ti := range idx {
			if xs[ti] > 0 {
				w := math.Pow(idf(p.docs, p.terms[ti].maxDF), idfPower) / math.Sqrt(norm)
				sum += w * xs[ti] * 2.2 / (1.2 + xs[ti])
				k++
			}
		}
		if k == 0 {
			return 0, false
		}
		return sum * math.Sqrt(float64(k)/float64(len(idx))), true
	}
	var hits []Hit
	for id, xs := range x {
		must, ok := group(xs, p.must)
		if !ok {
			continue
		}
		should, _ := group(xs, p.should)
		hits = append(hits, Hit{ID: id, Raw: must + should})
	}
	// Ties fall in index order, as the ranker's do: where the re-scored
	// first hits end within a tie decides which of them are re-scored.
	num := map[string]uint64{}
	for _, h := range hits {
		id, err := r.InternalID(h.ID)
		if err != nil {
			t.Fatal(err)
		}
		num[h.ID] = id.Value()
	}
	order := func(a, b Hit) int { return cmp.Or(cmp.Compare(b.Raw, a.Raw), cmp.Compare(num[a.ID], num[b.ID])) }
	slices.SortFunc(hits, order)
	if pairs {
		freq := map[string]map[string]uint64{} // pair → doc → its frequency in fieldPairs
		for _, pair := range p.pairs {
			freq[pair] = map[string]uint64{}
			eachPosting(t, r, pair, fieldPairs, func(id string, d *bleveindex.TermFieldDoc) { freq[pair][id] = d.Freq })
		}
		top := hits[:min(pairDepth, len(hits))]
		for i := range top {
			bonus := 0.0
			for _, pair := range p.pairs {
				if _, _, ok := p.indexed(pair); !ok {
					continue // a pair of common words, or of a word no entry has
				}
				switch f := freq[pair][top[i].ID]; {
				case f >= pairInName:
					bonus += pairNameBonus
				case f > 0:
					bonus += pairTextBonus
				}
			}
			top[i].Raw *= 1 + min(bonus, pairMaxBonus)
		}
		slices.SortFunc(top, order)
		// Then by their categories, as tags.go's doc comment has it: each
		// tag one document of the entries carrying it.
		tagsOf := map[string][]string{} // doc → its tags
		members := map[string]float64{} // tag → how many docs carry it
		dict, err := r.FieldDict(fieldTags)
		if err != nil {
			t.Fatal(err)
		}
		for {
			e, err := dict.Next()
			if err != nil {
				t.Fatal(err)
			}
			if e == nil {
				break
			}
			eachPosting(t, r, e.Term, fieldTags, func(id string, _ *bleveindex.TermFieldDoc) {
				tagsOf[id] = append(tagsOf[id], e.Term)
				members[e.Term]++
			})
		}
		dict.Close()
		assigned := 0.0
		for _, n := range members {
			assigned += n
		}
		avgMembers := assigned / float64(len(members))
		scores := map[string]float64{}
		for _, qt := range p.terms {
			holders := map[string]bool{}
			for _, f := range textFields {
				eachPosting(t, r, qt.term, f.name, func(id string, _ *bleveindex.TermFieldDoc) { holders[id] = true })
			}
			count := map[string]float64{} // tag → its docs holding the term
			for id := range holders {
				for _, tag := range tagsOf[id] {
					count[tag]++
				}
			}
			df, nt := float64(len(count)), float64(len(members))
			w := math.Log(1 + (nt-df+0.5)/(df+0.5))
			for tag, c := range count {
				scores[tag] += w * c * 2.2 / (c + 1.2*(0.25+0.75*members[tag]/avgMembers))
			}
		}
		bestTag := 0.0
		for _, v := range scores {
			bestTag = max(bestTag, v)
		}
		if uint64(len(tagsOf)) != p.docs {
			bestTag = 0 // a doc without a tag: no category weighs in
		}
		top = hits[:min(tagDepth, len(hits))]
		for i := range top {
			share := 0.0
			for _, tag := range tagsOf[top[i].ID] {
				if bestTag > 0 {
					share = max(share, scores[tag]/bestTag)
				}
			}
			top[i].Raw *= 1 + tagWeight*share
		}
		slices.SortFunc(top, order)
		// Then by the request's words they hold as written (exact.go).
		top = hits[:min(exactDepth, len(hits))]
		held := make([]float64, len(top))
		total := 0.0
		var words []string // as written, whose stem is a rare term of the request
		eachWord(text, func(_ int, w string) bool {
			stem := string(porterstemmer.StemWithoutLowerCasing([]rune(w)))
			ti := slices.IndexFunc(p.terms, func(t queryTerm) bool { return t.term == stem })
			if ti >= 0 && !slices.Contains(p.should, ti) && !slices.Contains(words, w) {
				words = append(words, w)
			}
			return len(words) < maxExactWords
		})
		for _, w := range words {
			holders := map[string]float64{} // doc → its length in words as written
			eachPosting(t, r, w, fieldExact, func(id string, d *bleveindex.TermFieldDoc) { holders[id] = 1 / (d.Norm * d.Norm) })
			if len(holders) == 0 {
				continue
			}
			weight := idf(p.docs, uint64(len(holders)))
			total += weight
			for i := range top {
				if length, ok := holders[top[i].ID]; ok {
					x := 1 / (1 - 0.75 + 0.75*length/exactPivot)
					held[i] += weight * x * 2.2 / (1.2 + x)
				}
			}
		}
		for i := range top {
			if total > 0 {
				top[i].Raw *= 1 + exactWeight*held[i]/total
			}
		}
		slices.SortFunc(top, order)
	}
	return hits[:min(size, len(hits))], uint64(len(hits))
}

// eachPosting calls f with each doc (its external ID) that holds term in
// field, and its posting (frequency and norm).
func eachPosting(t *testing.T, r bleveindex.IndexReader, term, field string, f func(id string, d *bleveindex.TermFieldDoc)) {
	t.Helper()
	tfr, err := r.TermFieldReader(context.Background(), []byte(term), field, true, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tfr.Close()
	for {
		d, err := tfr.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		if d == nil {
			return
		}
		id, err := r.ExternalID(d.ID)
		if err != nil {
			t.Fatal(err)
		}
		f(id, d)
	}
}

// TestRangesFor checks how a ranking's doc numbers are cut: whole blocks,
// in order, covering every doc once, none of fewer than minRangeBlocks
// blocks.
func TestRangesFor(t *testing.T) {
	for _, tc := range []struct {
		docs, block, k int
		want           []docRange
	}{
		{100_000, 8192, 1, []docRange{{0, 100_000}}},
		{100_000, 8192, 2, []docRange{{0, 49152}, {49152, 100_000}}},
		{100_000, 8192, 3, []docRange{{0, 32768}, {32768, 65536}, {65536, 100_000}}},
		{100_000, 8192, 64, []docRange{{0, 8192 * 2}, {8192 * 2, 8192 * 4}, {8192 * 4, 8192 * 6}, {8192 * 6, 8192 * 8}, {8192 * 8, 8192 * 10}, {8192 * 10, 100_000}}}, // 13 blocks
		{3 * 8192, 8192, 2, []docRange{{0, 3 * 8192}}}, // a second range would have 1 block
		{4*8192 + 1, 8192, 2, []docRange{{0, 16384}, {16384, 4*8192 + 1}}},
		{10, 8192, 2, []docRange{{0, 10}}},
		{0, 8192, 2, []docRange{{0, 0}}},
	} {
		if got := rangesFor(tc.docs, tc.block, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("rangesFor(%d, %d, %d) = %v, want %v", tc.docs, tc.block, tc.k, got, tc.want)
		}
	}
}

// TestScoreDocsAgreesWithRun: a doc's score looked up term by term
// (scoreDocs, what clause parts score their candidates with) is the walk's
// score for it, to the bit, in both forms; and it holds a must term
// exactly where the walk, counting every match, scores it.
func TestScoreDocsAgreesWithRun(t *testing.T) {
	for _, bleve := range []bool{false, true} {
		t.Run(map[bool]string{false: "BM25F", true: "Bleve"}[bleve], func(t *testing.T) {
			ix, rng, vocab, zipf := zipfIndex(t, bleve, 5, 9)
			ctx := context.Background()
			compared := 0
			for range 60 {
				var words []string
				for range 1 + rng.IntN(8) {
					words = append(words, vocab[zipf.Uint64()])
				}
				r, gen, err := ix.snapshot()
				if err != nil {
					t.Fatal(err)
				}
				m, err := ix.matchQuery(ctx, r, gen, strings.Join(words, " "), nil, nil)
				if err != nil || m.text == nil {
					_ = r.Close()
					if err != nil {
						t.Fatal(err)
					}
					continue
				}
				hits, _, err := ix.rankText(ctx, r, m, maxSearchWindow, true, noCut)
				if err != nil {
					t.Fatal(err)
				}
				want := map[uint64]float64{}
				for _, h := range hits {
					want[h.doc] = h.Raw
				}
				// About every other doc number the search may show (private
				// docs are not), the matches among them or not.
				g, err := openGates(ctx, r, ix.bleve.Mapping(), m)
				if err != nil {
					t.Fatal(err)
				}
				var docs []uint32
				for d := uint32(0); d < 3000; d += 1 + uint32(rng.IntN(3)) {
					if in, err := g.admit(uint64(d)); err != nil {
						t.Fatal(err)
					} else if in {
						docs = append(docs, d)
					}
				}
				g.close()
				rk := ranker{}
				if err := rk.open(ctx, ix, r, m.text, false); err != nil {
					t.Fatal(err)
				}
				rk.coordination()
				scores, ok := rk.scoreDocs(docs)
				_ = r.Close()
				for i, d := range docs {
					w, matched := want[uint64(d)]
					if ok[i] != matched || matched && scores[i] != w {
						t.Fatalf("%q doc %d: scoreDocs %v %v, the walk %v %v", words, d, scores[i], ok[i], w, matched)
					}
					if matched {
						compared++
					}
				}
			}
			if compared < 1000 {
				t.Fatalf("only %d scores compared", compared)
			}
		})
	}
}
