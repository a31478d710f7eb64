package pay

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// ARD metadata values are scalars, so an entry states its terms as flat
// keys (docs/decisions.md): "pay.protocol" (x402, mpp or card),
// "pay.network", "pay.price" (dollars per call: a decimal string or a JSON
// number, read exactly), "pay.asset", "pay.payTo", "pay.scheme" and
// "pay.amount" (base units) for one option, and the same keys under
// "pay.2.", "pay.3.", ... up to MaxOptions for more. For example
// {"pay.protocol":"mpp","pay.network":"tempo","pay.price":"0.01"}, or an
// x402 option exactly as its 402 states it: {"pay.protocol":"x402",
// "pay.scheme":"exact","pay.network":"eip155:8453","pay.asset":"0x8335…",
// "pay.amount":"1000","pay.payTo":"0x…"}.
const MetaPrefix = "pay."

var metaFields = []string{"protocol", "network", "price", "asset", "payTo", "scheme", "amount"}

// FromMetadata reads the terms an entry's metadata states. Malformed
// options are skipped: they are the publisher's, and an entry is indexed
// without the terms it could not state.
func FromMetadata(meta map[string]json.RawMessage) []Option {
	var out []Option
	for n := 1; n <= MaxOptions; n++ {
		prefix := MetaPrefix
		if n > 1 {
			prefix += strconv.Itoa(n) + "."
		}
		fields := map[string]json.RawMessage{}
		for _, f := range metaFields {
			if v, ok := meta[prefix+f]; ok {
				fields[f] = v
			}
		}
		if len(fields) == 0 {
			if n > 1 {
				break
			}
			continue
		}
		if o, ok := statedOption(fields); ok {
			out = appendOption(out, o)
		}
	}
	return out
}

// statedOption reads one option's fields.
func statedOption(f map[string]json.RawMessage) (Option, bool) {
	str := func(k string) (string, bool) {
		raw, ok := f[k]
		if !ok {
			return "", true
		}
		var s string
		if json.Unmarshal(raw, &s) != nil || len(s) > maxFieldLen {
			return "", false
		}
		return strings.TrimSpace(s), true
	}
	proto, ok1 := str("protocol")
	network, ok2 := str("network")
	asset, ok3 := str("asset")
	payTo, ok4 := str("payTo")
	scheme, ok5 := str("scheme")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return Option{}, false
	}
	proto = strings.ToLower(proto)
	if proto != ProtocolX402 && proto != ProtocolMPP && proto != ProtocolCard {
		return Option{}, false
	}
	o := Option{Protocol: proto, Network: NormaliseNetwork(network), Asset: asset, PayTo: payTo, Scheme: scheme}
	if raw, ok := f["amount"]; ok {
		amount, ok := integerText(raw)
		if !ok {
			return Option{}, false
		}
		o.Amount = amount
		if d, ok := usdDecimals(o.Network, o.Asset, nil); ok {
			o.Price = BaseUnitsToDecimal(amount, d)
		}
	}
	if p := bytes.TrimSpace(f["price"]); len(p) > 0 && string(p) != "null" {
		text := string(p)
		if p[0] == '"' && json.Unmarshal(p, &text) != nil {
			return Option{}, false
		}
		d, err := ParseDecimal(text)
		if err != nil {
			return Option{}, false
		}
		o.Price = d
	}
	if o.Network == "" && o.Price == "" {
		return Option{}, false // states nothing a filter could use
	}
	return o, true
}
