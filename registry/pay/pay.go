// Package pay owns the payment terms of registry entries: reading them from
// what publishers already publish (an x402 402 answer, a facilitator's bazaar
// catalogue item, an ARD entry's metadata, MPP and card terms a publisher
// states) and normalising them to one shape the index filters on: protocol,
// network, asset, price per call in dollars as an exact decimal, payTo. It
// knows nothing of HTTP handlers or the index.
package pay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
)

// Protocols an option can name. "free" and "payable" are filter values,
// not protocols of an option: an entry with no option is free, one with
// any option is payable.
const (
	ProtocolX402 = "x402"
	ProtocolMPP  = "mpp"
	ProtocolCard = "card"
)

// HeaderPaymentRequired is the x402 v2 header carrying the terms of a 402.
const HeaderPaymentRequired = "PAYMENT-REQUIRED"

// Bounds on what one source may declare, so a hostile catalogue or 402
// cannot make an entry's terms large.
const (
	MaxOptions     = 16
	maxFieldLen    = 256
	maxHeaderBytes = 64 << 10
)

// Option is one way to pay for one call, normalised.
type Option struct {
	Protocol string `json:"protocol"`          // x402, mpp or card
	Scheme   string `json:"scheme,omitempty"`  // x402: "exact", ...
	Network  string `json:"network,omitempty"` // normalised: base, base-sepolia, solana, tempo, stripe, ...
	Asset    string `json:"asset,omitempty"`   // token contract, mint, or ISO 4217 currency
	Amount   string `json:"amount,omitempty"`  // x402: the amount in the asset's smallest unit, as published
	// Price is dollars per call as an exact decimal ("0.001"); empty when
	// the asset is not one whose dollar value is known (not USDC or USD).
	Price string `json:"price,omitempty"`
	PayTo string `json:"payTo,omitempty"`
}

// Fingerprint identifies the terms an option states: two sources agree on
// an option when their fingerprints are equal. Addresses compare without
// case (EVM checksums are a spelling); amounts compare as published base
// units, so "1000" and "01000" differ only if a publisher writes them so.
func (o Option) Fingerprint() string {
	amount := o.Amount
	if amount == "" {
		amount = "$" + o.Price
	}
	return strings.Join([]string{o.Protocol, strings.ToLower(o.Scheme), o.Network,
		strings.ToLower(o.Asset), amount, strings.ToLower(o.PayTo)}, "|")
}

// ErrNoTerms means a response or document carried no payment terms this
// package can read.
var ErrNoTerms = errors.New("pay: no payment terms")

// Required is what a 402 answer states.
type Required struct {
	X402Version int
	Resource    string // v2 resource.url, or v1 accepts[0].resource
	Options     []Option
}

// ParseRequired reads the terms of an HTTP 402 answer: the v2
// PAYMENT-REQUIRED header (base64 of the PaymentRequired JSON) when present,
// else the v1 JSON body {x402Version, accepts}. A status other than 402 has
// no terms.
func ParseRequired(status int, h http.Header, body []byte) (Required, error) {
	if status != http.StatusPaymentRequired {
		return Required{}, fmt.Errorf("%w: HTTP %d is not 402", ErrNoTerms, status)
	}
	if v := strings.TrimSpace(h.Get(HeaderPaymentRequired)); v != "" {
		if len(v) > maxHeaderBytes {
			return Required{}, fmt.Errorf("%w: the %s header is over %d bytes", ErrNoTerms, HeaderPaymentRequired, maxHeaderBytes)
		}
		raw, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			if raw, err = base64.RawStdEncoding.DecodeString(v); err != nil {
				return Required{}, fmt.Errorf("%w: the %s header is not base64", ErrNoTerms, HeaderPaymentRequired)
			}
		}
		return parsePaymentRequired(raw)
	}
	return parsePaymentRequired(body)
}

// paymentRequired is the x402 PaymentRequired object of both versions.
type paymentRequired struct {
	X402Version int             `json:"x402Version"`
	Resource    json.RawMessage `json:"resource"`
	Accepts     json.RawMessage `json:"accepts"`
}

func parsePaymentRequired(raw []byte) (Required, error) {
	var pr paymentRequired
	if err := json.Unmarshal(raw, &pr); err != nil {
		return Required{}, fmt.Errorf("%w: not a PaymentRequired object: %v", ErrNoTerms, err)
	}
	version := pr.X402Version
	if version == 0 {
		version = 1 // v1 servers predating the member
	}
	opts, err := FromAccepts(version, pr.Accepts)
	if err != nil {
		return Required{}, err
	}
	r := Required{X402Version: version, Options: opts}
	var res struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(pr.Resource, &res) == nil && res.URL != "" {
		r.Resource = res.URL
	} else {
		var first []struct {
			Resource string `json:"resource"`
		}
		if json.Unmarshal(pr.Accepts, &first) == nil && len(first) > 0 {
			r.Resource = first[0].Resource
		}
	}
	return r, nil
}

// requirement is one x402 PaymentRequirements object, either version.
type requirement struct {
	Scheme            string          `json:"scheme"`
	Network           string          `json:"network"`
	Amount            json.RawMessage `json:"amount"`
	MaxAmountRequired json.RawMessage `json:"maxAmountRequired"`
	Asset             string          `json:"asset"`
	PayTo             string          `json:"payTo"`
	Extra             json.RawMessage `json:"extra"`
}

// FromAccepts normalises an x402 accepts array (v2 amount, v1
// maxAmountRequired). Requirements without a network or an amount that is
// a non-negative integer are skipped; none left is ErrNoTerms.
func FromAccepts(version int, raw json.RawMessage) ([]Option, error) {
	var reqs []requirement
	if err := json.Unmarshal(raw, &reqs); err != nil {
		return nil, fmt.Errorf("%w: accepts is not an array of requirements: %v", ErrNoTerms, err)
	}
	var out []Option
	for _, r := range reqs {
		amountRaw := r.Amount
		if version == 1 || len(amountRaw) == 0 {
			amountRaw = r.MaxAmountRequired
		}
		amount, ok := integerText(amountRaw)
		if !ok || r.Network == "" || len(r.Network) > maxFieldLen || len(r.Asset) > maxFieldLen || len(r.PayTo) > maxFieldLen || len(r.Scheme) > maxFieldLen {
			continue
		}
		o := Option{Protocol: ProtocolX402, Scheme: r.Scheme, Network: NormaliseNetwork(r.Network), Asset: r.Asset, Amount: amount, PayTo: r.PayTo}
		if d, ok := usdDecimals(o.Network, o.Asset, r.Extra); ok {
			o.Price = BaseUnitsToDecimal(amount, d)
		}
		out = appendOption(out, o)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no usable requirement in accepts", ErrNoTerms)
	}
	return out, nil
}

func appendOption(out []Option, o Option) []Option {
	if len(out) >= MaxOptions || slices.ContainsFunc(out, func(p Option) bool { return p.Fingerprint() == o.Fingerprint() }) {
		return out
	}
	return append(out, o)
}

// integerText reads a non-negative integer written as a JSON string or a
// bare JSON integer, keeping its digits (never through a float).
func integerText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	s := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
	}
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 78 { // uint256 has at most 78 digits
		return "", false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	n, _ := new(big.Int).SetString(s, 10)
	return n.String(), true
}

// Networks by CAIP-2 id or x402 v1 name, normalised to the names the
// pay:network filter takes. Anything else keeps its lower-cased name.
var networkNames = map[string]string{
	"eip155:8453": "base", "base": "base",
	"eip155:84532": "base-sepolia", "base-sepolia": "base-sepolia",
	"solana:5eykt4usfv8p8njdtrepy1vzqkqzkvdp": "solana", "solana": "solana", "solana-mainnet": "solana",
	"solana:etwtrabzayq6imfeykourru166vu2xqa1": "solana-devnet", "solana-devnet": "solana-devnet",
	"tempo": "tempo", "eip155:1337": "dev", "dev": "dev",
	"stripe": "stripe",
}

// NormaliseNetwork maps a CAIP-2 id or v1 name to the filter's network
// name (base, base-sepolia, solana, solana-devnet, tempo, stripe, dev);
// others are lower-cased as given.
func NormaliseNetwork(n string) string {
	n = strings.ToLower(strings.TrimSpace(n))
	if v, ok := networkNames[n]; ok {
		return v
	}
	if strings.HasPrefix(n, "tempo:") {
		return "tempo"
	}
	return n
}

// usdcByNetwork is USDC's contract (or mint) on each network whose dollar
// price we know: 6 decimals, one token one dollar.
var usdcByNetwork = map[string]string{
	"base":          "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
	"base-sepolia":  "0x036cbd53842c5426634e7929541ec2318f3dcf7e",
	"solana":        "epjfwdd5aufqssqem2qn1xzybapc8g4weggkzwytdt1v",
	"solana-devnet": "4zmmc9srt5ri5x14gagxhahii3gnpaeerypjgzjdncdu",
}

// testNetworks carry test money: there a token whose EIP-712 name says
// USDC is priced as USDC (the dev chain's token has no fixed address).
var testNetworks = map[string]bool{"base-sepolia": true, "solana-devnet": true, "dev": true, "eip155:31337": true}

// usdDecimals reports the decimals of asset when it is worth one dollar a
// token: USDC at its known address, ISO "USD" (cents), or on a test
// network a token named USDC.
func usdDecimals(network, asset string, extra json.RawMessage) (int, bool) {
	a := strings.ToLower(strings.TrimSpace(asset))
	if a == "" {
		return 0, false
	}
	if a == "usd" {
		return 2, true
	}
	if want, ok := usdcByNetwork[network]; ok && strings.EqualFold(want, a) {
		return 6, true
	}
	if testNetworks[network] {
		var e struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(extra, &e) == nil && (e.Name == "USDC" || e.Name == "USD Coin") {
			return 6, true
		}
	}
	return 0, false
}

// BaseUnitsToDecimal writes amount/10^decimals as an exact decimal without
// trailing zeros ("1000", 6 -> "0.001").
func BaseUnitsToDecimal(amount string, decimals int) string {
	n, ok := new(big.Int).SetString(amount, 10)
	if !ok || n.Sign() < 0 {
		return ""
	}
	s := n.String()
	if decimals <= 0 {
		return s
	}
	if len(s) <= decimals {
		s = strings.Repeat("0", decimals-len(s)+1) + s
	}
	whole, frac := s[:len(s)-decimals], strings.TrimRight(s[len(s)-decimals:], "0")
	if frac == "" {
		return whole
	}
	return whole + "." + frac
}

// ParseDecimal reads a non-negative decimal number of dollars exactly: a
// JSON number's text or a string such as "0.001", "1e-3" or "$0.01". It
// returns the canonical decimal (no exponent, no trailing zeros).
func ParseDecimal(s string) (string, error) {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "$"))
	if s == "" || len(s) > 64 {
		return "", errors.New("not a decimal number of at most 64 characters")
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || strings.ContainsAny(s, "/xXpP") {
		return "", fmt.Errorf("%q is not a decimal number", s)
	}
	if r.Sign() < 0 {
		return "", fmt.Errorf("%q is negative", s)
	}
	// A decimal always has a terminating expansion: at most as many
	// fractional digits as the denominator's power of ten.
	d := r.Denom()
	prec := 0
	for t := new(big.Int).Set(d); t.Cmp(big.NewInt(1)) > 0; prec++ {
		if prec > 40 {
			return "", fmt.Errorf("%q has more than 40 decimal places", s)
		}
		q, m := new(big.Int).QuoRem(t, big.NewInt(10), new(big.Int))
		if m.Sign() != 0 {
			// Not a power of ten: divide out 2s and 5s.
			if new(big.Int).Rem(t, big.NewInt(2)).Sign() == 0 {
				t.Quo(t, big.NewInt(2))
				continue
			}
			if new(big.Int).Rem(t, big.NewInt(5)).Sign() == 0 {
				t.Quo(t, big.NewInt(5))
				continue
			}
			return "", fmt.Errorf("%q is not a decimal", s)
		}
		t.Set(q)
	}
	out := r.FloatString(prec)
	if strings.Contains(out, ".") {
		out = strings.TrimSuffix(strings.TrimRight(out, "0"), ".")
	}
	return out, nil
}

// OptionFromFingerprint reads back the option a fingerprint states (the
// probe records fingerprints). The price is known for USDC at its known
// address and for USD, as in FromAccepts.
func OptionFromFingerprint(fp string) (Option, bool) {
	parts := strings.Split(fp, "|")
	if len(parts) != 6 || parts[0] == "" {
		return Option{}, false
	}
	o := Option{Protocol: parts[0], Scheme: parts[1], Network: parts[2], Asset: parts[3], PayTo: parts[5]}
	if p, ok := strings.CutPrefix(parts[4], "$"); ok {
		o.Price = p
	} else {
		o.Amount = parts[4]
		if d, ok := usdDecimals(o.Network, o.Asset, nil); ok {
			o.Price = BaseUnitsToDecimal(o.Amount, d)
		}
	}
	return o, true
}

// SatisfiedBy reports whether the observed option (from a 402) grants
// what the claimed option states: the same protocol and network, the same
// scheme, asset and payTo where the claim names them (addresses without
// case), and the same amount in base units, or where the claim gives only
// a price, the same price.
func (c Option) SatisfiedBy(o Option) bool {
	same := func(claim, seen string) bool { return claim == "" || strings.EqualFold(claim, seen) }
	if c.Protocol != o.Protocol || c.Network != o.Network || !same(c.Scheme, o.Scheme) || !same(c.Asset, o.Asset) || !same(c.PayTo, o.PayTo) {
		return false
	}
	switch {
	case c.Amount != "":
		return c.Amount == o.Amount
	case c.Price != "":
		return c.Price == o.Price
	}
	return true
}
