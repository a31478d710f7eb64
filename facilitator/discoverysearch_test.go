package facilitator_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/facilitator"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/web"
)

// searchPage is the body of GET /discovery/search as the official bazaar
// client (2.27.0) reads it.
type searchPage struct {
	X402Version    int                         `json:"x402Version"`
	Resources      []facilitator.CatalogueItem `json:"resources"`
	PartialResults *bool                       `json:"partialResults"`
	Pagination     *struct {
		Limit  int     `json:"limit"`
		Cursor *string `json:"cursor"`
	} `json:"pagination"`
}

func TestDiscoverySearch(t *testing.T) {
	env := newEchoEnv(t, echoOptions{})
	payer := env.newPayer(t, "search")
	for _, s := range []struct{ resource, bazaar string }{
		{"https://api.example.test/weather", `{"info":{"input":{"type":"http","method":"GET"},"output":{"type":"json","example":{"forecast":"sunny"}}}}`},
		{"https://tools.example.test/mcp", `{"info":{"input":{"type":"mcp","toolName":"weather_alerts","inputSchema":{"type":"object"}}}}`},
		{"https://api.example.test/quote", `{"info":{"input":{"type":"http","method":"POST","bodyType":"json","body":{"symbol":"ACME"}}}}`},
	} {
		var sr x402.SettleResponse
		do(t, "POST", env.URL+"/settle", bazaarSettle(t, env.DC, payer, s.resource, s.bazaar), nil).decode(t, &sr)
		if !sr.Success {
			t.Fatalf("settle %s: %+v", s.resource, sr)
		}
	}
	waitCatalogue(t, env.Cat, 3)
	merchant := env.DC.Merchant.Hex()

	search := func(t *testing.T, query string) searchPage {
		t.Helper()
		a := do(t, "GET", env.URL+"/discovery/search?"+query, nil, nil)
		if a.Status != 200 {
			t.Fatalf("search %s: %d %s", query, a.Status, a.Body)
		}
		var p searchPage
		a.decode(t, &p)
		if p.X402Version != 2 || p.PartialResults == nil || p.Pagination == nil {
			t.Fatalf("search %s: not the client's shape: %s", query, a.Body)
		}
		return p
	}
	tests := []struct {
		query string
		want  []string // resources, in rank order
	}{
		{"query=weather", []string{"https://tools.example.test/mcp", "https://api.example.test/weather"}},
		{"query=weather+sunny", []string{"https://api.example.test/weather", "https://tools.example.test/mcp"}},
		{"query=weather&type=mcp", []string{"https://tools.example.test/mcp"}},
		{"query=weather&type=http", []string{"https://api.example.test/weather"}},
		{"query=quote+weather&payTo=" + url.QueryEscape(strings.ToLower(merchant)), []string{"https://api.example.test/quote", "https://tools.example.test/mcp", "https://api.example.test/weather"}},
		{"query=weather&payTo=0x0000000000000000000000000000000000000001", nil},
		{"query=weather&scheme=exact", []string{"https://tools.example.test/mcp", "https://api.example.test/weather"}},
		{"query=weather&scheme=upto", nil},
		{"query=weather&network=dev", []string{"https://tools.example.test/mcp", "https://api.example.test/weather"}},
		{"query=weather&network=eip155:8453", nil},
		{"query=weather&extensions=bazaar", []string{"https://tools.example.test/mcp", "https://api.example.test/weather"}},
		{"query=weather&extensions=sign-in-with-x", nil},
		{"query=zebra+xylophone", nil},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			p := search(t, tc.query)
			var got []string
			for _, r := range p.Resources {
				got = append(got, r.Resource)
				if _, ok := r.Extensions["bazaar"]; !ok {
					t.Errorf("%s carries no extensions.bazaar", r.Resource)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if p.Pagination.Limit != facilitator.DefaultDiscoveryLimit || p.Pagination.Cursor != nil {
				t.Errorf("pagination %+v", *p.Pagination)
			}
		})
	}

	// Cursor pagination: the cursor of one page gives the next, and the
	// last page's cursor is null.
	var seen []string
	cursor := ""
	for range 5 {
		q := "query=weather+quote&limit=1"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		p := search(t, q)
		if len(p.Resources) != 1 || p.Pagination.Limit != 1 {
			t.Fatalf("page %s: %+v", q, p)
		}
		seen = append(seen, p.Resources[0].Resource)
		if p.Pagination.Cursor == nil {
			break
		}
		cursor = *p.Pagination.Cursor
	}
	if len(seen) != 3 || seen[0] == seen[1] || seen[1] == seen[2] {
		t.Errorf("paged through %v, want the three resources once each", seen)
	}

	// The body of one item keeps the merchant's declaration.
	p := search(t, "query=quote")
	var info struct {
		Input struct{ Method string } `json:"input"`
	}
	raw, _ := json.Marshal(p.Resources[0].Extensions["bazaar"].(map[string]any)["info"])
	if err := json.Unmarshal(raw, &info); err != nil || info.Input.Method != "POST" {
		t.Errorf("extensions.bazaar.info = %s", raw)
	}

	// /discovery/resources takes the same filters.
	var page discoveryPage
	do(t, "GET", env.URL+"/discovery/resources?payTo="+url.QueryEscape(strings.ToLower(merchant))+"&scheme=exact&extensions=bazaar", nil, nil).decode(t, &page)
	if page.Pagination.Total != 3 {
		t.Errorf("resources filtered by payTo, scheme, extensions: %+v", page)
	}
	do(t, "GET", env.URL+"/discovery/resources?payTo=0x01", nil, nil).decode(t, &page)
	if page.Pagination.Total != 0 {
		t.Errorf("resources for another payTo: %+v", page)
	}

	for _, tc := range []struct{ query, field string }{
		{"", "query"}, {"query=", "query"}, {"query=" + strings.Repeat("a", 300), "query"},
		{"query=a&limit=0", "limit"}, {"query=a&limit=101", "limit"}, {"query=a&cursor=next", "cursor"},
		{"query=a&cursor=-1", "cursor"}, {"query=a&type=grpc", "type"}, {"query=a&payTo=", "payTo"},
	} {
		t.Run("invalid "+tc.query, func(t *testing.T) {
			p := wantProblem(t, do(t, "GET", env.URL+"/discovery/search?"+tc.query, nil, nil), 422, web.SlugUnprocessable)
			if len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
				t.Fatalf("errors %+v, want field %s", p.Errors, tc.field)
			}
		})
	}
}
