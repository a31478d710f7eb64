// Package golden compares test output with golden files kept in a
// package's testdata, and rewrites them under `go test -update`.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Encode returns v as golden files hold JSON: indented two spaces, HTML
// characters left as they are, a final newline.
func Encode(tb testing.TB, v any) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// JSON checks Encode(v) against the golden file at path.
func JSON(tb testing.TB, path string, v any) {
	tb.Helper()
	Check(tb, path, Encode(tb, v))
}

// Check fails tb when got differs from the golden file at path; with
// -update it writes got there instead.
func Check(tb testing.TB, path string, got []byte) {
	tb.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs from the golden file (go test -update rewrites it); got:\n%s", path, got)
	}
}
