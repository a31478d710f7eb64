package index

// Payment fields (issue 18): what an entry costs per call and how it is
// paid, as filter keys and facets. The fields and the filter semantics
// live here so the rest of the index stays as it was.

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/blevesearch/bleve/v2/search/query"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// Payment filter keys and fields. pay:protocol, pay:network and
// pay:verified are keyword fields (filter keys and facets); pay:price holds
// each option's price per call as a fixed-width integer of 10^-18 dollars,
// so that a term range compares prices exactly; maxPricePerCall is a
// filter key over that same field.
const (
	FieldPayProtocol = "pay:protocol"
	FieldPayNetwork  = "pay:network"
	FieldPayVerified = "pay:verified"
	FieldPayPrice    = "pay:price"
	KeyMaxPrice      = "maxPricePerCall"
)

// Values of the payment keyword fields.
const (
	PayFree    = "free"    // no payment option is known: callable without paying
	PayPayable = "payable" // at least one payment option
	PayLive    = "live"    // pay:verified: our probe saw the stated terms in a 402 recently
)

// payKeywordFields are the payment fields that filter and facet by value.
var payKeywordFields = []string{FieldPayProtocol, FieldPayNetwork, FieldPayVerified}

// Price encoding: dollars × 10^priceScale as an integer, zero-padded to
// priceWidth digits. 18 decimals hold any USDC (6) or USD (2) price; a
// price with more places, or of 10^22 dollars and more, is not indexed.
const (
	priceScale = 18
	priceWidth = 40
)

var (
	priceUnit = new(big.Int).Exp(big.NewInt(10), big.NewInt(priceScale), nil)
	priceMax  = new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(priceWidth), nil), big.NewInt(1))
)

// PriceTerm encodes an exact decimal number of dollars as pay:price holds
// it; ok is false when it is not a non-negative decimal with at most 18
// places below the cap.
func PriceTerm(dollars string) (string, bool) {
	r, ok := parseDollars(dollars)
	if !ok {
		return "", false
	}
	n := new(big.Rat).Mul(r, new(big.Rat).SetInt(priceUnit))
	if !n.IsInt() || n.Num().Cmp(priceMax) > 0 {
		return "", false
	}
	return encodePrice(n.Num()), true
}

func encodePrice(n *big.Int) string {
	s := n.String()
	return strings.Repeat("0", priceWidth-len(s)) + s
}

// parseDollars reads a non-negative decimal (never through a float).
func parseDollars(s string) (*big.Rat, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 || strings.ContainsAny(s, "/xXpP") {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() < 0 {
		return nil, false
	}
	return r, true
}

// Price comparison operators of pay:price; a filter value is "op:decimal"
// (the registry writes {"lte": 0.01} as "lte:0.01"), and the values of one
// pay:price key are the bounds of one range (AND). maxPricePerCall's
// values are decimals, each meaning lte (several: the smallest bounds).
var priceOps = []string{"lt", "lte", "gt", "gte", "eq"}

// PriceOp reports whether op is a pay:price comparison operator.
func PriceOp(op string) bool {
	for _, o := range priceOps {
		if o == op {
			return true
		}
	}
	return false
}

// priceBounds turns the filter values of key into an inclusive range of
// encoded integers; empty is true when no price can satisfy them.
func priceBounds(key string, values []string) (lo, hi *big.Int, empty bool, err error) {
	lo, hi = new(big.Int), new(big.Int).Set(priceMax)
	for _, v := range values {
		op, num := "lte", v
		if key == FieldPayPrice {
			var ok bool
			if op, num, ok = strings.Cut(v, ":"); !ok || !PriceOp(op) {
				return nil, nil, false, fmt.Errorf("%w: %s value %q is not op:decimal", ErrUnknownFilterKey, key, v)
			}
		}
		r, ok := parseDollars(num)
		if !ok {
			return nil, nil, false, fmt.Errorf("%w: %s value %q is not a non-negative decimal", ErrUnknownFilterKey, key, v)
		}
		scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(priceUnit))
		floor := new(big.Int).Quo(scaled.Num(), scaled.Denom())
		ceil := new(big.Int).Set(floor)
		if !scaled.IsInt() {
			ceil.Add(ceil, big.NewInt(1))
		}
		// Indexed prices are integers, so each bound becomes an inclusive
		// integer bound without losing exactness.
		switch op {
		case "lte":
			hi = minInt(hi, floor)
		case "lt":
			hi = minInt(hi, new(big.Int).Sub(ceil, big.NewInt(1)))
		case "gte":
			lo = maxInt(lo, ceil)
		case "gt":
			lo = maxInt(lo, new(big.Int).Add(floor, big.NewInt(1)))
		case "eq":
			if !scaled.IsInt() {
				return lo, hi, true, nil
			}
			lo, hi = maxInt(lo, floor), minInt(hi, floor)
		}
	}
	return lo, hi, lo.Cmp(hi) > 0 || hi.Sign() < 0, nil
}

func minInt(a, b *big.Int) *big.Int {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

func maxInt(a, b *big.Int) *big.Int {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}

// priceQuery matches docs with a price inside the bounds of key's values.
func priceQuery(key string, values []string) (query.Query, error) {
	lo, hi, empty, err := priceBounds(key, values)
	if err != nil {
		return nil, err
	}
	if empty {
		return query.NewMatchNoneQuery(), nil
	}
	if hi.Cmp(priceMax) > 0 {
		hi = priceMax
	}
	t := true
	q := query.NewTermRangeInclusiveQuery(encodePrice(lo), encodePrice(hi), &t, &t)
	q.SetField(FieldPayPrice)
	return q, nil
}

// isPriceKey reports the keys compared as prices.
func isPriceKey(k string) bool { return k == FieldPayPrice || k == KeyMaxPrice }

// payDocument adds d's payment fields to doc: every doc says free or
// payable, so the protocol filter and facet cover the whole index; a free
// doc costs 0 per call for the price filters.
func payDocument(d *Doc, kw func(string, bleveindex.FieldIndexingOptions, ...string)) {
	protocols := []string{PayFree}
	prices := []string{"0"}
	if len(d.PayProtocols) > 0 {
		protocols = append([]string{PayPayable}, d.PayProtocols...)
		prices = d.PayPrices
	}
	kw(FieldPayProtocol, keywordOptions, protocols...)
	kw(FieldPayNetwork, keywordOptions, d.PayNetworks...)
	if d.PayVerified {
		kw(FieldPayVerified, keywordOptions, PayLive)
	}
	var terms []string
	for _, p := range prices {
		if t, ok := PriceTerm(p); ok {
			terms = append(terms, t)
		}
	}
	kw(FieldPayPrice, filterOptions, terms...)
}

// payMatches is Filter.Matches for the payment keys; handled is false for
// other keys.
func payMatches(k string, vals []string, d *Doc) (match, handled bool) {
	switch k {
	case FieldPayProtocol:
		have := []string{PayFree}
		if len(d.PayProtocols) > 0 {
			have = append([]string{PayPayable}, d.PayProtocols...)
		}
		return anyValueMatches(k, vals, have), true
	case FieldPayNetwork:
		return anyValueMatches(k, vals, d.PayNetworks), true
	case FieldPayVerified:
		var have []string
		if d.PayVerified {
			have = []string{PayLive}
		}
		return anyValueMatches(k, vals, have), true
	case FieldPayPrice, KeyMaxPrice:
		lo, hi, empty, err := priceBounds(k, vals)
		if err != nil || empty {
			return false, true
		}
		prices := d.PayPrices
		if len(d.PayProtocols) == 0 {
			prices = []string{"0"}
		}
		for _, p := range prices {
			r, ok := parseDollars(p)
			if !ok {
				continue
			}
			n := new(big.Rat).Mul(r, new(big.Rat).SetInt(priceUnit))
			if n.IsInt() && n.Num().Cmp(lo) >= 0 && n.Num().Cmp(hi) <= 0 {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}
