package ingest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ardx-dev/ardx/registry/ingest"
)

// TestIngestProgressWithinLargeFile: one large manifest reports its entries
// as they are indexed, in several steps that only go up and end at the
// total, and a second small source counts as a source of its own.
func TestIngestProgressWithinLargeFile(t *testing.T) {
	const n = 6000
	dir := t.TempDir()
	entries := make([]string, n)
	for i := range entries {
		entries[i] = entryJSON(fmt.Sprintf("urn:air:pub%d.big.test:tools:e%d", i%50, i))
	}
	big := filepath.Join(dir, "big.json")
	writeFile(t, big, manifest(entries...))
	small := filepath.Join(dir, "small.json")
	writeFile(t, small, manifest(entryJSON("urn:air:small.test:x"), entryJSON("urn:air:small.test:y")))

	for _, c := range []struct {
		name  string
		want  ingest.Progress
		steps int // distinct EntriesDone values at least
	}{
		{"first ingest", ingest.Progress{Sources: 2, SourcesDone: 2, Entries: n + 2, EntriesDone: n + 2}, 3},
		// Unchanged entries need no indexing: done as soon as stored.
		{"unchanged", ingest.Progress{Sources: 2, SourcesDone: 2, Entries: n + 2, EntriesDone: n + 2}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := newIngester(t, nil)
			if c.name == "unchanged" {
				if _, err := in.Ingest(context.Background(), big, small); err != nil {
					t.Fatal(err)
				}
			}
			var seen []ingest.Progress
			in.OnProgress = func(p ingest.Progress) { seen = append(seen, p) }
			rep, err := in.Ingest(context.Background(), big, small)
			if err != nil || rep.Stored() != n+2 {
				t.Fatalf("stored %d, err %v", rep.Stored(), err)
			}
			if len(seen) == 0 || seen[len(seen)-1] != c.want {
				t.Fatalf("last progress %+v, want %+v (all: %+v)", seen[len(seen)-1:], c.want, seen)
			}
			distinct := 0
			for i, p := range seen {
				if p.EntriesDone > p.Entries || p.SourcesDone > p.Sources || p.Sources != 2 {
					t.Fatalf("progress %d out of range: %+v", i, p)
				}
				if i == 0 || p.EntriesDone != seen[i-1].EntriesDone {
					distinct++
				}
				if i > 0 && (p.EntriesDone < seen[i-1].EntriesDone || p.Entries < seen[i-1].Entries || p.SourcesDone < seen[i-1].SourcesDone) {
					t.Fatalf("progress went back: %+v after %+v", p, seen[i-1])
				}
			}
			if distinct < c.steps {
				t.Fatalf("progress in %d steps, want at least %d: %+v", distinct, c.steps, seen)
			}
			if c.name == "first ingest" {
				// Within the large file: some progress where part of it is done.
				partial := false
				for _, p := range seen {
					partial = partial || (p.SourcesDone == 0 && p.EntriesDone > 0 && p.EntriesDone < n)
				}
				if !partial {
					t.Fatalf("no progress within the large file: %+v", seen)
				}
			}
		})
	}
}
