package registry_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/internal/pagecheck"
	"github.com/ardx-dev/ardx/internal/srcscan"
	"github.com/ardx-dev/ardx/registry"
)

// TestDevelopersPage: the registry's problem types point at
// {base}/developers#<slug>; the page documents every slug the registry's
// code uses and the ones web's shared plumbing answers with for it.
func TestDevelopersPage(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	get := func(accept string) (body string) {
		req, _ := http.NewRequest("GET", f.srv.URL+"/developers", nil)
		req.Header.Set("Accept", accept)
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, accept) {
			t.Fatalf("Accept %s: %d %s", accept, resp.StatusCode, ct)
		}
		return string(b)
	}
	html, md := get("text/html"), get("text/markdown")
	want := srcscan.WebSlugs(t, ".", "../web")
	// web.Problems answers these for every service: unknown paths and
	// methods, bodies over the limit or not JSON, field errors, panics.
	for _, slug := range []string{"not-found", "method-not-allowed", "payload-too-large", "bad-request", "unprocessable-content", "internal-server-error"} {
		want[slug] = slug
	}
	for name, v := range want {
		if !strings.Contains(html, `id="`+v+`"`) || !strings.Contains(md, `<a id="`+v+`"></a>`) {
			t.Errorf("/developers has no entry for %s (%q)", name, v)
		}
	}
	_, nf := f.do(t, "GET", "/no/such/path", "")
	var p struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(nf, &p); err != nil {
		t.Fatal(err)
	}
	if _, frag, _ := strings.Cut(p.Type, "#"); !strings.HasPrefix(p.Type, publicURL+"/developers#") || !strings.Contains(html, `id="`+frag+`"`) {
		t.Errorf("problem type %q has no entry on /developers", p.Type)
	}
}

// TestDevelopersPageReadableInChromium checks the contrast of every piece
// of text of /developers in headless Chromium.
func TestDevelopersPageReadableInChromium(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	pagecheck.Check(t, f.svc.Handler(), "/developers")
}
