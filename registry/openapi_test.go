package registry

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
)

// TestOpenAPIMatchesRoutes fails when a route is added without describing
// it, or the description lists a route that does not exist.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	db, err := kv.Open(t.TempDir(), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ix, err := index.OpenMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s, err := New(Config{PublicURL: "https://registry.test"}, db, ix)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())

	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Version string `json:"version"`
		} `json:"info"`
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Info.Version != "1.0.0" || len(doc.Servers) != 1 || doc.Servers[0].URL != "https://registry.test" {
		t.Fatalf("header %+v", doc)
	}
	var described, routed []string
	for path, ops := range doc.Paths {
		for method := range ops {
			described = append(described, strings.ToUpper(method)+" "+path)
		}
	}
	for _, rt := range s.routeTable() {
		routed = append(routed, rt.method+" "+strings.ReplaceAll(rt.path, "*identifier", "{identifier}"))
	}
	slices.Sort(described)
	slices.Sort(routed)
	if !slices.Equal(described, routed) {
		t.Fatalf("openapi.json describes %v\nrouter serves      %v", described, routed)
	}
	// Every operation that takes input documents the 422 problem.
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if path == "/" || path == "/health" || path == "/openapi.json" || path == "/developers" { // no input
				continue
			}
			if !strings.Contains(string(op), `"422"`) {
				t.Errorf("%s %s does not document 422", method, path)
			}
		}
	}
}
