package registry_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/access"
)

// FuzzPrivateEntryBodies sends arbitrary bodies to the routes that decode
// a caller's JSON for keys and private entries. Whatever the body, the
// answer is a JSON document below 500, and a 200 registration stores only
// entries of the claimed domain.
func FuzzPrivateEntryBodies(f *testing.F) {
	for _, s := range []string{
		`{"domain":"fz.test","entries":[` + ardEntry("fz.test", "a", "b") + `]}`,
		`{"domain":"fz.test","entries":[{"identifier":"urn:air:fz.test:x","type":"application/ai-catalog+json","url":"https://fz.test/c.json"}]}`,
		`{"domain":"fz.test","entries":[{"identifier":"urn:air:other.test:x"}]}`,
		`{"identifiers":["urn:air:fz.test:a",""]}`, `{"identifier":7}`, `{"domain":"fz.test"}`, `[]`, ``, `{"domain":"FZ.test.","entries":null}`,
	} {
		f.Add([]byte(s))
	}
	e := newClaimEnv(f, registry.Config{}, "fz.test")
	key := e.claim(f, "", "fz.test", access.MethodDNS)
	h := e.svc.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, rt := range []struct{ method, path string }{
			{http.MethodPost, "/private/entries"}, {http.MethodDelete, "/private/entries"}, {http.MethodPost, "/claim"},
		} {
			req := httptest.NewRequest(rt.method, rt.path, strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+key)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 || !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s %s %q: %d %s", rt.method, rt.path, body, rec.Code, rec.Body)
			}
			if rt.method == http.MethodPost && rt.path == "/private/entries" && rec.Code == http.StatusOK {
				var out struct{ Registered []string }
				_ = json.Unmarshal(rec.Body.Bytes(), &out)
				for _, id := range out.Registered {
					if !strings.HasPrefix(id, "urn:air:fz.test:") {
						t.Fatalf("registered %q for fz.test", id)
					}
				}
			}
		}
	})
}
