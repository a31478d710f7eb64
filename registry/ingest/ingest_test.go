package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/web"
)

func mustOpenIndex(tb testing.TB) *index.Index {
	tb.Helper()
	ix, err := index.OpenMemory()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ix.Close() })
	return ix
}

// newIngester returns an ingester over a fresh kv and in-memory index whose
// fetcher may reach loopback (the httptest servers) and pins the given
// domains to srv.
func newIngester(tb testing.TB, srv *httptest.Server, domains ...string) *ingest.Ingester {
	tb.Helper()
	opts := web.FetchOptions{AllowPrivate: true, Timeout: 5 * time.Second, MaxBytes: 1 << 20}
	if srv != nil && len(domains) > 0 {
		opts.Resolve = map[string]string{}
		for _, d := range domains {
			opts.Resolve[d] = srv.Listener.Addr().String()
		}
	}
	// Each reading of the clock is a second later; loads run concurrently.
	var ticks atomic.Int64
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return &ingest.Ingester{
		DB:      kvtest.Open(tb),
		Index:   mustOpenIndex(tb),
		Fetcher: web.NewFetcher(opts),
		Now:     func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Second) },
	}
}

func entryJSON(id string, extra ...string) string {
	s := fmt.Sprintf(`{"identifier":%q,"displayName":"Entry %s","type":"application/mcp-server-card+json","url":"https://x.test/c","description":"about %s","representativeQueries":["a","b"]`, id, id, id)
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

func manifest(entries ...string) string {
	return `{"entries":[` + strings.Join(entries, ",") + `]}`
}

func writeFile(tb testing.TB, path, body string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func storedIDs(tb testing.TB, db *kv.DB) []string {
	tb.Helper()
	var ids []string
	if err := db.ForEachEntry(func(e kv.Entry) error { ids = append(ids, e.ID); return nil }); err != nil {
		tb.Fatal(err)
	}
	return ids
}

func indexCount(tb testing.TB, ix *index.Index) int {
	tb.Helper()
	n, err := ix.Count()
	if err != nil {
		tb.Fatal(err)
	}
	return int(n)
}

func TestIngestDefaultCorpus(t *testing.T) {
	in := newIngester(t, nil)
	rep, err := in.IngestFS(context.Background(), os.DirFS("../../testdata/corpus"), ".")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.Print(&buf)
	if rep.Rejected() != 0 || len(rep.Errors()) != 0 {
		t.Fatalf("corpus has rejections or errors:\n%s", buf.String())
	}
	for _, s := range rep.Sources {
		if len(s.Warnings) != 0 {
			t.Errorf("%s has warnings: %v", s.Source, s.Warnings)
		}
	}
	n, _ := in.DB.CountEntries()
	if n < 60 {
		t.Fatalf("corpus holds %d entries, want >= 60", n)
	}
	publishers := map[string]bool{}
	types := map[string]bool{}
	shapes := map[string]int{}
	err = in.DB.ForEachEntry(func(e kv.Entry) error {
		d, err := ingest.ToDoc(e)
		if err != nil {
			return err
		}
		publishers[d.Publisher] = true
		types[d.Type] = true
		// The manifest's queries; the index holds them less the frozen
		// benchmark query of the entry (bench.HoldOut).
		var body struct {
			RQ []string `json:"representativeQueries"`
		}
		_ = json.Unmarshal(e.Body, &body)
		if len(body.RQ) < 2 || len(body.RQ) > 5 || d.Description == "" {
			t.Errorf("%s: %d queries, description %q", e.ID, len(body.RQ), d.Description)
		}
		if len(d.Queries) < 1 || len(d.Queries) < len(body.RQ)-1 {
			t.Errorf("%s: indexes %q of %q", e.ID, d.Queries, body.RQ)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(publishers) < 15 {
		t.Fatalf("%d publishers, want >= 15", len(publishers))
	}
	for _, typ := range []string{ingest.TypeMCPServer, ingest.TypeA2AAgent, ingest.TypeOpenAPIOperation, ingest.TypeRegistry, ingest.TypeSkillZip, ingest.TypeSkillMarkdown} {
		if !types[typ] {
			t.Errorf("corpus has no %s entry", typ)
		}
	}
	for _, s := range rep.Sources {
		body, err := os.ReadFile(filepath.Join("../../testdata/corpus", strings.TrimPrefix(s.Source, "fs:")))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := ingest.ParseManifest(body)
		shapes[m.Shape]++
	}
	if shapes["ard"] == 0 || shapes["ai-catalog"] == 0 {
		t.Fatalf("corpus shapes %v, want both", shapes)
	}
	if got := indexCount(t, in.Index); got != n {
		t.Fatalf("index holds %d docs, kv %d", got, n)
	}
	res, err := in.Index.Search(context.Background(), index.SearchRequest{Text: "weather forecast", Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) == 0 || !strings.Contains(res.Hits[0].ID, "weather.example-labs.dev") {
		t.Fatalf("weather forecast search: %+v", res.Hits)
	}
	// A second run over the same corpus changes nothing.
	rep2, err := in.IngestFS(context.Background(), os.DirFS("../../testdata/corpus"), ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep2.Sources {
		if s.Added+s.Changed+s.Removed != 0 {
			t.Fatalf("re-ingest changed %s: %+v", s.Source, s)
		}
	}
}

func TestIngestFileReplaceBySource(t *testing.T) {
	ctx := context.Background()
	in := newIngester(t, nil)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "sub", "b.json")
	writeFile(t, a, manifest(entryJSON("urn:air:one.test:x"), entryJSON("urn:air:one.test:y"),
		`{"identifier":"urn:air:one.test:bad","type":"x/y","url":"https://x.test"}`))
	writeFile(t, b, `{"specVersion":"1.0","host":{"displayName":"Two"},"entries":[`+entryJSON("urn:ai:two.test:z")+`]}`)
	writeFile(t, filepath.Join(dir, "notes.txt"), "not a manifest")

	rep, err := in.Ingest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sources) != 2 || rep.Stored() != 3 || rep.Rejected() != 1 {
		t.Fatalf("report %+v", rep)
	}
	if r := rep.Sources[0].Rejected[0]; r.Identifier != "urn:air:one.test:bad" || r.Pointer != "/entries/2" || !strings.Contains(r.Message, "displayName") {
		t.Fatalf("rejection %+v", r)
	}
	if got := storedIDs(t, in.DB); strings.Join(got, " ") != "urn:air:one.test:x urn:air:one.test:y urn:air:two.test:z" {
		t.Fatalf("stored %v", got)
	}
	e, err := in.DB.GetEntry("urn:air:one.test:x")
	if err != nil || e.Source != a || e.Provenance.Source != a || len(e.Provenance.SHA256) != 64 {
		t.Fatalf("entry %+v, %v", e, err)
	}

	// Re-ingest a: y changes, x goes, w arrives.
	writeFile(t, a, manifest(entryJSON("urn:air:one.test:y", `"version":"2"`), entryJSON("urn:air:one.test:w")))
	rep, err = in.Ingest(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sources[0]
	if s.Added != 1 || s.Changed != 1 || s.Removed != 1 || s.Stored != 2 {
		t.Fatalf("second ingest %+v", s)
	}
	if got := storedIDs(t, in.DB); strings.Join(got, " ") != "urn:air:one.test:w urn:air:one.test:y urn:air:two.test:z" {
		t.Fatalf("stored %v", got)
	}
	if got := indexCount(t, in.Index); got != 3 {
		t.Fatalf("index holds %d docs, want 3", got)
	}
	var kinds []string
	cs, _ := in.DB.Changes(0, 0)
	for _, c := range cs {
		kinds = append(kinds, c.Kind+" "+c.ID)
	}
	sort.Strings(kinds[3:])
	want := []string{
		"entry.added urn:air:one.test:x", "entry.added urn:air:one.test:y", "entry.added urn:air:two.test:z",
		"entry.added urn:air:one.test:w", "entry.changed urn:air:one.test:y", "entry.removed urn:air:one.test:x",
	}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}

	// A file that is no longer a manifest leaves its entries alone.
	writeFile(t, a, `{"not":"a manifest"}`)
	rep, _ = in.Ingest(ctx, a)
	if rep.Sources[0].Error == "" {
		t.Fatalf("broken manifest not reported: %+v", rep.Sources[0])
	}
	if n, _ := in.DB.CountEntries(); n != 3 {
		t.Fatalf("broken manifest changed the store: %d entries", n)
	}
	var out bytes.Buffer
	rep.Print(&out)
	if !strings.Contains(out.String(), "error: ") || !strings.Contains(out.String(), "1 source error") {
		t.Fatalf("Print:\n%s", out.String())
	}
}

func TestIngestUnknownSource(t *testing.T) {
	in := newIngester(t, nil)
	rep, err := in.Ingest(context.Background(), filepath.Join(t.TempDir(), "missing.json"), "not a domain", "ftp://x.test/a", "typo.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors()) != 4 || rep.Sources[3].Error != "no such file" {
		t.Fatalf("report %+v", rep)
	}
}

// site serves manifests by "host/path" (or bare "/path" for any host) and
// counts requests; the mutex orders the test's edits with the server.
type site struct {
	mu    sync.Mutex
	files map[string]string
	hits  map[string]int
}

func (s *site) set(key, body string) { s.mu.Lock(); s.files[key] = body; s.mu.Unlock() }
func (s *site) del(key string)       { s.mu.Lock(); delete(s.files, key); s.mu.Unlock() }
func (s *site) hit(key string) int   { s.mu.Lock(); defer s.mu.Unlock(); return s.hits[key] }

func newSite(t *testing.T, files map[string]string) (*httptest.Server, *site) {
	s := &site{files: files, hits: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.Host+r.URL.Path]++
		body, ok := s.files[r.Host+r.URL.Path]
		if !ok {
			body, ok = s.files[r.URL.Path]
		}
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

func TestIngestDomainFallsBackToAICatalog(t *testing.T) {
	srv, st := newSite(t, map[string]string{
		"/.well-known/ai-catalog.json": `{"specVersion":"1.0","host":{"displayName":"Acme"},"entries":[` + entryJSON("urn:air:acme.test:tools:a") + `]}`,
	})
	in := newIngester(t, srv, "acme.test")
	rep, err := in.Ingest(context.Background(), "acme.test")
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sources[0]
	if s.Error != "" || s.Stored != 1 || s.Source != "https://acme.test/.well-known/ard.json" {
		t.Fatalf("report %+v", s)
	}
	if st.hit("acme.test/.well-known/ard.json") != 1 || st.hit("acme.test/.well-known/ai-catalog.json") != 1 {
		t.Fatal("did not try ard.json then ai-catalog.json once each")
	}
	if len(s.Warnings) == 0 || !strings.Contains(s.Warnings[0].Message, "predecessor") {
		t.Fatalf("no fallback warning: %+v", s.Warnings)
	}
	e, err := in.DB.GetEntry("urn:air:acme.test:tools:a")
	if err != nil || e.Provenance.Source != "https://acme.test/.well-known/ai-catalog.json" || e.Provenance.HTTPStatus != 200 {
		t.Fatalf("entry %+v, %v", e, err)
	}
}

func TestIngestDomainPrefersARD(t *testing.T) {
	srv, st := newSite(t, map[string]string{
		"/.well-known/ard.json":        manifest(entryJSON("urn:air:acme.test:new")),
		"/.well-known/ai-catalog.json": manifest(entryJSON("urn:air:acme.test:old")),
	})
	in := newIngester(t, srv, "acme.test")
	if _, err := in.Ingest(context.Background(), "acme.test"); err != nil {
		t.Fatal(err)
	}
	if got := storedIDs(t, in.DB); len(got) != 1 || got[0] != "urn:air:acme.test:new" {
		t.Fatalf("stored %v", got)
	}
	if st.hit("acme.test/.well-known/ai-catalog.json") != 0 {
		t.Fatal("fetched the predecessor path although ard.json answered")
	}
}

func TestIngestURLSquatting(t *testing.T) {
	srv, _ := newSite(t, map[string]string{
		"/.well-known/ard.json": manifest(
			entryJSON("urn:air:acme.test:mine"),
			entryJSON("urn:air:api.acme.test:sub"),
			entryJSON("urn:air:other.test:squat"),
			entryJSON("urn:air:notacme.test:lookalike"),
		),
	})
	in := newIngester(t, srv, "acme.test")
	rep, err := in.Ingest(context.Background(), "https://acme.test/.well-known/ard.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := storedIDs(t, in.DB); strings.Join(got, " ") != "urn:air:acme.test:mine urn:air:api.acme.test:sub" {
		t.Fatalf("stored %v", got)
	}
	if rep.Rejected() != 2 || !strings.Contains(rep.Sources[0].Rejected[0].Message, "not the manifest host") {
		t.Fatalf("rejected %+v", rep.Sources[0].Rejected)
	}
	// The same document from a file is trusted: no squatting check.
	path := filepath.Join(t.TempDir(), "ard.json")
	writeFile(t, path, manifest(entryJSON("urn:air:other.test:squat")))
	rep, _ = in.Ingest(context.Background(), path)
	if rep.Rejected() != 0 || rep.Stored() != 1 {
		t.Fatalf("file source: %+v", rep.Sources[0])
	}
}

func TestIngestNestedCatalogURLs(t *testing.T) {
	link := func(id, u string) string {
		return fmt.Sprintf(`{"identifier":%q,"displayName":"more","type":"application/ai-catalog+json","url":%q}`, id, u)
	}
	files := map[string]string{
		"acme.test/.well-known/ard.json": manifest(entryJSON("urn:air:acme.test:top"),
			link("urn:air:acme.test:cat1", "https://acme.test/level1.json"),
			link("urn:air:acme.test:partner", "https://partner.test/catalog.json"),
			link("urn:air:acme.test:broken", "https://acme.test/missing.json")),
		"acme.test/level1.json": manifest(entryJSON("urn:air:acme.test:l1"),
			link("urn:air:acme.test:cat2", "https://acme.test/level2.json"),
			link("urn:air:acme.test:loop", "https://acme.test/.well-known/ard.json")),
		"acme.test/level2.json": manifest(entryJSON("urn:air:acme.test:l2"), link("urn:air:acme.test:cat3", "https://acme.test/level3.json")),
		"acme.test/level3.json": manifest(entryJSON("urn:air:acme.test:l3"), link("urn:air:acme.test:cat4", "https://acme.test/level4.json")),
		"acme.test/level4.json": manifest(entryJSON("urn:air:acme.test:l4"), link("urn:air:acme.test:cat5", "https://acme.test/level5.json")),
		"acme.test/level5.json": manifest(entryJSON("urn:air:acme.test:l5")),
		// Publishers are checked against the nested document's own host.
		"partner.test/catalog.json": manifest(entryJSON("urn:air:partner.test:p"), entryJSON("urn:air:acme.test:p-squat")),
	}
	srv, st := newSite(t, files)
	in := newIngester(t, srv, "acme.test", "partner.test")
	rep, err := in.Ingest(context.Background(), "acme.test")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(storedIDs(t, in.DB), " ")
	want := "urn:air:acme.test:l1 urn:air:acme.test:l2 urn:air:acme.test:l3 urn:air:acme.test:l4 urn:air:acme.test:top urn:air:partner.test:p"
	if got != want {
		t.Fatalf("stored %s\nwant   %s\nreport %+v", got, want, rep.Sources[0])
	}
	if st.hit("acme.test/level5.json") != 0 {
		t.Fatal("followed a catalog past the depth limit")
	}
	if st.hit("acme.test/.well-known/ard.json") != 1 {
		t.Fatalf("loop followed: %d fetches", st.hit("acme.test/.well-known/ard.json"))
	}
	text := problemsText(rep.Sources[0].Rejected)
	for _, wantMsg := range []string{"deeper than", "status 404", "not the manifest host"} {
		if !strings.Contains(text, wantMsg) {
			t.Errorf("rejections lack %q:\n%s", wantMsg, text)
		}
	}
	e, _ := in.DB.GetEntry("urn:air:partner.test:p")
	if e.Source != "https://acme.test/.well-known/ard.json" || e.Provenance.Source != "https://partner.test/catalog.json" {
		t.Fatalf("nested entry source %q provenance %q", e.Source, e.Provenance.Source)
	}

	// When a nested catalog breaks or fails transiently, its entries stay.
	for _, breakIt := range []func(){
		func() { st.set("partner.test/catalog.json", "<html>oops</html>") },
		func() { st.del("partner.test/catalog.json") },
	} {
		breakIt()
		rep, err = in.Ingest(context.Background(), "acme.test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.DB.GetEntry("urn:air:partner.test:p"); err != nil {
			t.Fatalf("entry of a failed nested catalog was removed: %v (%+v)", err, rep.Sources[0])
		}
		if rep.Sources[0].Removed != 0 {
			t.Fatalf("removed %d", rep.Sources[0].Removed)
		}
	}
}

func TestIngestURLErrors(t *testing.T) {
	srv, _ := newSite(t, map[string]string{
		"/big.json":  `{"entries":[` + strings.Repeat(" ", 2<<20) + `]}`,
		"/html.json": `<html>hello</html>`,
	})
	in := newIngester(t, srv, "acme.test")
	rep, err := in.Ingest(context.Background(), "https://acme.test/missing.json", "https://acme.test/big.json", "https://acme.test/html.json")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"status 404", "too large", "not a JSON object"} {
		if !strings.Contains(rep.Sources[i].Error, want) {
			t.Errorf("source %d error %q, want %q", i, rep.Sources[i].Error, want)
		}
	}
	// The production fetcher refuses loopback.
	in.Fetcher = web.NewFetcher(web.FetchOptions{Timeout: 2 * time.Second})
	rep, _ = in.Ingest(context.Background(), srv.URL+"/.well-known/ard.json")
	if !strings.Contains(rep.Sources[0].Error, "forbidden address") {
		t.Fatalf("loopback fetch: %q", rep.Sources[0].Error)
	}
}

func TestIngestSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.json")
	writeFile(t, path, manifest(entryJSON("urn:air:one.test:x"), entryJSON("urn:air:one.test:y")))
	in := &ingest.Ingester{DB: db}
	if _, err := in.Ingest(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Reindex into a fresh index rebuilds exactly what kv holds.
	in = &ingest.Ingester{DB: db, Index: mustOpenIndex(t)}
	var progress bytes.Buffer
	in.Progress = &progress
	n, err := in.Reindex(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("Reindex = %d, %v", n, err)
	}
	if got := indexCount(t, in.Index); got != 2 {
		t.Fatalf("index holds %d", got)
	}
	if !strings.Contains(progress.String(), "reindex 2/2") {
		t.Fatalf("progress %q", progress.String())
	}
	// The re-opened store still knows the source: re-ingesting it unchanged is a no-op.
	rep, err := in.Ingest(context.Background(), path)
	if err != nil || rep.Sources[0].Added+rep.Sources[0].Changed+rep.Sources[0].Removed != 0 {
		t.Fatalf("re-ingest after reopen: %+v, %v", rep.Sources[0], err)
	}
}

func TestIngestCancelled(t *testing.T) {
	in := newIngester(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "m.json")
	writeFile(t, path, manifest(entryJSON("urn:air:one.test:x")))
	if _, err := in.Ingest(ctx, path); err == nil {
		t.Fatal("cancelled ingest returned no error")
	}
	if n, _ := in.DB.CountEntries(); n != 0 {
		t.Fatalf("cancelled ingest stored %d", n)
	}
}

func TestToDoc(t *testing.T) {
	body := `{"identifier":"urn:air:acme.test:api:getForecast","displayName":"Get forecast","type":"application/openapi-operation+json",
		"description":"Forecast","version":"1.2","tags":[" Weather ","weather","API"],"capabilities":["GetForecast"],
		"representativeQueries":["weather tomorrow",""],
		"metadata":{"rate":600,"free":true,"region":"eu","gone":null},
		"trustManifest":{"identity":"https://acme.test","identityType":"https","attestations":[{"type":"SOC2"},{"type":"soc2"}]},
		"data":{"method":"get","path":"/v1/forecast","summary":"Daily forecast","tools":[{"name":"t1","description":"tool one"}]}}`
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := ingest.ToDoc(kv.Entry{ID: "urn:air:acme.test:api:getForecast", Body: json.RawMessage(body), Owner: "corp.test", CreatedAt: created, UpdatedAt: created.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"name", d.Name, "getForecast"},
		{"publisher", d.Publisher, "acme.test"},
		{"type", d.Type, "application/openapi-operation+json"},
		{"tags", strings.Join(d.Tags, ","), "weather,api"},
		{"capabilities", strings.Join(d.Capabilities, ","), "getforecast"},
		{"queries", strings.Join(d.Queries, ","), "weather tomorrow"},
		{"metadata", fmt.Sprint(d.Metadata), "map[free:true rate:600 region:eu]"},
		{"attestations", strings.Join(d.AttestationTypes, ","), "soc2"},
		{"identityType", d.IdentityType, "https"},
		{"owner", d.Owner, "corp.test"},
		{"version", d.Version, "1.2"},
		{"updated", d.UpdatedAt, created.Add(time.Hour)},
		{"text", strings.Join(d.Text, "|"), "GET /v1/forecast|Daily forecast|tool one|t1"},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if _, err := ingest.ToDoc(kv.Entry{ID: "x", Body: json.RawMessage(`[`)}); err == nil {
		t.Fatal("ToDoc accepted a broken body")
	}
}

func TestIngestLaterSourceClaimWins(t *testing.T) {
	in := newIngester(t, nil)
	in.Concurrency = 3
	dir := t.TempDir()
	var paths []string
	for i := range 6 {
		p := filepath.Join(dir, fmt.Sprintf("m%d.json", i))
		writeFile(t, p, manifest(entryJSON("urn:air:shared.test:x", fmt.Sprintf(`"version":"%d"`, i)), entryJSON(fmt.Sprintf("urn:air:own%d.test:y", i))))
		paths = append(paths, p)
	}
	var progress bytes.Buffer
	in.Progress = &progress
	rep, err := in.Ingest(context.Background(), paths...)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range rep.Sources {
		if s.Source != paths[i] {
			t.Fatalf("report order: %d is %s", i, s.Source)
		}
	}
	e, err := in.DB.GetEntry("urn:air:shared.test:x")
	if err != nil || e.Source != paths[5] || !strings.Contains(string(e.Body), `"version":"5"`) {
		t.Fatalf("shared entry %+v, %v", e, err)
	}
	if n := strings.Count(progress.String(), "\n"); n != 6 || !strings.Contains(progress.String(), "ingest [6/6]") {
		t.Fatalf("progress:\n%s", progress.String())
	}
	// Re-ingesting the first source without the shared entry leaves it with the last one.
	writeFile(t, paths[0], manifest(entryJSON("urn:air:own0.test:y")))
	if _, err := in.Ingest(context.Background(), paths[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := in.DB.GetEntry("urn:air:shared.test:x"); err != nil {
		t.Fatalf("entry claimed by a later source was removed: %v", err)
	}
}

func TestIngestFileDoesNotFollowCatalogURLs(t *testing.T) {
	in := newIngester(t, nil)
	path := filepath.Join(t.TempDir(), "ard.json")
	writeFile(t, path, manifest(entryJSON("urn:air:one.test:x"),
		`{"identifier":"urn:air:one.test:more","displayName":"More","type":"application/ai-catalog+json","url":"https://one.test/more.json","representativeQueries":["a","b"]}`))
	rep, err := in.Ingest(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sources[0]
	if s.Stored != 1 || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0].Message, "only when ingesting from the web") {
		t.Fatalf("report %+v", s)
	}
}

// The index follows kv a unit behind; every stored unit is indexed before
// Ingest returns, and a unit whose index update fails says so in its own
// report while the others are unaffected.
func TestIngestIndexesEveryUnitAndReportsIndexFailures(t *testing.T) {
	ctx := context.Background()
	in := newIngester(t, nil)
	dir := t.TempDir()
	var want []string
	for i := range 6 {
		id := fmt.Sprintf("urn:air:u%d.test:entry", i)
		want = append(want, id)
		writeFile(t, filepath.Join(dir, fmt.Sprintf("m%d.json", i)), manifest(entryJSON(id)))
	}
	rep, err := in.Ingest(ctx, dir)
	if err != nil || len(rep.Errors()) != 0 || rep.Stored() != len(want) {
		t.Fatalf("report %+v, err %v", rep, err)
	}
	res, err := in.Index.Search(ctx, index.SearchRequest{Size: 100})
	if err != nil || res.Total != uint64(len(want)) {
		t.Fatalf("indexed %d of %d (%v)", res.Total, len(want), err)
	}

	// A closed index refuses every update: each unit is stored in kv and
	// reports that its index update failed.
	if err := in.Index.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "m0.json"), manifest(entryJSON("urn:air:u0.test:entry"), entryJSON("urn:air:u0.test:more")))
	writeFile(t, filepath.Join(dir, "m1.json"), manifest(entryJSON("urn:air:u1.test:entry"), entryJSON("urn:air:u1.test:more")))
	rep, err = in.Ingest(ctx, filepath.Join(dir, "m0.json"), filepath.Join(dir, "m1.json"))
	if err != nil {
		t.Fatal(err)
	}
	errs := rep.Errors()
	if len(errs) != 2 {
		t.Fatalf("errors %+v, want one per unit", errs)
	}
	for _, e := range errs {
		if !strings.Contains(e.Error, "index update failed") {
			t.Fatalf("error %q does not name the index", e.Error)
		}
	}
	if _, err := in.DB.GetEntry("urn:air:u1.test:more"); err != nil {
		t.Fatalf("kv lost a unit whose index update failed: %v", err)
	}
}
