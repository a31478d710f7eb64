// Package bench owns the registry's frozen retrieval benchmark: the task
// set (representative queries of publishers' manifests, each with the
// entry it should find, the manifest it was read from and the sha256 of
// that body), the queries held out of the index so that no entry is found
// by its own frozen query, and the measures of a run (recall@1/5/10, MRR,
// nDCG@10, latency percentiles). It knows nothing of HTTP: a run is given
// search functions, one per registry measured.
//
// The task set is tasks.json, embedded. It changes only on purpose:
// regenerate it with `go generate ./registry/bench` (see freeze/) after a
// change to the default corpus, and raise its version.
package bench

//go:generate go run ./freeze -corpus ../../testdata/corpus -version 1 -o tasks.json

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

//go:embed tasks.json
var frozenJSON []byte

// TaskSet is a frozen benchmark task set.
type TaskSet struct {
	// Version names the set; it changes only when the set is regenerated on
	// purpose.
	Version string `json:"version"`
	// GeneratedBy is the command that wrote the set.
	GeneratedBy string `json:"generatedBy"`
	// Corpus says which manifests the queries were read from.
	Corpus string `json:"corpus"`
	// HeldOut says how the queries are kept out of ranking.
	HeldOut string `json:"heldOut"`
	Tasks   []Task `json:"tasks"`
}

// Task is one benchmark query and the entry that answers it.
type Task struct {
	ID       string `json:"id"`
	Query    string `json:"query"`
	Expected string `json:"expected"` // identifier of the entry that answers it
	Manifest string `json:"manifest"` // the manifest it was read from (the ingest source key)
	SHA256   string `json:"sha256"`   // of that manifest body, hex
}

var (
	frozenOnce sync.Once
	frozen     TaskSet
	heldOut    map[string]map[string]bool // identifier -> normalised queries
	frozenSum  string
)

func loadFrozen() {
	if err := json.Unmarshal(frozenJSON, &frozen); err != nil {
		// tasks.json is built into the binary and checked by the tests.
		panic(fmt.Sprintf("bench: tasks.json: %v", err))
	}
	heldOut = map[string]map[string]bool{}
	for _, t := range frozen.Tasks {
		if heldOut[t.Expected] == nil {
			heldOut[t.Expected] = map[string]bool{}
		}
		heldOut[t.Expected][normalise(t.Query)] = true
	}
	sum := sha256.Sum256(frozenJSON)
	frozenSum = hex.EncodeToString(sum[:])
}

// Frozen returns the embedded task set. Callers must not modify it.
func Frozen() TaskSet {
	frozenOnce.Do(loadFrozen)
	return frozen
}

// FrozenJSON returns the embedded task set as it is in the repository, and
// its sha256 (hex): the body of GET /bench/tasks.json and its ETag.
func FrozenJSON() (body []byte, sha string) {
	frozenOnce.Do(loadFrozen)
	return frozenJSON, frozenSum
}

// HoldOut returns queries without those frozen as benchmark queries for the
// entry id (compared case- and space-insensitively). The index builds an
// entry's representative queries through it, so an entry is never found by
// its own frozen query through its own copy of that text: the benchmark
// measures retrieval from what else the entry says, as a caller's words
// would be matched.
func HoldOut(id string, queries []string) []string {
	frozenOnce.Do(loadFrozen)
	held := heldOut[id]
	if len(held) == 0 {
		return queries
	}
	out := make([]string, 0, len(queries))
	for _, q := range queries {
		if !held[normalise(q)] {
			out = append(out, q)
		}
	}
	return out
}

func normalise(q string) string {
	return strings.ToLower(strings.Join(strings.Fields(q), " "))
}

// Manifest is what Freeze reads of one publisher manifest.
type Manifest struct {
	Source  string // the ingest source key of the manifest
	SHA256  string // of its body, hex
	Entries []ManifestEntry
}

// ManifestEntry is one public entry of a manifest.
type ManifestEntry struct {
	ID      string
	Queries []string // its representativeQueries, in the publisher's order
}

// MinQueries is how many representative queries an entry needs to give a
// task: one is held out, the others stay indexed, so the entry still says
// in its own words what it is for.
const MinQueries = 2

// Freeze builds a task set from manifests: per entry with at least
// MinQueries representative queries, its last one (publishers list their
// main phrasing first; the last is the least likely to repeat the display
// name). Manifests and entries are taken in source and identifier order, so
// the same manifests always give the same set.
func Freeze(version string, manifests []Manifest) TaskSet {
	ms := append([]Manifest(nil), manifests...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Source < ms[j].Source })
	set := TaskSet{
		Version: version,
		HeldOut: "each query is left out of its expected entry's indexed representativeQueries (bench.HoldOut), so no entry is found by its own frozen query through its own copy of it; the entry stays findable through everything else it says",
	}
	seen := map[string]bool{}
	for _, m := range ms {
		es := append([]ManifestEntry(nil), m.Entries...)
		sort.Slice(es, func(i, j int) bool { return es[i].ID < es[j].ID })
		for _, e := range es {
			var qs []string
			for _, q := range e.Queries {
				if q = strings.Join(strings.Fields(q), " "); q != "" {
					qs = append(qs, q)
				}
			}
			if len(qs) < MinQueries || seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			set.Tasks = append(set.Tasks, Task{
				ID:       fmt.Sprintf("t%03d", len(set.Tasks)+1),
				Query:    qs[len(qs)-1],
				Expected: e.ID,
				Manifest: m.Source,
				SHA256:   m.SHA256,
			})
		}
	}
	return set
}
