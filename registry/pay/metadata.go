package pay

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Metadata keys an ARD entry states its terms under (docs/decisions.md):
//
//   - "x402": an x402 PaymentRequired object ({x402Version, accepts}), or
//     the accepts array alone (v2 amounts unless x402Version says 1).
//   - "payment": one object or an array of objects {protocol (x402, mpp,
//     card), network, price (dollars per call, a decimal string or JSON
//     number read exactly), asset, payTo, scheme, amount}. MPP and card
//     terms are stated here, e.g. {"protocol":"mpp","network":"tempo",
//     "price":"0.01"} or {"protocol":"card","network":"stripe","price":"0.05"}.
const (
	MetaX402    = "x402"
	MetaPayment = "payment"
)

// FromMetadata reads the terms an entry's metadata states. Malformed
// declarations are skipped: they are the publisher's, and an entry is
// indexed without the terms it could not state.
func FromMetadata(meta map[string]json.RawMessage) []Option {
	var out []Option
	if raw, ok := meta[MetaX402]; ok {
		raw = bytes.TrimSpace(raw)
		switch {
		case len(raw) > 0 && raw[0] == '[':
			if opts, err := FromAccepts(2, raw); err == nil {
				out = append(out, opts...)
			}
		case len(raw) > 0 && raw[0] == '{':
			if r, err := parsePaymentRequired(raw); err == nil {
				out = append(out, r.Options...)
			}
		}
	}
	if raw, ok := meta[MetaPayment]; ok {
		raw = bytes.TrimSpace(raw)
		var items []json.RawMessage
		if len(raw) > 0 && raw[0] == '[' {
			_ = json.Unmarshal(raw, &items)
		} else if len(raw) > 0 && raw[0] == '{' {
			items = []json.RawMessage{raw}
		}
		for _, it := range items {
			if o, ok := statedOption(it); ok {
				out = appendOption(out, o)
			}
		}
	}
	if len(out) > MaxOptions {
		out = out[:MaxOptions]
	}
	return out
}

// statedOption reads one "payment" object.
func statedOption(raw json.RawMessage) (Option, bool) {
	var s struct {
		Protocol string          `json:"protocol"`
		Network  string          `json:"network"`
		Price    json.RawMessage `json:"price"`
		Asset    string          `json:"asset"`
		PayTo    string          `json:"payTo"`
		Scheme   string          `json:"scheme"`
		Amount   json.RawMessage `json:"amount"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&s) != nil {
		return Option{}, false
	}
	proto := strings.ToLower(strings.TrimSpace(s.Protocol))
	if proto != ProtocolX402 && proto != ProtocolMPP && proto != ProtocolCard {
		return Option{}, false
	}
	for _, f := range []string{s.Network, s.Asset, s.PayTo, s.Scheme} {
		if len(f) > maxFieldLen {
			return Option{}, false
		}
	}
	o := Option{Protocol: proto, Network: NormaliseNetwork(s.Network), Asset: s.Asset, PayTo: s.PayTo, Scheme: s.Scheme}
	if amount, ok := integerText(s.Amount); ok {
		o.Amount = amount
		if d, ok := usdDecimals(o.Network, o.Asset, nil); ok {
			o.Price = BaseUnitsToDecimal(amount, d)
		}
	}
	if p := bytes.TrimSpace(s.Price); len(p) > 0 && string(p) != "null" {
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
