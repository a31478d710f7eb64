// Package index owns ardx's Bleve full-text index of registry entries: the
// mapping, batched puts and deletes, BM25 search with structured filters,
// facet counts, and deterministic listing. It stores no entry bodies (kv holds
// the truth); it can always be rebuilt from kv.
package index

import (
	"context"
	"errors"
	"time"
)

// CONTRACT SKELETON — the index helper replaces these bodies with the real
// implementation. The exported names and signatures below are what the
// registry packages code against; keep them (add, don't rename).

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
	Viewer string // the caller's domain: private entries of this owner are included; "" sees public only
}

// Hit is one ranked match.
type Hit struct {
	ID    string
	Score int     // 0-100, calibrated per index, monotone in Raw
	Raw   float64 // the engine's score
}

// SearchResult is one page of a ranking.
type SearchResult struct {
	Hits  []Hit
	Total uint64 // matches above the relevance cutoff
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
	Viewer       string
}

// ListResult is one page of a listing.
type ListResult struct {
	IDs   []string
	Total uint64
	Next  []string // sort key of the last item; nil when this was the last page
}

// Index is an open Bleve index.
type Index struct{}

// Open opens the index in dir, creating it if missing. rebuild is true when
// the index was created anew or its mapping was older than this build's (the
// old one is discarded): the caller must re-put every doc from kv.
func Open(dir string) (ix *Index, rebuild bool, err error) { return nil, false, errNotYet }

// OpenMemory opens an in-memory index, for tests.
func OpenMemory() (*Index, error) { return nil, errNotYet }

// Put indexes docs (replacing docs with the same ID) in batches.
func (ix *Index) Put(docs []Doc) error { return errNotYet }

// Delete removes docs by ID; unknown IDs are ignored.
func (ix *Index) Delete(ids []string) error { return errNotYet }

// Search ranks the docs matching req.
func (ix *Index) Search(ctx context.Context, req SearchRequest) (SearchResult, error) {
	return SearchResult{}, errNotYet
}

// Facets counts field values over every doc matching text and filter, with
// the same matching and relevance cutoff as Search. Empty text matches all.
func (ix *Index) Facets(ctx context.Context, text string, filter Filter, viewer string, reqs []FacetRequest) (map[string]Facet, error) {
	return nil, errNotYet
}

// List browses docs in a deterministic order.
func (ix *Index) List(ctx context.Context, req ListRequest) (ListResult, error) {
	return ListResult{}, errNotYet
}

// Count returns the number of indexed docs.
func (ix *Index) Count() (uint64, error) { return 0, errNotYet }

// Close closes the index.
func (ix *Index) Close() error { return nil }

// FilterKeys reports whether key is a supported filter key (type, tags,
// capabilities, publisher, version, metadata.<key>,
// trustManifest.attestations.type, trustManifest.identityType).
func FilterKey(key string) bool { return false }

// FacetFields lists every supported facet field.
func FacetFields() []string { return nil }

var errNotYet = errors.New("index: not implemented yet")
