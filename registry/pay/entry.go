package pay

import (
	"encoding/json"
	"slices"
)

// TypeX402Resource is the entry type of a paid resource read from an x402
// bazaar catalogue: data is the catalogue item as the facilitator listed it
// (resource, type, x402Version, accepts, ...). ARD names no such type.
const TypeX402Resource = "application/x402-resource+json"

// CatalogueItem is the part of a bazaar catalogue item (GET
// /discovery/resources, /discovery/search) the registry reads.
type CatalogueItem struct {
	Resource    string          `json:"resource"`
	Type        string          `json:"type"`
	X402Version int             `json:"x402Version"`
	Accepts     json.RawMessage `json:"accepts"`
	Method      string          `json:"method,omitempty"`
	ToolName    string          `json:"toolName,omitempty"`
	Description string          `json:"description,omitempty"`
	LastUpdated string          `json:"lastUpdated,omitempty"`
}

// FromEntry reads every option an entry states: a catalogue item's accepts
// (entries of TypeX402Resource) and the metadata keys of FromMetadata.
func FromEntry(typ string, data json.RawMessage, meta map[string]json.RawMessage) []Option {
	var out []Option
	if typ == TypeX402Resource && len(data) > 0 {
		var it CatalogueItem
		if json.Unmarshal(data, &it) == nil {
			version := it.X402Version
			if version == 0 {
				version = 2
			}
			if opts, err := FromAccepts(version, it.Accepts); err == nil {
				out = opts
			}
		}
	}
	for _, o := range FromMetadata(meta) {
		out = appendOption(out, o)
	}
	return out
}

// Summary lists the distinct protocols and networks of opts and the known
// prices, in the order first stated: what the index holds of them.
func Summary(opts []Option) (protocols, networks, prices []string) {
	add := func(list []string, v string) []string {
		if v == "" || slices.Contains(list, v) {
			return list
		}
		return append(list, v)
	}
	for _, o := range opts {
		protocols = add(protocols, o.Protocol)
		networks = add(networks, o.Network)
		prices = add(prices, o.Price)
	}
	return protocols, networks, prices
}

// X402 returns the x402 options of opts: those a 402 answer can confirm.
func X402(opts []Option) []Option {
	var out []Option
	for _, o := range opts {
		if o.Protocol == ProtocolX402 {
			out = append(out, o)
		}
	}
	return out
}
