package index

import (
	"cmp"
	"slices"

	"github.com/blevesearch/bleve/v2/index/scorch"
	bleveindex "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	zapv17 "github.com/blevesearch/zapx/v17"
)

// Entries of equal score fall in index order (worse, byRank), and scorch
// numbers a batch's docs in the order its analysis goroutines finish
// them, so two indexes built from the same entries ordered ties
// differently (RestBench: 50 of 157 requests differed in their first ten
// between two builds). idOrdered is Bleve's default segment plugin (zap
// v17, the same files) with a new segment's docs numbered in identifier
// order, so ties within one batch (up to putBatchSize entries, a small
// registry's whole catalogue) fall in identifier order on every build.
// Across batches they fall in the order scorch keeps its segments, which
// its merges reorder as their timing has it: like the search engines it
// resembles, the index promises no order between instances for ties
// written at different times.
type idOrdered struct{ *zapv17.ZapPlugin }

func init() {
	// Registered under zap v17's own type and version: the default for
	// new indexes, and the plugin scorch opens existing zap v17 files with.
	scorch.RegisterSegmentPlugin(idOrdered{&zapv17.ZapPlugin{}}, true)
}

func (p idOrdered) New(results []bleveindex.Document) (segment.Segment, uint64, error) {
	return p.ZapPlugin.New(byID(results))
}

func (p idOrdered) NewUsing(results []bleveindex.Document, config map[string]any) (segment.Segment, uint64, error) {
	return p.ZapPlugin.NewUsing(byID(results), config)
}

// byID is docs in identifier order (a copy: the caller's slice is left as
// it was).
func byID(docs []bleveindex.Document) []bleveindex.Document {
	out := slices.Clone(docs)
	slices.SortFunc(out, func(a, b bleveindex.Document) int { return cmp.Compare(a.ID(), b.ID()) })
	return out
}
