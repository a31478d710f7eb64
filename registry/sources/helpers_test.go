package sources_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/internal/golden"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/registry/sources"
	"github.com/ardx-dev/ardx/web"
)

// hostMux routes by Host header, so that one httptest server plays several
// publishers' domains (pinned to it with FetchOptions.Resolve).
type hostMux map[string]http.Handler

func (m hostMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	if h, ok := m[host]; ok {
		h.ServeHTTP(w, r)
		return
	}
	http.NotFound(w, r)
}

// newTestReader serves hosts on loopback and returns a Reader whose Fetcher
// resolves every one of those domains to it.
func newTestReader(tb testing.TB, hosts hostMux) *sources.Reader {
	tb.Helper()
	srv := httptest.NewServer(hosts)
	tb.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	resolve := map[string]string{}
	for h := range hosts {
		resolve[h] = u.Host
	}
	f := web.NewFetcher(web.FetchOptions{Resolve: resolve})
	return sources.NewReader(f, nil)
}

// serveFile answers every request with a testdata file.
func serveFile(tb testing.TB, name, contentType string) http.Handler {
	tb.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	})
}

func mustRead(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fixedTime replaces fetch times so golden files do not change per run.
const fixedTime = "2026-01-01T00:00:00Z"

func scrub(entries []sources.Entry) {
	for _, e := range entries {
		for k := range e.Metadata {
			if strings.HasSuffix(k, "fetchedAt") {
				e.Metadata[k] = fixedTime
			}
		}
	}
}

// checkGolden compares v, as indented JSON, with testdata/golden/name.
func checkGolden(tb testing.TB, name string, v any) {
	tb.Helper()
	golden.JSON(tb, filepath.Join("testdata", "golden", name), v)
}

// checkARD builds a manifest of entries and requires ingest.ParseManifest
// to accept every entry without errors; the only warnings allowed are about
// the number of representative queries, which ardx never invents.
func checkARD(tb testing.TB, entries []sources.Entry) {
	tb.Helper()
	body, err := json.Marshal(map[string]any{"entries": entries})
	if err != nil {
		tb.Fatal(err)
	}
	m, problems := ingest.ParseManifest(body)
	for _, p := range problems {
		if p.Severity == ingest.SeverityError || !strings.Contains(p.Message, "representativeQueries") {
			tb.Errorf("manifest problem: %s", p)
		}
	}
	if len(m.Entries) != len(entries) {
		tb.Errorf("ParseManifest kept %d of %d entries", len(m.Entries), len(entries))
	}
	for _, e := range entries {
		for _, k := range []string{"source.url", "source.fetchedAt", "source.httpStatus", "source.sha256"} {
			if _, ok := e.Metadata[k]; !ok {
				tb.Errorf("%s: metadata lacks %s", e.Identifier, k)
			}
		}
	}
}

func entryByID(tb testing.TB, entries []sources.Entry, id string) sources.Entry {
	tb.Helper()
	for _, e := range entries {
		if e.Identifier == id {
			return e
		}
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Identifier)
	}
	tb.Fatalf("no entry %s among %v", id, ids)
	return sources.Entry{}
}
