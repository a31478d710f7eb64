package registry

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/web"
)

func fuzzService(t testing.TB) *Service {
	return &Service{problems: web.Problems{BaseURL: "https://r.test"}, tokens: tokenSealer{key: []byte("k"), now: time.Now}}
}

// checkProblem fails unless err is a 400 or 422 problem (never a 500).
func checkProblem(t *testing.T, err error) {
	var p *web.Problem
	if !errors.As(err, &p) {
		var de *web.DecodeError
		if errors.As(err, &de) {
			return // written as 400/422 by web.Problems
		}
		t.Fatalf("error is not a problem: %T %v", err, err)
	}
	if p.Status != http.StatusBadRequest && p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d for bad input", p.Status)
	}
	if p.Status == http.StatusUnprocessableEntity && len(p.Errors) == 0 {
		t.Fatalf("422 without field errors: %+v", p)
	}
}

// fuzzDecode runs a decoder's fuzz target: every body is either a 400/422
// problem, from splitting the object or from parse, or a request that
// accepted holds valid.
func fuzzDecode[R any](f *testing.F, seeds []string, parse func(*Service, map[string]json.RawMessage) (R, error), accepted func(*testing.T, R)) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	s := fuzzService(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := splitObject(body, s.problems)
		if err != nil {
			checkProblem(t, err)
			return
		}
		req, err := parse(s, m)
		if err != nil {
			checkProblem(t, err)
			return
		}
		accepted(t, req)
	})
}

func FuzzSearchDecode(f *testing.F) {
	seeds := []string{
		`{"query":{"text":"weather forecast tools","filter":{"type":["application/mcp-server-card+json"]}},"federation":"none","pageSize":2}`,
		`{"query":{"text":"x","filter":{"tags":"a","metadata.k":["v"]}},"limit":100,"pageToken":"czEA"}`,
		`{"query":{"text":""}}`, `[]`, `{"limit":1e2}`, `{"query":{"text":"a","filter":{"pay:price":{"lte":1}}}}`,
		`{"query":{"text":"a","filter":{"pay:price":{"gt":"0.001","lte":1e-2},"maxPricePerCall":"$0.5","pay:network":["eip155:8453","tempo"],"pay:protocol":"payable","pay:verified":"live"}}}`, ``,
	}
	parse := func(s *Service, m map[string]json.RawMessage) (searchRequest, error) {
		return s.parseSearch(httptest.NewRequest(http.MethodPost, "/search", nil), m)
	}
	fuzzDecode(f, seeds, parse, func(t *testing.T, req searchRequest) {
		if strings.TrimSpace(req.Text) == "" || req.Limit < 1 || req.Limit > maxSearchLimit || req.Offset < 0 || req.Offset > maxSearchOffset {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
		switch req.Federation {
		case fedAuto, fedNone, fedReferrals:
		default:
			t.Fatalf("federation %q accepted", req.Federation)
		}
		for k, vals := range req.Filter {
			if !index.FilterKey(k) || len(vals) == 0 {
				t.Fatalf("filter %q=%v accepted", k, vals)
			}
		}
	})
}

func FuzzExploreDecode(f *testing.F) {
	seeds := []string{
		`{"resultType":{"facets":[{"field":"type"}]}}`, `{}`, ``, `{"resultType":"facets"}`,
		`{"query":{"text":"w"},"resultType":{"facets":["publisher",{"field":"type","limit":3,"minCount":1}]}}`,
		`{"resultType":{"facets":[{"field":"type","limit":-1}]}}`,
	}
	fuzzDecode(f, seeds, (*Service).parseExplore, func(t *testing.T, req exploreRequest) {
		if len(req.Facets) == 0 {
			t.Fatal("accepted request asks for no facets")
		}
		for _, fr := range req.Facets {
			if fr.Limit < 1 || fr.Limit > maxFacetLimit || fr.MinCount < 0 || fr.Field == "" {
				t.Fatalf("facet request %+v accepted", fr)
			}
		}
	})
}

// FuzzRawString holds rawString to encoding/json's decoding of the same
// bytes, valid JSON or not: its shortcut for plain strings must agree.
func FuzzRawString(f *testing.F) {
	for _, s := range []string{`"weather in Tokyo"`, `"caf\u00e9"`, `"café"`, `"a\"b"`, `"a"b"`, `"\xff"`, "\"tab\there\"", `"`, `""`, `"\u2028 ok"`, `"x`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := rawString(raw)
		var want string
		err := json.Unmarshal(raw, &want)
		wantOK := err == nil && len(raw) > 0 && raw[0] == '"'
		if ok != wantOK || got != want && ok {
			t.Fatalf("rawString(%q) = %q, %v; encoding/json %q, %v", raw, got, ok, want, err)
		}
	})
}

// BenchmarkSearchDecode measures what a POST /search body costs before the
// index sees it: splitting the object and parsing the request.
func BenchmarkSearchDecode(b *testing.B) {
	s := fuzzService(b)
	body := []byte(`{"query":{"text":"I'm planning a trip to Japan next month and would like to know what the weather will be like in Tokyo, and also find some good sushi restaurants nearby."},"limit":10,"federation":"none"}`)
	r := httptest.NewRequest(http.MethodPost, "/search", nil)
	b.ReportAllocs()
	for b.Loop() {
		m, err := splitObject(body, s.problems)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.parseSearch(r, m); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSplitObject pins what each kind of body comes back as: an object's
// members, a 422 for JSON that is not an object, and the toolkit's decode
// error (a 400 with the offset) for malformed JSON, object-shaped or not.
func TestSplitObject(t *testing.T) {
	s := fuzzService(t)
	tests := []struct {
		body    string
		members int    // for an accepted body
		status  int    // of a *web.Problem
		decode  string // a *web.DecodeError's message holds this
	}{
		{body: ``, members: 0},
		{body: "  \n", members: 0},
		{body: `{}`, members: 0},
		{body: ` {"query":{"text":"a"},"limit":2} `, members: 2},
		{body: `[1]`, status: http.StatusUnprocessableEntity},
		{body: `"text"`, status: http.StatusUnprocessableEntity},
		{body: `null`, status: http.StatusUnprocessableEntity},
		{body: `{"query":`, decode: "truncated"},
		{body: `{"a":1}x`, decode: "after the JSON value"},
		{body: `{"a":1,}`, decode: "invalid"},
		{body: `[1,`, decode: "truncated"},
		{body: `nul`, decode: "JSON"},
	}
	for _, tc := range tests {
		m, err := splitObject([]byte(tc.body), s.problems)
		var p *web.Problem
		var de *web.DecodeError
		switch {
		case tc.status == 0 && tc.decode == "":
			if err != nil || len(m) != tc.members {
				t.Errorf("%q: %d members, %v; want %d members", tc.body, len(m), err, tc.members)
			}
		case tc.status != 0:
			if !errors.As(err, &p) || p.Status != tc.status {
				t.Errorf("%q: %v; want a %d problem", tc.body, err, tc.status)
			}
		default:
			if !errors.As(err, &de) || !strings.Contains(de.Msg, tc.decode) {
				t.Errorf("%q: %T %v; want a decode error holding %q", tc.body, err, err, tc.decode)
			}
		}
	}
}
