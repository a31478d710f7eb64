package facilitator_test

import (
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/internal/pagecheck"
	"github.com/ardx-dev/ardx/internal/srcscan"
)

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
	want := srcscan.WebSlugs(t, ".", "../web")
	for name, v := range srcscan.Consts(t, "x402", "Reason") {
		want[name] = v
	}
	for name, v := range srcscan.Consts(t, ".", "reason") {
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
