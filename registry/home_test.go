package registry_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry"
)

// TestIndexPageLinksWork: GET / is HTML to a browser and JSON otherwise,
// and every link it gives answers.
func TestIndexPageLinksWork(t *testing.T) {
	f := newTestServer(t, registry.Config{PublicURL: "https://registry.test"}, nil)
	req, _ := http.NewRequest("GET", f.srv.URL+"/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("browser GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`href="/tools"`, `href="/openapi.json"`, "<code>POST</code> <code>/search</code>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("HTML index lacks %s", want)
		}
	}
	status, body := f.do(t, "GET", "/", "")
	var idx struct {
		Sections []struct {
			Links []struct{ Href, Method string }
		}
	}
	if err := json.Unmarshal(body, &idx); err != nil || status != 200 {
		t.Fatalf("JSON GET /: %d %v %s", status, err, body)
	}
	for _, s := range idx.Sections {
		for _, l := range s.Links {
			method, payload := "GET", ""
			if l.Method != "" {
				method, payload = l.Method, "{}"
			}
			if got, _ := f.do(t, method, l.Href, payload); got == 404 || got == 405 {
				t.Errorf("index links %s %s, which answers %d", method, l.Href, got)
			}
		}
	}
}
