package facilitator

import (
	"net/http"
	"slices"
	"strings"

	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/web"
)

// NetworkFacts is what /supported publishes about one network. The evm
// package's *Network implements it.
type NetworkFacts interface {
	// ID is the CAIP-2 id, e.g. "eip155:84532".
	ID() string
	// V1Name is the x402 v1 short name ("base-sepolia"), or "" when the
	// network has none and is served to v2 only.
	V1Name() string
	// Available reports whether the network can settle now, and why not.
	Available() (bool, string)
	// Asset is the token contract address (USDC).
	Asset() string
	// TokenName and TokenVersion are the token's EIP-712 domain.
	TokenName() string
	TokenVersion() string
	// Decimals of the asset (6 for USDC).
	Decimals() uint8
	// SignerAddresses are the addresses that broadcast settlements and pay
	// gas.
	SignerAddresses() []string
}

// SupportedResponse is the body of GET /supported. Kinds, Extensions and
// Signers follow the official x402 shape; Networks adds what the spec asks
// for: availability and per-network facts, keyed by CAIP-2 id.
type SupportedResponse struct {
	Kinds      []SupportedKind         `json:"kinds"`
	Extensions []string                `json:"extensions"`
	Signers    map[string][]string     `json:"signers"`
	Networks   map[string]NetworkState `json:"networks"`
}

// SupportedKind is one (x402Version, scheme, network) the facilitator
// accepts now. v1 kinds name the network by its short name, v2 by CAIP-2.
type SupportedKind struct {
	X402Version int    `json:"x402Version"`
	Scheme      string `json:"scheme"`
	Network     string `json:"network"`
}

// NetworkState is one network's entry in /supported's networks object.
type NetworkState struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	// Network is the CAIP-2 id; V1Network the v1 short name, if any.
	Network   string       `json:"network"`
	V1Network string       `json:"v1Network,omitempty"`
	Asset     string       `json:"asset"`
	EIP712    EIP712Domain `json:"eip712"`
	Decimals  uint8        `json:"decimals"`
	Signers   []string     `json:"signers"`
}

// EIP712Domain is the name and version a payer signs over; the client puts
// them in paymentRequirements.extra.
type EIP712Domain struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Lookup returns the state of a network named by CAIP-2 id or v1 name.
func (sr *SupportedResponse) Lookup(network string) (NetworkState, bool) {
	if st, ok := sr.Networks[network]; ok {
		return st, true
	}
	for _, st := range sr.Networks {
		if st.V1Network != "" && st.V1Network == network {
			return st, true
		}
	}
	return NetworkState{}, false
}

// schemeExact is the only x402 scheme this facilitator settles.
const schemeExact = "exact"

// signerFamily groups signers the way the official facilitators do: one key
// for every EVM chain.
const signerFamily = "eip155:*"

// supported builds the /supported document from the live network state. A
// network that cannot settle stays in networks (marked unavailable) and
// leaves kinds and signers, so clients stop choosing it before the
// endpoints start refusing it.
func (s *Service) supported() SupportedResponse {
	resp := SupportedResponse{
		Kinds:      []SupportedKind{},
		Extensions: slices.Clone(s.cfg.Extensions),
		Signers:    map[string][]string{},
		Networks:   make(map[string]NetworkState, len(s.cfg.Networks)),
	}
	// /settle honours the payment-identifier extension whatever the
	// configuration says.
	if !slices.Contains(resp.Extensions, x402.ExtensionPaymentIdentifier) {
		resp.Extensions = append(resp.Extensions, x402.ExtensionPaymentIdentifier)
	}
	var v1 []SupportedKind
	var signers []string
	for _, n := range s.cfg.Networks {
		ok, reason := n.Available()
		st := NetworkState{
			Available: ok,
			Network:   n.ID(),
			V1Network: n.V1Name(),
			Asset:     n.Asset(),
			EIP712:    EIP712Domain{Name: n.TokenName(), Version: n.TokenVersion()},
			Decimals:  n.Decimals(),
			Signers:   slices.Clone(n.SignerAddresses()),
		}
		if st.Signers == nil {
			st.Signers = []string{}
		}
		if !ok {
			st.Reason = reason
			if st.Reason == "" {
				st.Reason = "the network cannot settle now"
			}
		}
		resp.Networks[n.ID()] = st
		if !ok {
			continue
		}
		resp.Kinds = append(resp.Kinds, SupportedKind{X402Version: 2, Scheme: schemeExact, Network: n.ID()})
		if n.V1Name() != "" {
			v1 = append(v1, SupportedKind{X402Version: 1, Scheme: schemeExact, Network: n.V1Name()})
		}
		for _, a := range n.SignerAddresses() {
			if !slices.ContainsFunc(signers, func(b string) bool { return strings.EqualFold(a, b) }) {
				signers = append(signers, a)
			}
		}
	}
	// v2 kinds first, then v1, as the official builder lists them.
	resp.Kinds = append(resp.Kinds, v1...)
	if len(signers) > 0 {
		resp.Signers[signerFamily] = signers
	}
	return resp
}

// handleSupported handles "GET /supported".
func (s *Service) handleSupported(w http.ResponseWriter, r *http.Request) {
	// Availability changes with the chain; caches may hold it only briefly.
	w.Header().Set("Cache-Control", "public, max-age=5")
	web.WriteJSON(w, http.StatusOK, s.supported())
}
