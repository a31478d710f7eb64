// Package shareddata loads, for tests and benchmarks, the public data sets
// kept outside the project in ../shared/data (or $ARDX_SHARED_DATA): the
// toolsdk MCP package list and the MetaTool labelled queries. Every loader
// skips the calling test with a message where the data is absent, as on a
// user's machine; the data is never copied into the project.
package shareddata

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Locate returns the shared data folder: $ARDX_SHARED_DATA, else
// ../shared/data beside the module. It does not check that it exists.
func Locate() string {
	if dir := os.Getenv("ARDX_SHARED_DATA"); dir != "" {
		return dir
	}
	// This file is <module>/internal/shareddata/shareddata.go; the data
	// sits beside the module: <module>/../shared/data.
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "data")
}

// Dir returns the shared data folder sub (e.g. "toolsdk"), or skips tb.
func Dir(tb testing.TB, sub string) string {
	tb.Helper()
	p := filepath.Join(Locate(), sub)
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
	pkgs, err := ReadToolsdk(filepath.Join(Dir(tb, "toolsdk"), "packages-list.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return pkgs
}

// ReadToolsdk reads a toolsdk package list file, ordered by name.
func ReadToolsdk(path string) ([]Package, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pkgs map[string]struct {
		Category string `json:"category"`
		Tools    map[string]struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &pkgs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
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
	return out, nil
}

// Corpus is the synthetic registry the search benchmarks measure (the
// in-process ones and the load generator's real binary): one MCP server
// entry per toolsdk package, and for corpora larger than the package list,
// perturbed copies: copy k of a package gets its own publisher and one
// extra word, so copies are distinct entries with similar text.
type Corpus struct{ bases []serverBase }

type serverBase struct {
	name, publisher, display, desc, category string
	tools                                    []string
}

// NewCorpus builds the corpus of pkgs. Packages whose name makes no
// identifier, or the same identifier as an earlier one, are left out.
func NewCorpus(pkgs []Package) *Corpus {
	c := &Corpus{}
	ids := map[string]bool{}
	for _, p := range pkgs {
		publisher, short := "npm.test", p.Name
		if strings.HasPrefix(p.Name, "@") {
			if i := strings.Index(p.Name, "/"); i > 0 {
				publisher, short = URNPart(p.Name[1:i])+".test", p.Name[i+1:]
			}
		}
		bs := serverBase{name: URNPart(short), publisher: strings.Trim(publisher, "."), category: p.Category,
			display: strings.ReplaceAll(short, "-", " ")}
		descs := []string{"MCP server " + bs.display + " for " + strings.ReplaceAll(p.Category, "-", " ") + "."}
		for _, t := range p.Tools {
			bs.tools = append(bs.tools, t.Name)
			descs = append(descs, t.Description)
		}
		bs.desc = strings.Join(descs, " ")
		if len(bs.desc) > 2000 {
			bs.desc = bs.desc[:2000]
		}
		if id := bs.publisher + ":" + bs.name; bs.name != "" && !ids[id] {
			ids[id] = true
			c.bases = append(c.bases, bs)
		}
	}
	return c
}

// Entry returns entry i of the corpus (any i ≥ 0) as an ARD entry object.
func (c *Corpus) Entry(i int) (id string, entry map[string]any) {
	extra := []string{"fast", "secure", "open source", "enterprise", "lightweight", "cloud", "local", "realtime"}
	bs := c.bases[i%len(c.bases)]
	k := i / len(c.bases)
	publisher, suffix := bs.publisher, ""
	if k > 0 {
		publisher = fmt.Sprintf("m%d.%s", k, bs.publisher)
		suffix = fmt.Sprintf(" (%s)", extra[k%len(extra)])
	}
	id = "urn:air:" + publisher + ":" + bs.name
	return id, map[string]any{
		"identifier":            id,
		"displayName":           bs.display + suffix,
		"type":                  "application/mcp-server-card+json",
		"url":                   "https://" + publisher + "/mcp/" + bs.name + ".json",
		"description":           bs.desc + suffix,
		"tags":                  []string{bs.category},
		"capabilities":          bs.tools,
		"representativeQueries": []string{bs.display, bs.category + " tools"},
	}
}

// URNPart keeps what an ARD URN segment allows.
func URNPart(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-.")
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
