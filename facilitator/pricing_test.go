package facilitator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/facilitator"
)

// fakeNetwork is a network for price rules: only its names matter.
type fakeNetwork struct {
	facilitator.NetworkFacts
	id, v1  string
	testnet bool
}

func (f fakeNetwork) ID() string     { return f.id }
func (f fakeNetwork) V1Name() string { return f.v1 }
func (f fakeNetwork) Testnet() bool  { return f.testnet }

func TestParseSettlementPrices(t *testing.T) {
	nets := []facilitator.NetworkFacts{
		fakeNetwork{id: "eip155:8453", v1: "base"},
		fakeNetwork{id: "eip155:84532", v1: "base-sepolia", testnet: true},
		fakeNetwork{id: "eip155:1337", v1: "dev"},
	}
	tests := []struct {
		name    string
		values  []string
		want    []string // priceUsd per network, in order
		wantErr string
	}{
		{name: "defaults", want: []string{"0.001", "0", "0"}},
		{name: "by CAIP-2 id", values: []string{"eip155:8453=0.0025"}, want: []string{"0.0025", "0", "0"}},
		{name: "by v1 name, trailing zeros", values: []string{"base=0.010"}, want: []string{"0.01", "0", "0"}},
		{name: "mainnet free", values: []string{"base=0"}, want: []string{"0", "0", "0"}},
		{name: "testnet zero is fine", values: []string{"base-sepolia=0"}, want: []string{"0.001", "0", "0"}},
		{name: "testnet priced", values: []string{"base-sepolia=0.01"}, wantErr: "free"},
		{name: "dev priced", values: []string{"dev=1"}, wantErr: "free"},
		{name: "unknown network", values: []string{"eip155:1=0.01"}, wantErr: "not served"},
		{name: "not a pair", values: []string{"base"}, wantErr: "NETWORK=USD"},
		{name: "negative", values: []string{"base=-1"}, wantErr: "non-negative"},
		{name: "too precise", values: []string{"base=0.0000001"}, wantErr: "6 decimals"},
		{name: "exponent", values: []string{"base=1e-3"}, wantErr: "non-negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := facilitator.ParseSettlementPrices(tc.values, nets)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range got {
				if p.PriceUSD != tc.want[i] || p.Free != (tc.want[i] == "0") {
					t.Errorf("%s: %+v, want %s", p.Network, p, tc.want[i])
				}
			}
		})
	}
}

func TestPricingEndpoints(t *testing.T) {
	env := newTestEnv(t)
	a := do(t, "GET", env.URL+"/pricing", nil, nil)
	var p facilitator.PricingResponse
	a.decode(t, &p)
	if a.Status != 200 || p.Currency != "USD" || len(p.Networks) != 1 {
		t.Fatalf("status %d body %s", a.Status, a.Body)
	}
	if n := p.Networks[0]; n.Network != env.Net.ID() || !n.Free || n.PriceUSD != "0" || !n.Testnet {
		t.Errorf("dev network price %+v", n)
	}
	md := do(t, "GET", env.URL+"/pricing.md", nil, nil)
	if md.Status != 200 || !strings.HasPrefix(md.Header.Get("Content-Type"), "text/markdown") {
		t.Fatalf("pricing.md: %d %q", md.Status, md.Header.Get("Content-Type"))
	}
	if !strings.Contains(string(md.Body), "| eip155:1337 | dev | yes | 0 (free) |") || json.Valid(md.Body) {
		t.Errorf("pricing.md body:\n%s", md.Body)
	}
}
