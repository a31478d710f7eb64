// Command freeze writes the benchmark task set (registry/bench/tasks.json)
// from a directory of publisher manifests, keyed the way the registry
// ingests the embedded default corpus ("fs:<path>"). Run it through
// `go generate ./registry/bench`, only on purpose: a new set is a new
// benchmark, so raise -version with it.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/ardx-dev/ardx/registry/bench"
	"github.com/ardx-dev/ardx/registry/ingest"
)

func main() {
	corpus := flag.String("corpus", "", "directory of manifests (the default corpus: testdata/corpus)")
	version := flag.String("version", "", "version of the new set")
	out := flag.String("o", "", "output file (default stdout)")
	flag.Parse()
	if *corpus == "" || *version == "" {
		fmt.Fprintln(os.Stderr, "usage: freeze -corpus DIR -version N [-o FILE]")
		os.Exit(2)
	}
	set, err := freeze(os.DirFS(*corpus), *version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "freeze:", err)
		os.Exit(1)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(set); err != nil {
		fmt.Fprintln(os.Stderr, "freeze:", err)
		os.Exit(1)
	}
	b := buf.Bytes()
	if *out == "" {
		_, err = os.Stdout.Write(b)
	} else {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "freeze:", err)
		os.Exit(1)
	}
}

func freeze(fsys fs.FS, version string) (bench.TaskSet, error) {
	var ms []bench.Manifest
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.EqualFold(path.Ext(p), ".json") {
			return err
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		parsed, problems := ingest.ParseManifest(body)
		for _, pr := range problems {
			if pr.Severity == ingest.SeverityError {
				return fmt.Errorf("%s: %s", p, pr.String())
			}
		}
		sum := sha256.Sum256(body)
		m := bench.Manifest{Source: "fs:" + p, SHA256: hex.EncodeToString(sum[:])}
		for _, e := range parsed.Entries {
			var f struct {
				RepresentativeQueries []string `json:"representativeQueries"`
			}
			if err := json.Unmarshal(e.Body, &f); err != nil {
				return fmt.Errorf("%s: %s: %w", p, e.ID, err)
			}
			m.Entries = append(m.Entries, bench.ManifestEntry{ID: e.ID, Queries: f.RepresentativeQueries})
		}
		ms = append(ms, m)
		return nil
	})
	if err != nil {
		return bench.TaskSet{}, err
	}
	set := bench.Freeze(version, ms)
	set.GeneratedBy = "go generate ./registry/bench (go run ./freeze -corpus ../../testdata/corpus -version " + version + " -o tasks.json)"
	set.Corpus = "the embedded default corpus (testdata/corpus), keyed as the registry ingests it: fs:<path>"
	return set, nil
}
