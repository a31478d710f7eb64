package facilitator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPIDocumentIsValidAndRouted loads GET /openapi.json with
// kin-openapi, validates it as OpenAPI 3.1, and calls every operation it
// describes: none may be unknown to the router.
func TestOpenAPIDocumentIsValidAndRouted(t *testing.T) {
	env := newTestEnv(t)
	a := do(t, "GET", env.URL+"/openapi.json", nil, nil)
	if a.Status != 200 || a.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %s", a.Status, a.Header.Get("Content-Type"))
	}
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	doc, err := loader.LoadFromData(a.Body)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.IsOpenAPI32OrLater() {
		t.Errorf("openapi = %q, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != publicURL {
		t.Errorf("servers = %v, want the public URL %s", doc.Servers, publicURL)
	}
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			n++
			var body []byte
			if method == http.MethodPost {
				body = []byte(`{}`)
			}
			got := do(t, method, env.URL+path, body, map[string]string{"Content-Type": "application/json"})
			documented := op.Responses.Status(got.Status) != nil
			if got.Status == http.StatusNotFound || got.Status == http.StatusMethodNotAllowed && !documented {
				t.Errorf("%s %s is described but the router answers %d", method, path, got.Status)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d operations described", n)
	}
}

func TestIndexPage(t *testing.T) {
	env := newTestEnv(t)
	a := do(t, "GET", env.URL+"/", nil, map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
	if a.Status != 200 || !strings.HasPrefix(a.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("browser GET /: %d %s", a.Status, a.Header.Get("Content-Type"))
	}
	for _, want := range []string{`href="/status"`, `href="/integrate"`, `href="/openapi.json"`, "<code>POST</code> <code>/settle</code>"} {
		if !strings.Contains(string(a.Body), want) {
			t.Errorf("HTML index lacks %s", want)
		}
	}
	a = do(t, "GET", env.URL+"/", nil, nil)
	var idx struct {
		Service  string
		Sections []struct {
			Links []struct{ Href, Method string }
		}
	}
	if err := json.Unmarshal(a.Body, &idx); err != nil || a.Status != 200 {
		t.Fatalf("JSON GET /: %d %v %s", a.Status, err, a.Body)
	}
	// Every link the index gives leads somewhere.
	for _, s := range idx.Sections {
		for _, l := range s.Links {
			method := l.Method
			if method == "" {
				method = "GET"
			}
			if got := do(t, method, env.URL+l.Href, []byte(`{}`), nil); got.Status == 404 || got.Status == 405 {
				t.Errorf("index links %s %s, which answers %d", method, l.Href, got.Status)
			}
		}
	}
}
