package registry

// The payment filter keys of POST /search and /explore (issue 18):
// pay:protocol, pay:network, pay:verified, maxPricePerCall and pay:price.
// They are decoded here into index.Filter values in a canonical form
// (normalised network names, exact decimals), so page tokens and caches
// see one spelling per meaning.

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/registry/pay"
)

// payProtocolValues are the values pay:protocol takes.
var payProtocolValues = []string{index.PayFree, index.PayPayable, pay.ProtocolX402, pay.ProtocolMPP, pay.ProtocolCard}

// isPayKey reports the payment filter keys.
func isPayKey(k string) bool {
	switch k {
	case index.FieldPayProtocol, index.FieldPayNetwork, index.FieldPayVerified, index.FieldPayPrice, index.KeyMaxPrice:
		return true
	}
	return false
}

// parsePayFilter decodes one payment filter key; ok is false when it added
// an error.
func parsePayFilter(k string, raw json.RawMessage, field string, fe *fieldErrors) ([]string, bool) {
	switch k {
	case index.KeyMaxPrice:
		d, ok := rawDecimal(raw)
		if !ok {
			fe.add(field, "must be a non-negative number of dollars per call (a JSON number or a decimal string such as \"0.01\")")
			return nil, false
		}
		return []string{d}, true
	case index.FieldPayPrice:
		m, ok := rawObject(raw)
		if !ok || len(m) == 0 {
			fe.add(field, `must be a comparison object such as {"lte": 0.01} (operators lt, lte, gt, gte, eq)`)
			return nil, false
		}
		ops := make([]string, 0, len(m))
		for op := range m {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		var out []string
		for _, op := range ops {
			if !index.PriceOp(op) {
				fe.add(field+"."+op, "is not a comparison operator (lt, lte, gt, gte, eq)")
				return nil, false
			}
			d, ok := rawDecimal(m[op])
			if !ok {
				fe.add(field+"."+op, "must be a non-negative number of dollars per call")
				return nil, false
			}
			out = append(out, op+":"+d)
		}
		return out, true
	}
	vals, ok := stringValues(raw)
	if !ok || len(vals) == 0 || len(vals) > maxFilterValues {
		fe.add(field, "must be a string or an array of 1 to "+itoa(maxFilterValues)+" strings")
		return nil, false
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		v = strings.ToLower(strings.TrimSpace(v))
		switch k {
		case index.FieldPayProtocol:
			if !slices.Contains(payProtocolValues, v) {
				fe.add(field, "values must be among "+strings.Join(payProtocolValues, ", "))
				return nil, false
			}
		case index.FieldPayVerified:
			if v != index.PayLive {
				fe.add(field, `the one value is "live"`)
				return nil, false
			}
		case index.FieldPayNetwork:
			if v == "" || len(v) > 64 || strings.Trim(v, "abcdefghijklmnopqrstuvwxyz0123456789-:_") != "" {
				fe.add(field, "values must be network names such as base, solana, tempo, stripe (or a CAIP-2 id)")
				return nil, false
			}
			v = pay.NormaliseNetwork(v)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, true
}

// rawDecimal reads a JSON number (its text, never a float) or a decimal
// string as an exact canonical decimal.
func rawDecimal(raw json.RawMessage) (string, bool) {
	text := strings.TrimSpace(string(raw))
	if s, ok := rawString(raw); ok {
		text = s
	} else if text == "" || text[0] == '{' || text[0] == '[' || text[0] == 'n' || text[0] == 't' || text[0] == 'f' {
		return "", false
	}
	d, err := pay.ParseDecimal(text)
	return d, err == nil
}

// stringValues reads a string or an array of strings.
func stringValues(raw json.RawMessage) ([]string, bool) {
	if s, ok := rawString(raw); ok {
		return []string{s}, true
	}
	var elems []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &elems) != nil {
		return nil, false
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		s, ok := rawString(e)
		if !ok || len(s) > maxFilterValueLen {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// wireFilter writes a filter as the contract spells it for an upstream
// registry: the payment keys in their request shapes (pay:price a
// comparison object, maxPricePerCall a number; both exact JSON numbers),
// every other key its array of strings.
func wireFilter(f index.Filter) map[string]any {
	if len(f) == 0 {
		return nil
	}
	out := make(map[string]any, len(f))
	for k, vals := range f {
		switch k {
		case index.KeyMaxPrice:
			if len(vals) > 0 {
				out[k] = json.Number(vals[0])
			}
		case index.FieldPayPrice:
			cmp := map[string]json.Number{}
			for _, v := range vals {
				if op, d, ok := strings.Cut(v, ":"); ok {
					cmp[op] = json.Number(d)
				}
			}
			out[k] = cmp
		default:
			out[k] = vals
		}
	}
	return out
}
