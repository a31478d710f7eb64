package index_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// payDocs is a small index of priced entries: prices sit exactly on and
// next to the boundaries the tests ask about.
func payDocs() []index.Doc {
	docs := []index.Doc{
		{ID: "urn:air:a.test:free", Name: "free", Description: "weather forecast"},
		{ID: "urn:air:a.test:cent", Name: "cent", Description: "weather forecast", PayProtocols: []string{"x402"}, PayNetworks: []string{"base"}, PayPrices: []string{"0.01"}, PayVerified: true},
		{ID: "urn:air:a.test:cent-plus", Name: "centplus", Description: "weather forecast", PayProtocols: []string{"x402"}, PayNetworks: []string{"base"}, PayPrices: []string{"0.010001"}},
		{ID: "urn:air:a.test:milli", Name: "milli", Description: "weather forecast", PayProtocols: []string{"x402"}, PayNetworks: []string{"solana"}, PayPrices: []string{"0.001"}},
		{ID: "urn:air:a.test:tempo", Name: "tempo", Description: "weather forecast", PayProtocols: []string{"mpp"}, PayNetworks: []string{"tempo"}, PayPrices: []string{"0.02"}},
		{ID: "urn:air:a.test:card", Name: "card", Description: "weather forecast", PayProtocols: []string{"card"}, PayNetworks: []string{"stripe"}, PayPrices: []string{"0.5"}},
		// Payable, price unknown (an asset whose dollar value we do not know).
		{ID: "urn:air:a.test:token", Name: "token", Description: "weather forecast", PayProtocols: []string{"x402"}, PayNetworks: []string{"base"}},
		// One entry, two options.
		{ID: "urn:air:a.test:both", Name: "both", Description: "weather forecast", PayProtocols: []string{"x402", "mpp"}, PayNetworks: []string{"base", "tempo"}, PayPrices: []string{"0.003", "0.004"}},
	}
	for i := range docs {
		docs[i].Publisher = "a.test"
	}
	return docs
}

func TestPaymentFilters(t *testing.T) {
	ix := mustOpenMemory(t)
	docs := payDocs()
	mustPut(t, ix, docs)
	tests := []struct {
		name   string
		filter index.Filter
		want   []string
	}{
		{"free", index.Filter{"pay:protocol": {"free"}}, []string{"free"}},
		{"payable", index.Filter{"pay:protocol": {"payable"}}, []string{"both", "card", "cent", "cent-plus", "milli", "tempo", "token"}},
		{"x402", index.Filter{"pay:protocol": {"x402"}}, []string{"both", "cent", "cent-plus", "milli", "token"}},
		{"mpp", index.Filter{"pay:protocol": {"mpp"}}, []string{"both", "tempo"}},
		{"card", index.Filter{"pay:protocol": {"card"}}, []string{"card"}},
		{"mpp or card", index.Filter{"pay:protocol": {"mpp", "card"}}, []string{"both", "card", "tempo"}},
		{"network base", index.Filter{"pay:network": {"base"}}, []string{"both", "cent", "cent-plus", "token"}},
		{"network solana", index.Filter{"pay:network": {"solana"}}, []string{"milli"}},
		{"network tempo", index.Filter{"pay:network": {"tempo"}}, []string{"both", "tempo"}},
		{"network stripe", index.Filter{"pay:network": {"stripe"}}, []string{"card"}},
		{"verified", index.Filter{"pay:verified": {"live"}}, []string{"cent"}},
		// Exactly at the boundary: 0.01 is included by lte and max, excluded by lt.
		{"max 0.01", index.Filter{"maxPricePerCall": {"0.01"}}, []string{"both", "cent", "free", "milli"}},
		{"max 0.01 written 1e-2", index.Filter{"maxPricePerCall": {"1e-2"}}, []string{"both", "cent", "free", "milli"}},
		{"max just under 0.01", index.Filter{"maxPricePerCall": {"0.009999999999999999"}}, []string{"both", "free", "milli"}},
		{"max 0.010001", index.Filter{"maxPricePerCall": {"0.010001"}}, []string{"both", "cent", "cent-plus", "free", "milli"}},
		{"max with 30 decimals above 0.01", index.Filter{"maxPricePerCall": {"0.010000000000000000000000000001"}}, []string{"both", "cent", "free", "milli"}},
		{"max 0", index.Filter{"maxPricePerCall": {"0"}}, []string{"free"}},
		{"lte 0.01", index.Filter{"pay:price": {"lte:0.01"}}, []string{"both", "cent", "free", "milli"}},
		{"lt 0.01", index.Filter{"pay:price": {"lt:0.01"}}, []string{"both", "free", "milli"}},
		{"gt 0.01", index.Filter{"pay:price": {"gt:0.01"}}, []string{"card", "cent-plus", "tempo"}},
		{"gte 0.01", index.Filter{"pay:price": {"gte:0.01"}}, []string{"card", "cent", "cent-plus", "tempo"}},
		{"eq 0.001", index.Filter{"pay:price": {"eq:0.001"}}, []string{"milli"}},
		{"eq 0.0010", index.Filter{"pay:price": {"eq:0.0010"}}, []string{"milli"}},
		{"eq between", index.Filter{"pay:price": {"eq:0.0010000000000000000001"}}, nil},
		{"range gt 0.003 lte 0.01", index.Filter{"pay:price": {"gt:0.003", "lte:0.01"}}, []string{"both", "cent"}},
		{"range gte 0.0035 lt 0.004", index.Filter{"pay:price": {"gte:0.0035", "lt:0.004"}}, nil},
		{"range empty", index.Filter{"pay:price": {"gt:1", "lt:0.5"}}, nil},
		// Combined keys: AND across keys.
		{"x402 on base at most a cent", index.Filter{"pay:protocol": {"x402"}, "pay:network": {"base"}, "maxPricePerCall": {"0.01"}}, []string{"both", "cent"}},
		{"live and cheap", index.Filter{"pay:verified": {"live"}, "pay:price": {"lte:0.01"}}, []string{"cent"}},
		{"payable and a type filter", index.Filter{"pay:protocol": {"payable"}, "publisher": {"a.test"}, "pay:network": {"solana"}}, []string{"milli"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, text := range []string{"", "weather"} {
				res, err := ix.Search(context.Background(), index.SearchRequest{Text: text, Filter: tc.filter, Size: 100})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, h := range res.Hits {
					got = append(got, h.ID[len("urn:air:a.test:"):])
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("text %q: got %v, want %v", text, got, tc.want)
				}
			}
			// Filter.Matches (for upstream results) agrees with the index.
			var matched []string
			for i := range docs {
				if tc.filter.Matches(&docs[i]) {
					matched = append(matched, docs[i].ID[len("urn:air:a.test:"):])
				}
			}
			slices.Sort(matched)
			if !slices.Equal(matched, tc.want) {
				t.Errorf("Matches: got %v, want %v", matched, tc.want)
			}
		})
	}
}

func TestPaymentFacets(t *testing.T) {
	ix := mustOpenMemory(t)
	mustPut(t, ix, payDocs())
	fs, err := ix.Facets(context.Background(), "", nil, nil, []index.FacetRequest{{Field: "pay:protocol"}, {Field: "pay:network"}, {Field: "pay:verified"}})
	if err != nil {
		t.Fatal(err)
	}
	count := func(field, value string) int {
		for _, b := range fs[field].Buckets {
			if b.Value == value {
				return b.Count
			}
		}
		return 0
	}
	for _, c := range []struct {
		field, value string
		want         int
	}{
		{"pay:protocol", "free", 1}, {"pay:protocol", "payable", 7}, {"pay:protocol", "x402", 5}, {"pay:protocol", "mpp", 2}, {"pay:protocol", "card", 1},
		{"pay:network", "base", 4}, {"pay:network", "tempo", 2}, {"pay:verified", "live", 1},
	} {
		if got := count(c.field, c.value); got != c.want {
			t.Errorf("%s=%s: %d, want %d", c.field, c.value, got, c.want)
		}
	}
	if _, err := ix.Facets(context.Background(), "", nil, nil, []index.FacetRequest{{Field: "pay:price"}}); err == nil {
		t.Error("pay:price is a range key, not a facet; want an error")
	}
}

func TestPriceTerm(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"0", true}, {"0.01", true}, {"1e-18", true}, {"1e-19", false}, {"-1", false}, {"1/3", false}, {"abc", false}, {"1e22", false},
	} {
		if _, ok := index.PriceTerm(c.in); ok != c.ok {
			t.Errorf("PriceTerm(%q) ok = %v, want %v", c.in, ok, c.ok)
		}
	}
	a, _ := index.PriceTerm("0.01")
	b, _ := index.PriceTerm("0.010")
	c, _ := index.PriceTerm("0.009")
	if a != b || !(c < a) {
		t.Errorf("terms do not order as prices: %q %q %q", a, b, c)
	}
}
