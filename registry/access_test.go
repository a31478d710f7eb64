package registry_test

import (
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/internal/syncbuf"
	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/web"
)

func TestBadKeyIsUnauthorizedEverywhere(t *testing.T) {
	f := newTestServer(t, registry.Config{}, nil)
	_, good, err := f.svc.Access().CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	st, out, _ := f.call(t, good, http.MethodPost, "/keys/rotate", "")
	if st != http.StatusOK {
		t.Fatalf("rotate: %d %v", st, out)
	}
	next := out["key"].(map[string]any)["key"].(string)
	for _, tc := range []struct{ name, header string }{
		{"malformed", "Bearer not-a-key"},
		{"basic", "Basic dXNlcjpwYXNz"},
		{"unknown", "Bearer ardx_0123456789abcdef_" + strings.Repeat("A", 43)},
		{"revoked", "Bearer " + good},
		{"altered", "Bearer " + next[:len(next)-1] + map[bool]string{true: "B", false: "A"}[next[len(next)-1] == 'A']},
	} {
		for _, rt := range []struct{ method, path, body string }{
			{http.MethodPost, "/search", `{"query":{"text":"weather"},"federation":"none"}`},
			{http.MethodGet, "/agents", ""},
			{http.MethodGet, "/me", ""},
			{http.MethodGet, "/health", ""},
		} {
			t.Run(tc.name+" "+rt.path, func(t *testing.T) {
				req, _ := http.NewRequest(rt.method, f.srv.URL+rt.path, strings.NewReader(rt.body))
				req.Header.Set("Authorization", tc.header)
				resp, err := f.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
					resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("status %d, WWW-Authenticate %q, type %q; want a 401 problem", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), resp.Header.Get("Content-Type"))
				}
			})
		}
	}
	if st, out, _ := f.call(t, next, http.MethodGet, "/me", ""); st != http.StatusOK || out["authenticated"] != true {
		t.Fatalf("rotated key: %d %v", st, out)
	}
}

func TestMe(t *testing.T) {
	e := newClaimEnv(t, registry.Config{RateLimits: registry.DefaultRateLimits}, "mine.test")
	st, out, _ := e.call(t, "", http.MethodGet, "/me", "")
	if st != http.StatusOK || out["authenticated"] != false || out["account"] != nil {
		t.Fatalf("anonymous /me: %d %v", st, out)
	}
	free := out["free"].(map[string]any)
	if free["search"].(map[string]any)["limitMax"].(float64) != 100 || free["monitoring"].(map[string]any)["trialDays"].(float64) != 14 ||
		len(free["rateLimits"].([]any)) != len(registry.DefaultRateLimits) || free["feed"].(map[string]any)["windowHours"].(float64) != 24 {
		t.Fatalf("free numbers %v", free)
	}

	key := e.claim(t, "", "mine.test", access.MethodDNS)
	if _, err := e.svc.Access().HoldDomain(accountOf(t, e.fixture, key), "watched.test", access.ViaMonitoring); err != nil {
		t.Fatal(err)
	}
	e.call(t, key, http.MethodPost, "/private/entries", `{"domain":"mine.test","entries":[`+ardEntry("mine.test", "a", "alpha")+`]}`)
	e.call(t, key, http.MethodPost, "/search", `{"query":{"text":"alpha"},"federation":"none"}`)
	st, out, h := e.call(t, key, http.MethodGet, "/me", "")
	if st != http.StatusOK || out["authenticated"] != true || h.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("/me with key: %d %v", st, out)
	}
	var doms []string
	for _, d := range out["domains"].([]any) {
		m := d.(map[string]any)
		doms = append(doms, m["domain"].(string)+"/"+m["via"].(string))
	}
	if !slices.Equal(doms, []string{"mine.test/claim", "watched.test/monitoring"}) {
		t.Fatalf("domains %v", doms)
	}
	if pe := out["privateEntries"].([]any); len(pe) != 1 || pe[0].(map[string]any)["count"].(float64) != 1 {
		t.Fatalf("privateEntries %v", pe)
	}
	routes := map[string]float64{}
	for _, u := range out["usage"].(map[string]any)["routes"].([]any) {
		routes[u.(map[string]any)["route"].(string)] = u.(map[string]any)["requests"].(float64)
	}
	if routes["POST /search"] != 1 || routes["POST /private/entries"] != 1 || routes["POST /claim/verify"] != 1 {
		t.Fatalf("usage %v", routes)
	}
	if strings.Contains(mustJSON(t, out), key) {
		t.Fatal("/me shows the key itself")
	}
}

// accountOf reads the account id of key through GET /me.
func accountOf(tb testing.TB, f *fixture, key string) string {
	tb.Helper()
	st, out, _ := f.call(tb, key, http.MethodGet, "/me", "")
	if st != http.StatusOK {
		tb.Fatalf("/me: %d %v", st, out)
	}
	return out["account"].(map[string]any)["id"].(string)
}

func TestClaimFlow(t *testing.T) {
	e := newClaimEnv(t, registry.Config{}, "dns.test", "file.test", "none.test")
	st, out, _ := e.call(t, "", http.MethodPost, "/claim", `{"domain":"DNS.test."}`)
	if st != http.StatusOK {
		t.Fatalf("claim: %d %v", st, out)
	}
	key := out["key"].(map[string]any)["key"].(string)
	dns := out["dns"].(map[string]any)
	if out["domain"] != "dns.test" || dns["name"] != "_ardx-challenge.dns.test" || dns["value"] != "ardx-challenge="+out["token"].(string) ||
		out["http"].(map[string]any)["url"] != "https://dns.test/.well-known/ardx-challenge.txt" {
		t.Fatalf("claim answer %v", out)
	}
	// Nothing in place yet: 403 saying what each check saw.
	st, out, _ = e.call(t, key, http.MethodPost, "/claim/verify", `{"domain":"dns.test"}`)
	if st != http.StatusForbidden || !strings.Contains(out["detail"].(string), "no TXT record at _ardx-challenge.dns.test") {
		t.Fatalf("verify before proof: %d %v", st, out)
	}
	// A wrong value does not prove it.
	e.dns.set("_ardx-challenge.dns.test", "ardx-challenge=wrong")
	if st, out, _ = e.call(t, key, http.MethodPost, "/claim/verify", `{"domain":"dns.test","method":"dns"}`); st != http.StatusForbidden {
		t.Fatalf("verify with a wrong TXT: %d %v", st, out)
	}
	// Another account cannot verify this account's challenge.
	_, other, _ := e.svc.Access().CreateAccount()
	e.dns.set("_ardx-challenge.dns.test", dns["value"].(string))
	if st, out, _ = e.call(t, other, http.MethodPost, "/claim/verify", `{"domain":"dns.test"}`); st != http.StatusConflict {
		t.Fatalf("verify by another account: %d %v", st, out)
	}
	if st, out, _ = e.call(t, "", http.MethodPost, "/claim/verify", `{"domain":"dns.test"}`); st != http.StatusUnauthorized {
		t.Fatalf("verify without a key: %d %v", st, out)
	}
	st, out, _ = e.call(t, key, http.MethodPost, "/claim/verify", `{"domain":"dns.test"}`)
	if st != http.StatusOK || out["method"] != "dns" || out["transferred"] != false {
		t.Fatalf("verify: %d %v", st, out)
	}
	// The challenge is used up.
	if st, _, _ = e.call(t, key, http.MethodPost, "/claim/verify", `{"domain":"dns.test"}`); st != http.StatusConflict {
		t.Fatalf("second verify: %d", st)
	}
	// The file, by the same key.
	e.claim(t, key, "file.test", access.MethodHTTP)
	st, out, _ = e.call(t, key, http.MethodGet, "/me", "")
	if n := len(out["domains"].([]any)); n != 2 {
		t.Fatalf("domains after two claims: %v", out["domains"])
	}
	// Validation.
	for _, body := range []string{`{}`, `{"domain":"https://x.test/"}`, `{"domain":"x.test","extra":1}`, `{"domain":"127.0.0.1"}`} {
		if st, out, _ := e.call(t, key, http.MethodPost, "/claim", body); st != http.StatusUnprocessableEntity {
			t.Errorf("claim %s: %d %v", body, st, out)
		}
	}
	if st, out, _ := e.call(t, key, http.MethodPost, "/claim/verify", `{"domain":"none.test","method":"ftp"}`); st != http.StatusUnprocessableEntity {
		t.Errorf("verify with method ftp: %d %v", st, out)
	}
}

func TestClaimExpires(t *testing.T) {
	e := newClaimEnv(t, registry.Config{Claims: access.ClaimConfig{TTL: time.Nanosecond}}, "late.test")
	st, out, _ := e.call(t, "", http.MethodPost, "/claim", `{"domain":"late.test"}`)
	if st != http.StatusOK {
		t.Fatal(st, out)
	}
	e.dns.set("_ardx-challenge.late.test", "ardx-challenge="+out["token"].(string))
	key := out["key"].(map[string]any)["key"].(string)
	st, out, _ = e.call(t, key, http.MethodPost, "/claim/verify", `{"domain":"late.test"}`)
	if st != http.StatusConflict || !strings.Contains(out["detail"].(string), "expired") {
		t.Fatalf("verify after expiry: %d %v", st, out)
	}
}

func TestClaimTransferMovesDomainAndDropsOldPrivateEntries(t *testing.T) {
	e := newClaimEnv(t, registry.Config{}, "corp.test")
	a := e.claim(t, "", "corp.test", access.MethodDNS)
	st, out, _ := e.call(t, a, http.MethodPost, "/private/entries", `{"domain":"corp.test","entries":[`+ardEntry("corp.test", "payroll", "payroll ledger zebra")+`]}`)
	if st != http.StatusOK {
		t.Fatalf("register: %d %v", st, out)
	}
	b := e.claim(t, "", "corp.test", access.MethodHTTP)

	// A lost the domain and its entries; B never sees A's entries.
	for who, key := range map[string]string{"old owner": a, "new owner": b, "anonymous": ""} {
		_, sr, _ := e.call(t, key, http.MethodPost, "/search", `{"query":{"text":"payroll ledger zebra"},"federation":"none"}`)
		if n := len(sr["results"].([]any)); n != 0 {
			t.Errorf("%s finds %d results after the transfer", who, n)
		}
		if st, _, _ := e.call(t, key, http.MethodGet, "/agents/"+url.PathEscape("urn:air:corp.test:payroll"), ""); st != http.StatusNotFound {
			t.Errorf("%s looks up the old entry: %d", who, st)
		}
	}
	_, me, _ := e.call(t, a, http.MethodGet, "/me", "")
	if len(me["domains"].([]any)) != 0 {
		t.Errorf("old owner still holds %v", me["domains"])
	}
	if st, _, _ := e.call(t, a, http.MethodPost, "/private/entries", `{"domain":"corp.test","entries":[`+ardEntry("corp.test", "x", "y")+`]}`); st != http.StatusForbidden {
		t.Errorf("old owner registers after losing the domain: %d", st)
	}
	// The feed records the change, and nothing of either account.
	st, feed, _ := e.call(t, "", http.MethodGet, "/feed/changes?kind=domain.owner_changed", "")
	items := feed["items"].([]any)
	if st != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["publisher"] != "corp.test" {
		t.Fatalf("feed: %d %v", st, feed)
	}
	raw := mustJSON(t, feed)
	for _, secret := range []string{accountOf(t, e.fixture, b), "acct_", "payroll"} {
		if strings.Contains(raw, secret) {
			t.Errorf("feed holds %q: %s", secret, raw)
		}
	}
}

func TestPrivateEntries(t *testing.T) {
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newClaimEnv(t, registry.Config{Logger: logger}, "acme.test", "rival.test")
	acme := e.claim(t, "", "acme.test", access.MethodDNS)
	rival := e.claim(t, "", "rival.test", access.MethodDNS)
	_, before, _ := e.call(t, "", http.MethodGet, "/health", "")

	// Refusals.
	body := `{"domain":"acme.test","entries":[` + ardEntry("acme.test", "billing", "internal billing ledger quokka") + `,` + ardEntry("acme.test", "hr", "internal people directory quokka") + `]}`
	if st, _, _ := e.call(t, "", http.MethodPost, "/private/entries", body); st != http.StatusUnauthorized {
		t.Errorf("anonymous register: %d", st)
	}
	if st, _, _ := e.call(t, rival, http.MethodPost, "/private/entries", body); st != http.StatusForbidden {
		t.Errorf("register for a domain held by another: %d", st)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"foreign identifier", `{"domain":"acme.test","entries":[` + ardEntry("rival.test", "x", "y") + `]}`, "entries[0].identifier"},
		{"subdomain identifier", `{"domain":"acme.test","entries":[` + ardEntry("eu.acme.test", "x", "y") + `]}`, "entries[0].identifier"},
		{"not an entry", `{"domain":"acme.test","entries":[{"identifier":"urn:air:acme.test:x"}]}`, "entries[0]"},
		{"public identifier", `{"domain":"weather.test","entries":[]}`, "entries"},
		{"no entries", `{"domain":"acme.test"}`, "entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, out, _ := e.call(t, acme, http.MethodPost, "/private/entries", tc.body)
			if st != http.StatusUnprocessableEntity && !(tc.name == "public identifier" && st == http.StatusForbidden) {
				t.Fatalf("%d %v", st, out)
			}
			if st == http.StatusUnprocessableEntity && !strings.Contains(mustJSON(t, out["errors"]), `"`+tc.field) {
				t.Fatalf("errors %v do not name %s", out["errors"], tc.field)
			}
		})
	}
	st, out, _ := e.call(t, acme, http.MethodPost, "/private/entries", body)
	if st != http.StatusOK || len(out["registered"].([]any)) != 2 {
		t.Fatalf("register: %d %v", st, out)
	}

	// The owner sees them beside public entries, labelled, everywhere.
	_, sr, _ := e.call(t, acme, http.MethodPost, "/search", `{"query":{"text":"quokka"},"federation":"none"}`)
	res := sr["results"].([]any)
	if len(res) != 2 || res[0].(map[string]any)["visibility"] != "private" {
		t.Fatalf("owner's search: %v", sr)
	}
	_, pub, _ := e.call(t, acme, http.MethodPost, "/search", `{"query":{"text":"weather forecast"},"federation":"none"}`)
	if v := pub["results"].([]any)[0].(map[string]any)["visibility"]; v != "public" {
		t.Fatalf("public result labelled %v", v)
	}
	if st, ag, _ := e.call(t, acme, http.MethodGet, "/agents/"+url.PathEscape("urn:air:acme.test:billing"), ""); st != http.StatusOK || ag["visibility"] != "private" {
		t.Fatalf("owner's lookup: %d %v", st, ag)
	}
	_, list, _ := e.call(t, acme, http.MethodGet, "/agents?filter="+url.QueryEscape(`publisherId="acme.test"`), "")
	if n := len(list["items"].([]any)); n != 2 {
		t.Fatalf("owner's /agents: %v", list)
	}
	_, ex, _ := e.call(t, acme, http.MethodPost, "/explore", `{"query":{"text":"quokka"},"resultType":{"facets":["publisher"]}}`)
	if !strings.Contains(mustJSON(t, ex), `{"count":2,"privateCount":2,"value":"acme.test"}`) {
		t.Fatalf("owner's explore: %v", ex)
	}
	_, mine, _ := e.call(t, acme, http.MethodGet, "/private/entries", "")
	if mine["total"].(float64) != 2 {
		t.Fatalf("owner's list: %v", mine)
	}

	// Nobody else does.
	for who, key := range map[string]string{"rival": rival, "anonymous": ""} {
		_, sr, _ := e.call(t, key, http.MethodPost, "/search", `{"query":{"text":"quokka"},"federation":"none"}`)
		if len(sr["results"].([]any)) != 0 {
			t.Errorf("%s search: %v", who, sr)
		}
		if st, _, _ := e.call(t, key, http.MethodGet, "/agents/"+url.PathEscape("urn:air:acme.test:billing"), ""); st != http.StatusNotFound {
			t.Errorf("%s lookup: %d", who, st)
		}
		_, ex, _ := e.call(t, key, http.MethodPost, "/explore", `{"query":{"text":"quokka"},"resultType":{"facets":["publisher"]}}`)
		if strings.Contains(mustJSON(t, ex), "acme.test") {
			t.Errorf("%s explore: %v", who, ex)
		}
		_, list, _ := e.call(t, key, http.MethodGet, "/agents?filter="+url.QueryEscape(`publisherId="acme.test"`), "")
		if len(list["items"].([]any)) != 0 {
			t.Errorf("%s /agents: %v", who, list)
		}
		if key != "" {
			_, mine, _ := e.call(t, key, http.MethodGet, "/private/entries", "")
			if mine["total"].(float64) != 0 {
				t.Errorf("%s list: %v", who, mine)
			}
			// Deleting another's entry removes nothing and says nothing.
			if st, _, _ := e.call(t, key, http.MethodDelete, "/private/entries", `{"identifier":"urn:air:acme.test:billing"}`); st != http.StatusNotFound {
				t.Errorf("%s delete: %d", who, st)
			}
		}
	}
	_, after, _ := e.call(t, "", http.MethodGet, "/health", "")
	if after["documents"] != before["documents"] {
		t.Errorf("/health counts private entries: %v -> %v", before["documents"], after["documents"])
	}
	for _, path := range []string{"/feed/changes", "/stats", "/state-of-mcp", "/tool-safety", "/agents?pageSize=100"} {
		st, out, _ := e.call(t, "", http.MethodGet, path, "")
		if raw := mustJSON(t, out); st != http.StatusOK || strings.Contains(raw, "acme.test") {
			t.Errorf("%s shows private entries: %d %s", path, st, raw)
		}
	}
	if err := e.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, rec := range e.records(t) {
		for _, r := range rec.Results {
			if strings.Contains(r.ID, "acme.test") {
				t.Errorf("demand log holds a private result: %+v", rec)
			}
		}
	}

	// Delete, scoped to the owner's domain; then it is gone for the owner too.
	st, out, _ = e.call(t, acme, http.MethodDelete, "/private/entries", `{"identifiers":["urn:air:acme.test:billing","urn:air:weather.test:forecast"]}`)
	if st != http.StatusOK || len(out["deleted"].([]any)) != 1 || len(out["notFound"].([]any)) != 1 {
		t.Fatalf("delete: %d %v", st, out)
	}
	if st, _, _ := e.call(t, "", http.MethodGet, "/agents/"+url.PathEscape("urn:air:weather.test:forecast"), ""); st != http.StatusOK {
		t.Fatalf("a public entry was deleted through /private/entries: %d", st)
	}
	_, sr, _ = e.call(t, acme, http.MethodPost, "/search", `{"query":{"text":"quokka"},"federation":"none"}`)
	if len(sr["results"].([]any)) != 1 {
		t.Fatalf("after delete: %v", sr)
	}

	// A request's log line is written after its answer: stop the server,
	// which waits for its handlers, before reading the log.
	e.srv.Close()
	for _, secret := range []string{acme, rival, acme[5:21], "billing", "quokka"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

func TestRateLimitsPerKeyAndAddress(t *testing.T) {
	limits := []web.Bucket{{Name: registry.BucketAddress, Rate: 0.001, Burst: 3}, {Name: registry.BucketKey, Rate: 0.001, Burst: 5}, {Name: registry.BucketMint, Rate: 0.001, Burst: 1}}
	e := newClaimEnv(t, registry.Config{RateLimits: limits}, "rl.test", "rl2.test")
	var last http.Header
	for i := range 3 {
		st, _, h := e.call(t, "", http.MethodGet, "/me", "")
		if st != http.StatusOK || h.Get("RateLimit-Policy") == "" || !strings.Contains(h.Get("RateLimit"), `"address";r=`+string(rune('2'-i))) {
			t.Fatalf("request %d: %d, RateLimit %q", i, st, h.Get("RateLimit"))
		}
		last = h
	}
	_ = last
	st, out, h := e.call(t, "", http.MethodGet, "/me", "")
	if st != http.StatusTooManyRequests || h.Get("Retry-After") == "" || out["type"] == nil {
		t.Fatalf("fourth anonymous request: %d %v", st, out)
	}
	// /health is never limited.
	if st, _, _ := e.call(t, "", http.MethodGet, "/health", ""); st != http.StatusOK {
		t.Fatalf("/health limited: %d", st)
	}
	// A key has its own quota, whatever the address spent.
	_, key, _ := e.svc.Access().CreateAccount()
	for i := range 5 {
		st, _, h := e.call(t, key, http.MethodGet, "/me", "")
		if st != http.StatusOK || !strings.HasPrefix(h.Get("RateLimit"), `"key"`) {
			t.Fatalf("keyed request %d: %d %q", i, st, h.Get("RateLimit"))
		}
	}
	if st, _, _ := e.call(t, key, http.MethodGet, "/me", ""); st != http.StatusTooManyRequests {
		t.Fatalf("sixth keyed request: %d", st)
	}
	// Rotating the key gives no fresh quota: the limit is the account's.
	if st, _, _ := e.call(t, key, http.MethodPost, "/keys/rotate", ""); st != http.StatusTooManyRequests {
		t.Fatalf("rotate past the limit: %d", st)
	}
	// Minting keys is limited per address.
	_, other, _ := e.svc.Access().CreateAccount()
	if st, out, _ := e.call(t, other, http.MethodPost, "/claim", `{"domain":"rl.test"}`); st != http.StatusOK || out["key"] != nil {
		t.Fatalf("claim with a key: %d %v", st, out)
	}
	e2 := newClaimEnv(t, registry.Config{RateLimits: limits}, "rl.test")
	if st, out, _ := e2.call(t, "", http.MethodPost, "/claim", `{"domain":"rl.test"}`); st != http.StatusOK || out["key"] == nil {
		t.Fatalf("first mint: %d %v", st, out)
	}
	if st, out, h := e2.call(t, "", http.MethodPost, "/claim", `{"domain":"rl2.test"}`); st != http.StatusTooManyRequests || !strings.Contains(h.Get("RateLimit"), `"mint"`) {
		t.Fatalf("second mint: %d %v %q", st, out, h.Get("RateLimit"))
	}
}
