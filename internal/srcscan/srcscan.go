// Package srcscan reads the project's own Go source in tests, so a test can
// hold documentation to every code and problem type the code declares or
// uses (the /developers pages).
package srcscan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// files returns the non-test Go files under dir (recursively when deep).
func files(tb testing.TB, dir string, deep bool) []*ast.File {
	tb.Helper()
	var out []*ast.File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (!deep || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		out = append(out, f)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Consts returns the string constants declared in the package at dir whose
// names start with one of prefixes, by name.
func Consts(tb testing.TB, dir string, prefixes ...string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for _, f := range files(tb, dir, false) {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				lit, ok := valueAt(vs, i).(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				for _, p := range prefixes {
					if strings.HasPrefix(name.Name, p) {
						out[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
			return true
		})
	}
	return out
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}

// WebSlugs returns the values of the web.Slug* problem types the code under
// dir (recursively) refers to; webDir is the web package's directory.
func WebSlugs(tb testing.TB, dir, webDir string) map[string]string {
	tb.Helper()
	all := Consts(tb, webDir, "Slug")
	used := map[string]string{}
	for _, f := range files(tb, dir, true) {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "web" && strings.HasPrefix(sel.Sel.Name, "Slug") {
					used[sel.Sel.Name] = all[sel.Sel.Name]
				}
			}
			return true
		})
	}
	return used
}
