// Package shareddata loads, for tests and benchmarks, the public data sets
// kept outside the project in ../shared/data (or $ARDX_SHARED_DATA): the
// toolsdk MCP package list and the MetaTool labelled queries. Every loader
// skips the calling test with a message where the data is absent, as on a
// user's machine; the data is never copied into the project.
package shareddata

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Dir returns the shared data folder sub (e.g. "toolsdk"), or skips tb.
func Dir(tb testing.TB, sub string) string {
	tb.Helper()
	dir := os.Getenv("ARDX_SHARED_DATA")
	if dir == "" {
		// This file is <module>/internal/shareddata/shareddata.go; the data
		// sits beside the module: <module>/../shared/data.
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "data")
	}
	p := filepath.Join(dir, sub)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("shared data %s not available (set ARDX_SHARED_DATA): %v", p, err)
	}
	return p
}

// Tool is one tool of a toolsdk package or of MetaTool.
type Tool struct {
	Key         string // the package's key for it (toolsdk) or its name (MetaTool)
	Name        string
	Description string
}

// Package is one toolsdk MCP package.
type Package struct {
	Name     string // npm name, e.g. "@scope/pkg"
	Category string
	Tools    []Tool // ordered by Key
}

// Toolsdk returns the toolsdk package list ordered by name, or skips tb.
func Toolsdk(tb testing.TB) []Package {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(Dir(tb, "toolsdk"), "packages-list.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var pkgs map[string]struct {
		Category string `json:"category"`
		Tools    map[string]struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &pkgs); err != nil {
		tb.Fatal(err)
	}
	out := make([]Package, 0, len(pkgs))
	for name, p := range pkgs {
		pkg := Package{Name: name, Category: p.Category}
		for key, t := range p.Tools {
			pkg.Tools = append(pkg.Tools, Tool{Key: key, Name: t.Name, Description: t.Description})
		}
		slices.SortFunc(pkg.Tools, func(a, b Tool) int { return strings.Compare(a.Key, b.Key) })
		out = append(out, pkg)
	}
	slices.SortFunc(out, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Query is a MetaTool query labelled with the tool that answers it.
type Query struct {
	Text string
	Tool string
}

// MetaTool returns MetaTool's tools ordered by name and its labelled
// queries in file order, or skips tb.
func MetaTool(tb testing.TB) ([]Tool, []Query) {
	tb.Helper()
	dir := Dir(tb, "metatool")
	raw, err := os.ReadFile(filepath.Join(dir, "plugin_des.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var descs map[string]string
	if err := json.Unmarshal(raw, &descs); err != nil {
		tb.Fatal(err)
	}
	tools := make([]Tool, 0, len(descs))
	for name, d := range descs {
		tools = append(tools, Tool{Key: name, Name: name, Description: d})
	}
	slices.SortFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	f, err := os.Open(filepath.Join(dir, "all_clean_data.csv"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		tb.Fatal(err)
	}
	qs := make([]Query, 0, len(rows))
	for _, r := range rows[1:] { // header
		qs = append(qs, Query{Text: r[0], Tool: r[1]})
	}
	return tools, qs
}
