package registry_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry"
	"github.com/ardx-dev/ardx/registry/access"
)

// propWord is in every private entry's description, so one search finds
// every private entry a caller may see (and, if isolation broke, others).
const propWord = "xylophonic"

// propModel is what the property test expects the registry to hold.
type propModel struct {
	domains []string
	owner   map[string]int             // domain -> account index holding it by claim, -1 for none
	entries map[string]map[string]bool // domain -> identifiers of the holder's private entries
	tools   map[string]bool            // identifiers of private tool entries
	keys    []string                   // account index -> live key
	revoked []string                   // keys rotated away
}

// visible is the set of private identifiers account a may see (a < 0:
// anonymous, none).
func (m *propModel) visible(a int) map[string]string {
	out := map[string]string{}
	if a < 0 {
		return out
	}
	for d, o := range m.owner {
		if o == a {
			for id := range m.entries[d] {
				out[id] = d
			}
		}
	}
	return out
}

// allPrivate is every private identifier that exists, with its domain.
func (m *propModel) allPrivate() map[string]string {
	out := map[string]string{}
	for d, ids := range m.entries {
		for id := range ids {
			out[id] = d
		}
	}
	return out
}

// TestPrivateEntriesNeverReachAnotherKey runs random operations of many
// accounts over many domains through the HTTP surface (claim and claim
// transfer, register, delete, search, page tokens, list, lookup, explore,
// tools, key rotation) and checks after every read that the caller saw
// exactly its own private entries: none of another key's, ever.
// PROP_OPS and PROP_SEED override the count and the seed.
func TestPrivateEntriesNeverReachAnotherKey(t *testing.T) {
	ops := 10000
	if testing.Short() {
		ops = 1000
	}
	if v, err := strconv.Atoi(os.Getenv("PROP_OPS")); err == nil && v > 0 {
		ops = v
	}
	seed := uint64(16)
	if v, err := strconv.ParseUint(os.Getenv("PROP_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d, %d operations", seed, ops)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	const nDomains, nAccounts = 10, 8
	m := &propModel{owner: map[string]int{}, entries: map[string]map[string]bool{}, tools: map[string]bool{}}
	for i := range nDomains {
		d := "d" + strconv.Itoa(i) + ".prop.test"
		m.domains = append(m.domains, d)
		m.owner[d] = -1
		m.entries[d] = map[string]bool{}
	}
	e := newClaimEnv(t, registry.Config{}, m.domains...)
	for range nAccounts {
		_, key, err := e.svc.Access().CreateAccount()
		if err != nil {
			t.Fatal(err)
		}
		m.keys = append(m.keys, key)
	}
	keyOf := func(a int) string {
		if a < 0 {
			return ""
		}
		return m.keys[a]
	}
	serial := 0
	counts := map[string]int{}
	leaks := 0
	fail := func(op string, format string, args ...any) {
		t.Helper()
		leaks++
		t.Errorf("op %s: "+format, append([]any{op}, args...)...)
		if leaks > 20 {
			t.FailNow()
		}
	}
	// checkIDs compares the private identifiers a caller got with what it
	// may see: any other private identifier is a leak.
	all := func() map[string]string { return m.allPrivate() }
	checkSeen := func(op string, a int, got []string, wantAll bool) {
		t.Helper()
		vis, every := m.visible(a), all()
		seen := map[string]bool{}
		for _, id := range got {
			if _, private := every[id]; private {
				if _, ok := vis[id]; !ok {
					fail(op, "caller %d saw private entry %s of domain %s (held by %d)", a, id, every[id], m.owner[every[id]])
				}
			}
			if strings.Contains(id, ".prop.test") {
				if _, ok := vis[id]; !ok {
					fail(op, "caller %d saw %s, which it may not see", a, id)
				}
			}
			seen[id] = true
		}
		if wantAll {
			for id := range vis {
				if !seen[id] {
					fail(op, "caller %d did not see its own private entry %s", a, id)
				}
			}
		}
	}
	caller := func() int { return rng.IntN(nAccounts+1) - 1 } // -1: anonymous

	for i := range ops {
		a := caller()
		op := rng.IntN(100)
		switch {
		case op < 3: // claim (and claim transfer)
			if a < 0 {
				a = rng.IntN(nAccounts)
			}
			d := m.domains[rng.IntN(nDomains)]
			method := access.MethodDNS
			if rng.IntN(2) == 0 {
				method = access.MethodHTTP
			}
			e.claim(t, keyOf(a), d, method)
			if m.owner[d] != a {
				m.entries[d] = map[string]bool{} // the old holder's entries go with it
			}
			m.owner[d] = a
			counts["claim"]++
		case op < 22: // register
			d := m.domains[rng.IntN(nDomains)]
			n := 1 + rng.IntN(3)
			var bodies, ids []string
			tool := map[string]bool{}
			for range n {
				serial++
				name := "e" + strconv.Itoa(serial)
				if rng.IntN(4) == 0 {
					tool["urn:air:"+d+":"+name] = true
					bodies = append(bodies, `{"identifier":"urn:air:`+d+`:`+name+`","type":"application/mcp-tool+json","displayName":"`+name+`","description":"`+propWord+` tool `+name+`","data":{"name":"`+name+`","endpoint":"https://`+d+`/mcp"}}`)
				} else {
					bodies = append(bodies, ardEntry(d, name, propWord+" service "+name))
				}
				ids = append(ids, "urn:air:"+d+":"+name)
			}
			st, out, _ := e.call(t, keyOf(a), http.MethodPost, "/private/entries", `{"domain":"`+d+`","entries":[`+strings.Join(bodies, ",")+`]}`)
			switch {
			case a < 0:
				if st != http.StatusUnauthorized {
					fail("register", "anonymous register: %d %v", st, out)
				}
			case m.owner[d] == a:
				if st != http.StatusOK {
					t.Fatalf("op %d: owner %d registering on %s: %d %v", i, a, d, st, out)
				}
				for _, id := range ids {
					m.entries[d][id] = true
					m.tools[id] = tool[id]
				}
			default:
				if st != http.StatusForbidden {
					fail("register", "account %d registering on %s held by %d: %d %v", a, d, m.owner[d], st, out)
				}
			}
			counts["register"]++
		case op < 30: // delete
			every := all()
			var id string
			if len(every) > 0 && rng.IntN(5) > 0 {
				ids := make([]string, 0, len(every))
				for k := range every {
					ids = append(ids, k)
				}
				slices.Sort(ids)
				id = ids[rng.IntN(len(ids))]
			} else {
				id = "urn:air:weather.test:forecast"
			}
			st, out, _ := e.call(t, keyOf(a), http.MethodDelete, "/private/entries", `{"identifier":"`+id+`"}`)
			d, private := every[id]
			switch {
			case a < 0:
				if st != http.StatusUnauthorized {
					fail("delete", "anonymous delete: %d", st)
				}
			case private && m.owner[d] == a:
				if st != http.StatusOK {
					fail("delete", "owner %d deleting %s: %d %v", a, id, st, out)
				}
				delete(m.entries[d], id)
			default:
				if st != http.StatusNotFound {
					fail("delete", "account %d deleting %s (not its own): %d %v", a, id, st, out)
				}
			}
			counts["delete"]++
		case op < 55: // search, sometimes paging with another caller's token
			limit := 100
			if rng.IntN(4) == 0 {
				limit = 1 + rng.IntN(3)
			}
			text := propWord
			if rng.IntN(3) == 0 {
				text = propWord + " service"
			}
			st, out, _ := e.call(t, keyOf(a), http.MethodPost, "/search", fmt.Sprintf(`{"query":{"text":%q},"federation":"none","limit":%d}`, text, limit))
			if st != http.StatusOK {
				t.Fatalf("op %d: search: %d %v", i, st, out)
			}
			got := resultIDs(out["results"])
			checkSeen("search", a, got, limit == 100 && text == propWord)
			for _, r := range out["results"].([]any) {
				rm := r.(map[string]any)
				if strings.Contains(rm["identifier"].(string), ".prop.test") && rm["visibility"] != "private" {
					fail("search", "private result %v not labelled", rm["identifier"])
				}
			}
			if tok, _ := out["pageToken"].(string); tok != "" {
				b := caller()
				st, out, _ := e.call(t, keyOf(b), http.MethodPost, "/search", fmt.Sprintf(`{"query":{"text":%q},"federation":"none","limit":%d,"pageToken":%q}`, text, limit, tok))
				switch {
				case b == a && st == http.StatusOK:
					checkSeen("search page", b, resultIDs(out["results"]), false)
				case b == a:
					t.Fatalf("op %d: own page token refused: %d %v", i, st, out)
				case st != http.StatusUnprocessableEntity:
					fail("search page", "caller %d used caller %d's page token: %d %v", b, a, st, out)
				}
				counts["page token"]++
			}
			counts["search"]++
		case op < 65: // list
			d := m.domains[rng.IntN(nDomains)]
			st, out, _ := e.call(t, keyOf(a), http.MethodGet, "/agents?pageSize=100&filter="+url.QueryEscape(`publisherId="`+d+`"`), "")
			if st != http.StatusOK {
				t.Fatalf("op %d: list: %d %v", i, st, out)
			}
			var got []string
			for _, it := range out["items"].([]any) {
				got = append(got, it.(map[string]any)["identifier"].(string))
			}
			want := 0
			if m.owner[d] == a && a >= 0 {
				want = len(m.entries[d])
			}
			if len(got) != want {
				fail("list", "caller %d listed %d entries of %s, want %d", a, len(got), d, want)
			}
			checkSeen("list", a, got, false)
			counts["list"]++
		case op < 75: // lookup
			every := all()
			if len(every) == 0 {
				continue
			}
			ids := make([]string, 0, len(every))
			for k := range every {
				ids = append(ids, k)
			}
			slices.Sort(ids)
			id := ids[rng.IntN(len(ids))]
			st, out, _ := e.call(t, keyOf(a), http.MethodGet, "/agents/"+url.PathEscape(id), "")
			_, mine := m.visible(a)[id]
			if mine && (st != http.StatusOK || out["visibility"] != "private") || !mine && st != http.StatusNotFound {
				fail("lookup", "caller %d looked up %s (its own: %v): %d", a, id, mine, st)
			}
			counts["lookup"]++
		case op < 85: // explore
			st, out, _ := e.call(t, keyOf(a), http.MethodPost, "/explore", `{"query":{"text":"`+propWord+`"},"resultType":{"facets":[{"field":"publisher","limit":100}]}}`)
			if st != http.StatusOK {
				t.Fatalf("op %d: explore: %d %v", i, st, out)
			}
			want := map[string]int{}
			for _, d := range m.visible(a) {
				want[d]++
			}
			got := map[string]int{}
			for _, b := range out["facets"].(map[string]any)["publisher"].(map[string]any)["buckets"].([]any) {
				bm := b.(map[string]any)
				got[bm["value"].(string)] = int(bm["count"].(float64))
				if pc, ok := bm["privateCount"].(float64); ok && int(pc) != want[bm["value"].(string)] {
					fail("explore", "caller %d: publisher %v privateCount %v, want %d", a, bm["value"], pc, want[bm["value"].(string)])
				} else if !ok && want[bm["value"].(string)] > 0 {
					fail("explore", "caller %d: publisher %v has no privateCount", a, bm["value"])
				}
			}
			for d, n := range got {
				if want[d] != n {
					fail("explore", "caller %d: publisher %s counted %d, want %d", a, d, n, want[d])
				}
			}
			for d, n := range want {
				if got[d] != n {
					fail("explore", "caller %d: publisher %s counted %d, want %d", a, d, got[d], n)
				}
			}
			counts["explore"]++
		case op < 93: // tools
			st, out, _ := e.call(t, keyOf(a), http.MethodPost, "/tools", `{"q":"`+propWord+` tool","limit":100}`)
			if st != http.StatusOK {
				t.Fatalf("op %d: tools: %d %v", i, st, out)
			}
			got := resultIDs(out["results"])
			checkSeen("tools", a, got, false)
			for id := range m.visible(a) {
				if m.tools[id] && !slices.Contains(got, id) {
					fail("tools", "caller %d did not find its own private tool %s", a, id)
				}
			}
			counts["tools"]++
		case op < 95: // rotate
			if a < 0 {
				continue
			}
			st, out, _ := e.call(t, keyOf(a), http.MethodPost, "/keys/rotate", "")
			if st != http.StatusOK {
				t.Fatalf("op %d: rotate: %d %v", i, st, out)
			}
			m.revoked = append(m.revoked, m.keys[a])
			m.keys[a] = out["key"].(map[string]any)["key"].(string)
			counts["rotate"]++
		default: // a revoked key is refused, never served as anonymous
			if len(m.revoked) == 0 {
				continue
			}
			old := m.revoked[rng.IntN(len(m.revoked))]
			st, _, _ := e.call(t, old, http.MethodPost, "/search", `{"query":{"text":"`+propWord+`"},"federation":"none"}`)
			if st != http.StatusUnauthorized {
				fail("revoked", "a revoked key got %d", st)
			}
			counts["revoked key"]++
		}
	}
	// Every entry of the model is where it should be, and public numbers
	// never counted one.
	st, health, _ := e.call(t, "", http.MethodGet, "/health", "")
	if st != http.StatusOK || int(health["documents"].(float64)) != len(fixtureEntries) {
		t.Errorf("/health counts %v documents, want the %d public ones", health["documents"], len(fixtureEntries))
	}
	_, feed, _ := e.call(t, "", http.MethodGet, "/feed/changes?limit=100", "")
	for _, it := range feed["items"].([]any) {
		im := it.(map[string]any)
		if strings.Contains(im["identifier"].(string), ".prop.test") {
			t.Errorf("feed carries a private entry: %v", im)
		}
	}
	t.Logf("operations by kind: %v; private entries at the end: %d", counts, len(all()))
	if counts["search"] == 0 || counts["claim"] == 0 || counts["register"] == 0 {
		t.Fatalf("the run exercised too little: %v", counts)
	}
}

func resultIDs(v any) []string {
	var out []string
	items, _ := v.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			if id, ok := m["identifier"].(string); ok {
				out = append(out, id)
			}
		}
	}
	return out
}
