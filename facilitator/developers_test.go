package facilitator_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/internal/pagecheck"
)

// constValues returns the string constants declared in the Go files
// matching glob whose names start with one of prefixes.
func constValues(t *testing.T, glob string, prefixes ...string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("glob %s: %v", glob, err)
	}
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
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

// usedSlugs returns the values of the web.Slug* constants the non-test Go
// files matching glob refer to.
func usedSlugs(t *testing.T, glob string) map[string]string {
	t.Helper()
	all := constValues(t, "../web/problem.go", "Slug")
	files, _ := filepath.Glob(glob)
	used := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
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

// TestDevelopersPage: /developers documents every problem type the
// facilitator's code can answer with and every reason code it declares, as
// HTML with an anchor per entry (the problem types' fragments) and as
// Markdown.
func TestDevelopersPage(t *testing.T) {
	env := newTestEnv(t)
	html := do(t, "GET", env.URL+"/developers", nil, map[string]string{"Accept": "text/html"})
	md := do(t, "GET", env.URL+"/developers", nil, map[string]string{"Accept": "text/markdown"})
	plain := do(t, "GET", env.URL+"/developers", nil, nil)
	if html.Status != 200 || !strings.HasPrefix(html.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("HTML: %d %s", html.Status, html.Header.Get("Content-Type"))
	}
	if md.Status != 200 || !strings.HasPrefix(md.Header.Get("Content-Type"), "text/markdown") || string(plain.Body) != string(md.Body) {
		t.Fatalf("Markdown: %d %s", md.Status, md.Header.Get("Content-Type"))
	}
	want := usedSlugs(t, "*.go")
	for name, v := range constValues(t, "x402/reasons.go", "Reason") {
		want[name] = v
	}
	for name, v := range constValues(t, "payments.go", "reason") {
		want[name] = v
	}
	if len(want) < 30 {
		t.Fatalf("found only %d slugs and codes to look for: %v", len(want), want)
	}
	for name, v := range want {
		if !strings.Contains(string(html.Body), `id="`+v+`"`) {
			t.Errorf("the HTML page has no entry for %s (%q)", name, v)
		}
		if !strings.Contains(string(md.Body), `<a id="`+v+`"></a>`) {
			t.Errorf("the Markdown page has no entry for %s (%q)", name, v)
		}
	}
	// A problem's type URI lands on its entry.
	nf := do(t, "GET", env.URL+"/no/such/path", nil, nil)
	p := wantProblem(t, nf, 404, "not-found")
	if _, frag, _ := strings.Cut(p.Type, "#"); !strings.Contains(string(html.Body), `id="`+frag+`"`) {
		t.Errorf("problem type %s has no entry on /developers", p.Type)
	}
}

// TestPagesReadableInChromium renders every HTML page of the facilitator in
// headless Chromium and checks the contrast of all their text.
func TestPagesReadableInChromium(t *testing.T) {
	env := statusEnv(t)
	pagecheck.Check(t, env.Svc.Handler(), "/developers", "/integrate", "/status")
}
