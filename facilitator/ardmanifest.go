package facilitator

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/ardx-dev/ardx/web"
)

// Media types of the ARD manifest's entries.
const (
	ardTypeOpenAPI   = "application/vnd.oai.openapi+json"
	ardTypeMCPServer = "application/mcp-server-card+json"
)

// ardPublisher is the URN publisher segment for the public URL's host: ARD
// wants a fully qualified domain name, never localhost, so a local address
// becomes a *.localhost sandbox name.
func ardPublisher(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil || u.Hostname() == "" {
		return "ardx.localhost"
	}
	h := strings.ToLower(u.Hostname())
	if ip := net.ParseIP(h); ip != nil && ip.To4() == nil {
		return "ardx.localhost" // an IPv6 literal has colons, which a URN segment cannot hold
	}
	if h == "localhost" {
		return "ardx.localhost"
	}
	if !strings.Contains(h, ".") {
		return h + ".localhost"
	}
	return h
}

// ardEntry is one entry of an ARD manifest.
type ardEntry struct {
	Identifier            string   `json:"identifier"`
	DisplayName           string   `json:"displayName"`
	Type                  string   `json:"type"`
	Description           string   `json:"description"`
	Tags                  []string `json:"tags"`
	Capabilities          []string `json:"capabilities,omitempty"`
	RepresentativeQueries []string `json:"representativeQueries"`
	Data                  any      `json:"data"`
}

// ardManifest is the body of GET /.well-known/ard.json: the ARD v0.91
// shape (host and entries) with v0.9's specVersion "1.0", which v0.91
// ignores and v0.9 consumers (the conformance tool, our own doctor) require.
type ardManifest struct {
	SpecVersion string     `json:"specVersion"`
	Host        ardHost    `json:"host"`
	Entries     []ardEntry `json:"entries"`
}

type ardHost struct {
	DisplayName string `json:"displayName"`
}

// ardManifest describes this service: the facilitator's HTTP API as an
// inline OpenAPI document and its MCP server as an inline server card.
func (s *Service) ardManifest() ardManifest {
	pub := ardPublisher(s.cfg.PublicURL)
	base := s.cfg.PublicURL
	return ardManifest{
		SpecVersion: "1.0",
		Host:        ardHost{DisplayName: "ardx x402 facilitator at " + pub},
		Entries: []ardEntry{
			{
				Identifier:   "urn:air:" + pub + ":x402:facilitator",
				DisplayName:  "x402 payment facilitator",
				Type:         ardTypeOpenAPI,
				Description:  "Verifies and settles x402 payments (EIP-3009 USDC, exact scheme, x402 v1 and v2) on-chain, exactly once per request body; lists paid resources (bazaar), settlement prices and a test merchant that refunds.",
				Tags:         []string{"x402", "payments", "facilitator", "usdc", "base"},
				Capabilities: []string{"x402-verify", "x402-settle", "x402-discovery"},
				RepresentativeQueries: []string{
					"x402 facilitator to verify and settle USDC payments on Base",
					"settle an HTTP 402 payment on-chain",
					"find paid API resources that accept x402",
				},
				Data: facilitatorOpenAPI(base),
			},
			{
				Identifier:   "urn:air:" + pub + ":x402:mcp",
				DisplayName:  "x402 facilitator MCP server",
				Type:         ardTypeMCPServer,
				Description:  "MCP tools for agents: facilitator status, settlement prices, search of paid resources, and code to add a paid route.",
				Tags:         []string{"x402", "mcp", "payments"},
				Capabilities: []string{"facilitator_status", "settlement_price", "find_paid_resource", "integration_snippet"},
				RepresentativeQueries: []string{
					"MCP tool to find resources I can pay for with x402",
					"how much does an x402 settlement cost",
					"code snippet to accept x402 payments in Express or Go",
				},
				Data: map[string]any{
					"$schema":     "https://static.modelcontextprotocol.io/schemas/2025-12-11/server-card.schema.json",
					"name":        "dev.ardx/x402-facilitator",
					"title":       "x402 facilitator",
					"version":     "1.0.0",
					"description": "Facilitator status, settlement prices, the paid-resource catalogue and integration snippets.",
					"websiteUrl":  base + "/integrate",
					"remotes":     []map[string]string{{"type": "streamable-http", "url": base + "/mcp"}},
				},
			},
		},
	}
}

// facilitatorOpenAPI is a compact OpenAPI 3.1 description of the HTTP API.
func facilitatorOpenAPI(base string) map[string]any {
	op := func(method, summary string) map[string]any {
		return map[string]any{method: map[string]any{"summary": summary, "responses": map[string]any{"200": map[string]any{"description": "OK"}}}}
	}
	post := func(summary string) map[string]any {
		return map[string]any{"post": map[string]any{
			"summary": summary,
			"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
				"schema": map[string]any{"type": "object", "required": []string{"x402Version", "paymentPayload", "paymentRequirements"},
					"properties": map[string]any{"x402Version": map[string]any{"type": "integer", "enum": []int{1, 2}},
						"paymentPayload": map[string]any{"type": "object"}, "paymentRequirements": map[string]any{"type": "object"}}}}}},
			"responses": map[string]any{"200": map[string]any{"description": "the x402 response body"}},
		}}
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "x402 payment facilitator", "version": "1.0.0"},
		"servers": []map[string]string{{"url": base}},
		"paths": map[string]any{
			"/verify":              post("Verify a payment without moving funds"),
			"/settle":              post("Settle a payment on-chain, exactly once per body"),
			"/supported":           op("get", "Payment kinds, networks and signers live now"),
			"/discovery/resources": op("get", "Catalogue of resources paid through this facilitator"),
			"/discovery/stats":     op("get", "Settlement and catalogue statistics"),
			"/pricing":             op("get", "Price of a settlement per network"),
			"/echo":                op("get", "Test merchant: 402 terms; paid in full and refunded"),
			"/status.json":         op("get", "Observed availability, network and screening state"),
		},
	}
}

// handleARDManifest handles "GET /.well-known/ard.json".
func (s *Service) handleARDManifest(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	web.WriteJSON(w, http.StatusOK, s.ardManifest())
}
