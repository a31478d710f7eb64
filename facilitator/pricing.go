package facilitator

import (
	"fmt"
	"math/big"
	"net/http"
	"strings"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/web"
)

// DefaultMainnetSettlementPriceUSD is what a settlement on a mainnet costs
// unless --settlement-price says otherwise: a tenth of a cent, about the gas
// of one Base transfer. Testnets and the dev chain are always free.
const DefaultMainnetSettlementPriceUSD = "0.001"

// NetworkPrice is the price of one settlement on one network.
type NetworkPrice struct {
	Network   string `json:"network"`
	V1Network string `json:"v1Network,omitempty"`
	Testnet   bool   `json:"testnet"`
	// PriceUSD is a decimal string of US dollars; "0" when free.
	PriceUSD string `json:"priceUsd"`
	Free     bool   `json:"free"`
}

// freeNetwork reports whether settlements on n are free by rule: known
// testnets and local development chains (1337, 31337).
func freeNetwork(n NetworkFacts) bool {
	if t, ok := n.(interface{ Testnet() bool }); ok && t.Testnet() {
		return true
	}
	id, ok := evm.ChainIDOf(n.ID())
	if !ok {
		return false
	}
	for _, k := range evm.KnownNetworks {
		if k.ChainID == id.Int64() {
			return k.Testnet
		}
	}
	return id.Int64() == evm.DevChainID || id.Int64() == 31337
}

// ParseSettlementPrices turns --settlement-price NETWORK=USD values into the
// price list of networks, in their order. NETWORK is a CAIP-2 id or v1
// name; USD a non-negative decimal with at most 6 decimals. Mainnets
// without a value cost DefaultMainnetSettlementPriceUSD; a non-zero price on
// a testnet or dev chain, or a network not served, is an error.
func ParseSettlementPrices(values []string, networks []NetworkFacts) ([]NetworkPrice, error) {
	given := map[string]string{}
	for _, v := range values {
		name, usd, ok := strings.Cut(strings.TrimSpace(v), "=")
		if !ok || name == "" || usd == "" {
			return nil, fmt.Errorf("--settlement-price %q: want NETWORK=USD, e.g. eip155:8453=0.001", v)
		}
		norm, err := normaliseUSD(usd)
		if err != nil {
			return nil, fmt.Errorf("--settlement-price %q: %w", v, err)
		}
		var match NetworkFacts
		for _, n := range networks {
			if n.ID() == name || (n.V1Name() != "" && n.V1Name() == name) {
				match = n
			}
		}
		if match == nil {
			return nil, fmt.Errorf("--settlement-price %q: network %s is not served (--network)", v, name)
		}
		if freeNetwork(match) && norm != "0" {
			return nil, fmt.Errorf("--settlement-price %q: settlements on testnets and dev chains are free", v)
		}
		given[match.ID()] = norm
	}
	out := make([]NetworkPrice, 0, len(networks))
	for _, n := range networks {
		p := NetworkPrice{Network: n.ID(), V1Network: n.V1Name(), Testnet: freeNetwork(n), PriceUSD: "0"}
		if !p.Testnet {
			p.PriceUSD = DefaultMainnetSettlementPriceUSD
			if v, ok := given[n.ID()]; ok {
				p.PriceUSD = v
			}
		}
		p.Free = p.PriceUSD == "0"
		out = append(out, p)
	}
	return out, nil
}

// normaliseUSD checks a dollar amount and writes it without trailing zeros.
func normaliseUSD(s string) (string, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() < 0 || strings.ContainsAny(s, "eE/") {
		return "", fmt.Errorf("%q is not a non-negative decimal number of dollars", s)
	}
	micro := new(big.Rat).Mul(r, big.NewRat(1_000_000, 1))
	if !micro.IsInt() {
		return "", fmt.Errorf("%q has more than 6 decimals", s)
	}
	out := strings.TrimRight(strings.TrimRight(r.FloatString(6), "0"), ".")
	if out == "" {
		out = "0"
	}
	return out, nil
}

// PricingResponse is the body of GET /pricing.
type PricingResponse struct {
	Currency string         `json:"currency"`
	Unit     string         `json:"unit"`
	Verify   string         `json:"verifyPriceUsd"`
	Networks []NetworkPrice `json:"networks"`
	Notes    []string       `json:"notes"`
}

var pricingNotes = []string{
	"The price is per successful settlement (POST /settle with success true); POST /verify is free.",
	"Nobody is charged for failures the facilitator causes (transaction_failed, service_unavailable).",
	"Settlements on testnets and development chains are free.",
	"Replays of a settled body return the recorded outcome and cost nothing again.",
}

func (s *Service) pricing() PricingResponse {
	prices := s.cfg.Prices
	if prices == nil {
		prices, _ = ParseSettlementPrices(nil, s.cfg.Networks)
	}
	return PricingResponse{Currency: "USD", Unit: "settlement", Verify: "0", Networks: prices, Notes: pricingNotes}
}

// handlePricing handles "GET /pricing".
func (s *Service) handlePricing(w http.ResponseWriter, r *http.Request) {
	web.WriteJSON(w, http.StatusOK, s.pricing())
}

// handlePricingMarkdown handles "GET /pricing.md".
func (s *Service) handlePricingMarkdown(w http.ResponseWriter, r *http.Request) {
	p := s.pricing()
	var b strings.Builder
	fmt.Fprintf(&b, "# Settlement pricing\n\nFacilitator: %s\n\n", s.cfg.PublicURL)
	b.WriteString("| Network | v1 name | Testnet | Price per settlement (USD) |\n|---|---|---|---|\n")
	for _, n := range p.Networks {
		v1 := n.V1Network
		if v1 == "" {
			v1 = "-"
		}
		price := n.PriceUSD
		if n.Free {
			price = "0 (free)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", n.Network, v1, yesNo(n.Testnet), price)
	}
	b.WriteString("\n")
	for _, note := range p.Notes {
		fmt.Fprintf(&b, "- %s\n", note)
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
