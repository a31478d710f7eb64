// Package index owns ardx's Bleve full-text index of registry entries: the
// mapping, batched puts and deletes, BM25 search with structured filters,
// facet counts, and deterministic listing. It stores no entry bodies (kv holds
// the truth); it can always be rebuilt from kv.
package index

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ardx-dev/ardx/internal/gencache"
	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search/query"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Doc is what the index holds of one entry.
type Doc struct {
	ID               string // the entry's identifier (URN); unique key
	Name             string // the URN's last segment (the entry's name)
	DisplayName      string
	Description      string
	Capabilities     []string
	Tags             []string
	Queries          []string // representativeQueries (indexed, never returned)
	Publisher        string   // derived from the URN
	Type             string   // normalised media type
	Version          string
	Metadata         map[string]string // metadata.<key>, scalar values as strings
	AttestationTypes []string          // trustManifest.attestations[].type
	IdentityType     string            // trustManifest.identityType
	Text             []string          // further searchable text (operation method/path, tool names...)
	Owner            string            // "" for public entries; the owning domain for private ones
	CreatedAt        time.Time
	UpdatedAt        time.Time

	// Payment terms (index/pay.go). No protocol means free.
	PayProtocols []string // x402, mpp, card: one per kind of option
	PayNetworks  []string // normalised networks of the options
	PayPrices    []string // dollars per call, exact decimals, of the options whose price is known
	PayVerified  bool     // our probe saw the stated terms in a 402 within the window
}

// Filter maps a filter key to accepted values: OR within a key, AND across
// keys; an array field matches if any element matches.
type Filter map[string][]string

// ErrUnknownFilterKey is wrapped by errors naming an unsupported filter key
// or facet field.
var ErrUnknownFilterKey = errors.New("index: unknown field")

// SearchRequest is a ranked full-text query.
type SearchRequest struct {
	Text   string
	Filter Filter
	From   int // offset into the ranking
	Size   int
	// Viewers are the owners whose private entries are included (the
	// caller's); nil sees public entries only.
	Viewers []string
	// Count asks for Total. Counting visits every match, where ranking
	// alone skips those that cannot reach the page.
	Count bool
}

// Hit is one ranked match.
type Hit struct {
	ID    string
	Score int     // 0-100, calibrated per index, monotone in Raw
	Raw   float64 // the engine's score
	doc   uint64  // the doc's number in the snapshot ranked: ties fall in its order
}

// SearchResult is one page of a ranking.
type SearchResult struct {
	Hits  []Hit
	More  bool   // a match ranks below this page
	Total uint64 // matches above the relevance cutoff; 0 unless asked for (Count) or a browse without text
}

// FacetRequest asks for the top values of one field.
type FacetRequest struct {
	Field    string
	Limit    int // default 20
	MinCount int
}

// Bucket is one facet value and how many matched entries have it.
type Bucket struct {
	Value string
	Count int
}

// Facet is the counted values of one field.
type Facet struct {
	Buckets []Bucket
	Other   int // matches with a value outside Buckets
}

// Order is one listing sort key.
type Order struct {
	Field string // displayName, updatedAt, createdAt, identifier
	Desc  bool
}

// ListRequest is a deterministic browse (GET /agents).
type ListRequest struct {
	DisplayName  []string // case-insensitive substrings, OR
	Types        []string // OR
	Publishers   []string // OR
	CreatedAfter time.Time
	UpdatedAfter time.Time
	OrderBy      []Order  // identifier is always appended as the final tie-break
	After        []string // the Next of the previous page
	Size         int
	Viewers      []string // owners whose private entries are included
}

// ListResult is one page of a listing.
type ListResult struct {
	IDs   []string
	Total uint64
	Next  []string // sort key of the last item; nil when this was the last page
}

// Index is an open Bleve index. It is safe for concurrent use.
type Index struct {
	bleve bleve.Index
	an    analyzers
	log   *slog.Logger

	// gen counts Put and Delete calls; calibration compares it to decide
	// whether its constant is stale.
	gen atomic.Uint64
	// writing counts Put and Delete calls under way; while one is, the
	// index is between generations and search results are not cached.
	writing atomic.Int32

	// writeMu serialises writers so the probe sample stored with each
	// batch stays consistent with the batches before it.
	writeMu sync.Mutex
	probes  *probeSample

	dfs      *gencache.Cache[queryTerm]
	results  *gencache.Cache[SearchResult]
	postings *postingCache
	chunks   chunkCache // analysed request chunks (chunks.go)
	// tagTable is the current snapshot's tags (tags.go), under tagMu.
	tagMu    sync.Mutex
	tagTable *tagTable

	closeOnce sync.Once

	// onDisk is set for an index in a directory: only those are compacted
	// (compact.go), by a goroutine Close stops with stopCompact.
	onDisk      bool
	stopCompact chan struct{}
	compactDone chan struct{}

	// anyPrivate is raised before the first private doc is put (or at
	// open, if the index holds one) and never lowered: while it is down,
	// searches skip the private docs' exclusion.
	anyPrivate atomic.Bool

	calMu sync.Mutex // held while recalibrating
	cal   atomic.Pointer[calibration]

	// bleveScoring makes the ranker score as Bleve's searchers do for the
	// plan's query (rank.go) instead of BM25F. Off in use; the tests that
	// compare the ranker with Bleve's searchers turn it on before the
	// first search.
	bleveScoring bool
	// blockDocs, when set, is the ranker's block of doc numbers, smaller
	// than the board holds (rank.go): tests set it so that an index of a
	// few thousand docs spans many blocks and the ranker prunes.
	blockDocs int
	// split, when set, is how many ranges every ranking is split into
	// (rank.go), whatever the cores: tests set it so that both ways are
	// checked on any machine.
	split int
}

// Options tune OpenWith.
type Options struct {
	// Logger receives the rare events worth a line (rebuild reasons,
	// recalibration). Nil discards them.
	Logger *slog.Logger
	// LockTimeout bounds the wait for the index's lock file held by another
	// process. Zero means 2 seconds; bleve's own default waits forever.
	LockTimeout time.Duration

	// compactQuiet, compactEvery and compactGap replace compactQuiet,
	// compactCheck and compactGap (compact.go) when set: tests shorten
	// them.
	compactQuiet, compactEvery, compactGap time.Duration
}

// ErrLocked is wrapped by Open errors when another process holds the index.
var ErrLocked = errors.New("index: locked by another process")

// ErrBadCursor is wrapped by List errors when After does not fit OrderBy.
var ErrBadCursor = errors.New("index: page cursor does not match the order")

// Internal (bleve SetInternal) keys.
var (
	internalVersion = []byte("ardx.mappingVersion")
	internalProbes  = []byte("ardx.calibrationProbes")
)

// metaFile is the file bleve writes into every index directory; Open only
// ever deletes a directory that has it.
const metaFile = "index_meta.json"

// Open opens the index in dir, creating it if missing. rebuild is true when
// the index was created anew or its mapping was older than this build's (the
// old one is discarded): the caller must re-put every doc from kv.
func Open(dir string) (ix *Index, rebuild bool, err error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options. A directory that is missing, unreadable
// (corrupt) or written by a different mapping version is recreated and
// reported with rebuild=true; a directory locked by another process is an
// error wrapping ErrLocked and is left alone.
func OpenWith(dir string, opts Options) (ix *Index, rebuild bool, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 2 * time.Second
	}
	im, err := newMapping()
	if err != nil {
		return nil, false, err
	}
	version, err := mappingVersion(im)
	if err != nil {
		return nil, false, err
	}
	cfg := map[string]any{"bolt_timeout": opts.LockTimeout.String()}

	b, err := bleve.OpenUsing(dir, cfg)
	var reason string
	switch {
	case err == nil:
		stored, gerr := b.GetInternal(internalVersion)
		if gerr == nil && string(stored) == version {
			ix, err := newIndex(b, log)
			if err != nil {
				_ = b.Close()
				return nil, false, err
			}
			ix.startCompacting(opts)
			return ix, false, nil
		}
		_ = b.Close()
		reason = fmt.Sprintf("mapping version %q, want %q", stored, version)
	case errors.Is(err, bleve.ErrorIndexPathDoesNotExist):
		reason = "missing"
	case isLockTimeout(err):
		return nil, false, fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
	case errors.Is(err, bleve.ErrorIndexMetaMissing):
		reason = "not an index"
	default:
		reason = "unreadable: " + err.Error()
	}
	if reason != "missing" {
		if err := discard(dir); err != nil {
			return nil, false, err
		}
	}
	log.Info("index: creating", "dir", dir, "reason", reason)
	b, err = bleve.NewUsing(dir, im, scorch.Name, scorch.Name, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("index: create %s: %w", dir, err)
	}
	if err := b.SetInternal(internalVersion, []byte(version)); err != nil {
		_ = b.Close()
		return nil, false, fmt.Errorf("index: store mapping version: %w", err)
	}
	ix, err = newIndex(b, log)
	if err != nil {
		_ = b.Close()
		return nil, false, err
	}
	ix.startCompacting(opts)
	return ix, true, nil
}

// startCompacting starts compactWhenQuiet for an index in a directory.
func (ix *Index) startCompacting(opts Options) {
	ix.onDisk = true
	quiet, every, gap := cmp.Or(opts.compactQuiet, compactQuiet), cmp.Or(opts.compactEvery, compactCheck), cmp.Or(opts.compactGap, compactGap)
	ix.stopCompact, ix.compactDone = make(chan struct{}), make(chan struct{})
	go ix.compactWhenQuiet(quiet, every, gap, ix.stopCompact, ix.compactDone)
}

func isLockTimeout(err error) bool {
	return errors.Is(err, bolterrors.ErrTimeout) || strings.Contains(err.Error(), bolterrors.ErrTimeout.Error())
}

// discard removes an index directory before it is recreated. It refuses a
// non-empty directory that bleve did not create, so a mistyped path never
// costs someone their files.
func discard(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index: read %s: %w", dir, err)
	}
	if len(entries) > 0 && !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == metaFile }) {
		return fmt.Errorf("index: %s is not empty and holds no bleve index; refusing to delete it", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("index: discard %s: %w", filepath.Clean(dir), err)
	}
	return nil
}

// OpenMemory opens an in-memory index, for tests. It is the production
// engine (scorch) without a directory, not bleve's separate mem-only engine.
func OpenMemory() (*Index, error) {
	im, err := newMapping()
	if err != nil {
		return nil, err
	}
	b, err := bleve.NewUsing("", im, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("index: create in memory: %w", err)
	}
	ix, err := newIndex(b, slog.New(slog.DiscardHandler))
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return ix, nil
}

func newIndex(b bleve.Index, log *slog.Logger) (*Index, error) {
	an, err := resolveAnalyzers(b.Mapping())
	if err != nil {
		return nil, err
	}
	ix := &Index{bleve: b, an: an, log: log, dfs: gencache.New[queryTerm](dfCacheSize), results: gencache.New[SearchResult](resultCacheSize),
		postings: &postingCache{limit: postingCacheBytes}}
	raw, err := b.GetInternal(internalProbes)
	if err != nil {
		return nil, fmt.Errorf("index: read calibration probes: %w", err)
	}
	ix.probes = decodeProbeSample(raw)
	private, err := countPrivate(b)
	if err != nil {
		return nil, err
	}
	ix.anyPrivate.Store(private > 0)
	return ix, nil
}

// countPrivate returns the number of private docs in b.
func countPrivate(b bleve.Index) (uint64, error) {
	adv, err := b.Advanced()
	if err != nil {
		return 0, fmt.Errorf("index: count private docs: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return 0, fmt.Errorf("index: count private docs: %w", err)
	}
	defer r.Close()
	tfr, err := r.TermFieldReader(context.Background(), []byte(privateMarker), fieldPrivate, false, false, false)
	if err != nil {
		return 0, fmt.Errorf("index: count private docs: %w", err)
	}
	defer tfr.Close()
	return tfr.Count(), nil
}

// putBatchSize bounds one bleve batch: large enough to amortise the
// persist wait of each batch and the segment merging each new segment
// brings, small enough to bound the memory it holds. Measured on 100k
// entries through ardx ingest: 1,000 took 20-21 s (peak RSS ~615 MB),
// 2,500 14.4-14.8 s (~680 MB), 5,000 15.5 s (~770 MB).
const putBatchSize = 2500

// Put indexes docs (replacing docs with the same ID) in batches.
func (ix *Index) Put(docs []Doc) error {
	return ix.PutReporting(docs, nil)
}

// PutReporting is Put that calls batchDone, when set, with the number of
// docs of each Bleve batch once it is committed: a long Put can show
// progress without being split into smaller, slower batches.
func (ix *Index) PutReporting(docs []Doc, batchDone func(n int)) error {
	for i := range docs {
		if strings.TrimSpace(docs[i].ID) == "" {
			return fmt.Errorf("index: put: doc %d has no ID", i)
		}
	}
	if slices.ContainsFunc(docs, func(d Doc) bool { return strings.TrimSpace(d.Owner) != "" }) {
		// Before the batch: a search that ran without the exclusion
		// checks the flag afterwards (see privateRace).
		ix.anyPrivate.Store(true)
	}
	return ix.write(len(docs), "put", func(b *bleve.Batch, i int) (bool, error) {
		if err := b.IndexAdvanced(ix.an.toDocument(&docs[i])); err != nil {
			return false, fmt.Errorf("index: put %s: %w", docs[i].ID, err)
		}
		return ix.probes.offer(docs[i].ID, probeText(&docs[i])), nil
	}, batchDone)
}

// write applies n changes in Bleve batches of putBatchSize, one writer at a
// time. add puts change i into the batch and reports whether it changed the
// probe sample, which is then stored with that batch. batchDone, when set,
// is told the size of each committed batch.
func (ix *Index) write(n int, op string, add func(b *bleve.Batch, i int) (probesChanged bool, err error), batchDone func(n int)) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	ix.writing.Add(1)
	defer ix.endWrite()
	for start := 0; start < n; start += putBatchSize {
		b := ix.bleve.NewBatch()
		changed := false
		for i := start; i < min(start+putBatchSize, n); i++ {
			c, err := add(b, i)
			if err != nil {
				return err
			}
			changed = changed || c
		}
		if changed {
			b.SetInternal(internalProbes, ix.probes.encode())
		}
		if err := ix.bleve.Batch(b); err != nil {
			return fmt.Errorf("index: %s batch: %w", op, err)
		}
		if batchDone != nil {
			batchDone(min(start+putBatchSize, n) - start)
		}
	}
	return nil
}

// endWrite ends a write (begun by raising writing) with a new generation.
// A generation thus never names two states of the index, and a search that
// overlapped a write is never cached.
func (ix *Index) endWrite() {
	ix.gen.Add(1)
	ix.writing.Add(-1)
}

// Delete removes docs by ID; unknown IDs are ignored.
func (ix *Index) Delete(ids []string) error {
	return ix.write(len(ids), "delete", func(b *bleve.Batch, i int) (bool, error) {
		b.Delete(ids[i])
		return ix.probes.remove(ids[i]), nil
	}, nil)
}

// Generation names the index's current state: it changes with every Put
// and Delete. quiet is false while one is under way, when the state is
// between generations and nothing computed from it should be kept.
// The score calibration belongs to the state: until it is settled for
// the current generation, the state is not quiet either.
func (ix *Index) Generation() (gen uint64, quiet bool) {
	gen = ix.gen.Load()
	c := ix.cal.Load()
	return gen, ix.writing.Load() == 0 && c != nil && c.gen == gen
}

// MappingVersion names the mapping and document schema this index was
// built with: two indexes of one version rank the same docs the same way.
func (ix *Index) MappingVersion() string {
	v, err := mappingVersion(ix.bleve.Mapping())
	if err != nil {
		return "unknown"
	}
	return v
}

// Count returns the number of indexed docs.
func (ix *Index) Count() (uint64, error) {
	n, err := ix.bleve.DocCount()
	if err != nil {
		return 0, fmt.Errorf("index: count: %w", err)
	}
	return n, nil
}

// CountPublic returns the number of public documents: the count of every
// document less the private ones, which carry a marker term and are few.
func (ix *Index) CountPublic(ctx context.Context) (uint64, error) {
	all, err := ix.Count()
	if err != nil {
		return 0, err
	}
	q := query.NewTermQuery(privateMarker)
	q.SetField(fieldPrivate)
	res, err := ix.bleve.SearchInContext(ctx, bleve.NewSearchRequestOptions(q, 0, 0, false))
	if err != nil {
		return 0, fmt.Errorf("index: count private: %w", err)
	}
	return all - min(res.Total, all), nil
}

// Matches reports whether d satisfies every key of f as a search filter
// does (OR within a key, AND across keys, values normalised per field). It
// checks results that did not come from this index, such as an upstream
// registry's, against the query they answer.
func (f Filter) Matches(d *Doc) bool {
	for k, vals := range f {
		var have []string
		switch k {
		case fieldType:
			have = []string{d.Type}
		case fieldTags:
			have = d.Tags
		case fieldCapabilities:
			have = d.Capabilities
		case fieldPublisher:
			have = []string{d.Publisher}
		case fieldVersion:
			have = []string{d.Version}
		case fieldAttestation:
			have = d.AttestationTypes
		case fieldIdentityType:
			have = []string{d.IdentityType}
		default:
			if match, ok := payMatches(k, vals, d); ok {
				if !match {
					return false
				}
				continue
			}
			mk, ok := strings.CutPrefix(k, metadataPrefix)
			if !ok {
				return false
			}
			if v, ok := d.Metadata[strings.TrimSpace(mk)]; ok {
				have = []string{v}
			}
		}
		if !anyValueMatches(k, vals, have) {
			return false
		}
	}
	return true
}

func anyValueMatches(field string, want, have []string) bool {
	constrained := false
	for _, w := range want {
		w = normaliseValue(field, w)
		if w == "" {
			continue
		}
		constrained = true
		for _, h := range have {
			if normaliseValue(field, h) == w {
				return true
			}
		}
	}
	return !constrained // a key whose values are all empty constrains nothing, as in filterQueries
}

// Close closes the index, releasing its lock and background goroutines.
// Closing it again does nothing (Bleve itself panics on a second close).
func (ix *Index) Close() error {
	var err error
	ix.closeOnce.Do(func() {
		if ix.stopCompact != nil {
			// A merge under way stops when the index closes, or now.
			close(ix.stopCompact)
			defer func() { <-ix.compactDone }()
		}
		if cerr := ix.bleve.Close(); cerr != nil {
			err = fmt.Errorf("index: close: %w", cerr)
		}
	})
	return err
}

// FilterKey reports whether key is a supported filter key (type, tags,
// capabilities, publisher, version, metadata.<key>,
// trustManifest.attestations.type, trustManifest.identityType).
func FilterKey(key string) bool {
	if k, ok := strings.CutPrefix(key, metadataPrefix); ok {
		return strings.TrimSpace(k) != ""
	}
	return slices.Contains(keywordFields, key) || slices.Contains(payKeywordFields, key) || isPriceKey(key)
}

// facetField reports whether key is a field Facets counts: a filter key
// other than the price comparisons.
func facetField(key string) bool { return FilterKey(key) && !isPriceKey(key) }

// FacetFields lists every supported facet field. metadata.<key> fields are
// accepted by Facets too but are not listed, since their keys are open.
func FacetFields() []string { return append(slices.Clone(keywordFields), payKeywordFields...) }

// checkContext returns ctx's error, if any, before work starts.
func checkContext(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// Settle waits until the index's background work (persisting and merging
// segments after a write) has stopped: no merge under way, no background
// thread active by Bleve's account, and nothing changed for quiet. A large
// ingest leaves seconds of merging behind it; benchmarks wait for it so
// they measure the steady state rather than the merger's CPU.
func (ix *Index) Settle(ctx context.Context, quiet time.Duration) error {
	state := func() (fingerprint [4]uint64, busy bool) {
		m, _ := ix.bleve.StatsMap()["index"].(map[string]any)
		get := func(k string) uint64 { v, _ := m[k].(uint64); return v }
		active, _ := m["index_bgthreads_active"].(bool)
		busy = active || get("TotFileMergeZapBeg") != get("TotFileMergeZapEnd") ||
			get("TotMemMergeZapBeg") != get("TotMemMergeZapEnd") ||
			get("TotFileMergePlanTasks") != get("TotFileMergePlanTasksDone")
		return [4]uint64{get("num_root_filesegments") + get("num_root_memorysegments"),
			get("TotFileMergeZapEnd"), get("TotMemMergeZapEnd"), get("TotPersistLoopEnd")}, busy
	}
	last, _ := state()
	since := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("index: settle: %w", ctx.Err())
		case <-tick.C:
		}
		s, busy := state()
		if s != last || busy {
			last, since = s, time.Now()
			continue
		}
		if time.Since(since) >= quiet {
			return nil
		}
	}
}
