package sources

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry/pay"
	"github.com/ardx-dev/ardx/web"
)

const bazaarPage = `{"x402Version":2,"items":[
 {"resource":"https://api.merchant.test/weather","type":"http","x402Version":2,"method":"GET","description":"Weather forecast for a city. Hourly.","accepts":[{"scheme":"exact","network":"eip155:8453","amount":"1000","asset":"0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913","payTo":"0x1","maxTimeoutSeconds":60}],"lastUpdated":"2026-11-25T00:00:00Z"},
 {"resource":"https://tools.merchant.test/mcp","type":"mcp","x402Version":2,"toolName":"alerts","accepts":[{"scheme":"exact","network":"base","maxAmountRequired":"5","amount":"5","asset":"0x1","payTo":"0x1"}]},
 {"resource":"ftp://nope.test/x","type":"http","accepts":[{"network":"base","amount":"1"}]},
 {"resource":"https://api.merchant.test/free","type":"http","accepts":[]}
],"pagination":{"limit":100,"offset":0,"total":4}}`

func TestBazaarEntries(t *testing.T) {
	p, err := ParseBazaarPage(&web.FetchResult{URL: "https://fac.test/discovery/resources?limit=100", Status: 200, Body: []byte(bazaarPage), SHA256: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 4 || len(p.Items) != 4 {
		t.Fatalf("page %+v", p)
	}
	r, err := BazaarEntries("fac.test", []*BazaarPage{p})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Entries) != 2 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "2 catalogue item(s) skipped") {
		t.Fatalf("entries %d, warnings %v", len(r.Entries), r.Warnings)
	}
	w := r.Entries[0]
	if w.Identifier != "urn:air:fac.test:x402:get-api.merchant.test-weather" || w.Type != pay.TypeX402Resource || w.URL != "" ||
		w.Metadata["source.url"] != "https://fac.test/discovery/resources?limit=100" || w.Metadata["source.sha256"] != "abc" ||
		len(w.RepresentativeQueries) != 1 || !strings.Contains(w.Description, "listed by the facilitator fac.test") {
		t.Errorf("weather entry %+v", w)
	}
	if id := r.Entries[1].Identifier; id != "urn:air:fac.test:x402:alerts-tools.merchant.test-mcp" {
		t.Errorf("mcp entry id %q", id)
	}
	if _, err := ParseBazaarPage(&web.FetchResult{Body: []byte(`{"items":null}`)}); err == nil {
		t.Error("a page without items parsed")
	}
}

// FuzzBazaarPage: any catalogue page gives entries that encode as JSON,
// each with an identifier of the facilitator's domain, or an error.
func FuzzBazaarPage(f *testing.F) {
	f.Add([]byte(bazaarPage))
	f.Add([]byte(`{"items":[{"resource":"https://a.test","accepts":[{"network":"x","amount":"1"}],"description":"` + strings.Repeat("é", 50) + `"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParseBazaarPage(&web.FetchResult{URL: "https://fac.test/discovery/resources", Status: 200, Body: body})
		if err != nil {
			return
		}
		r, err := BazaarEntries("fac.test", []*BazaarPage{p})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Entries {
			if !strings.HasPrefix(e.Identifier, "urn:air:fac.test:x402:") || len(e.Identifier) <= len("urn:air:fac.test:x402:") {
				t.Fatalf("identifier %q", e.Identifier)
			}
			if _, err := json.Marshal(e); err != nil {
				t.Fatalf("entry does not encode: %v", err)
			}
		}
	})
}
