package facilitator

import (
	_ "embed"
	"net/http"
	"sync"

	"github.com/ardx-dev/ardx/web"
)

// openapiTemplate is the facilitator's interface description (OpenAPI
// 3.1.0); its servers list is filled in from PublicURL.
//
//go:embed openapi.json
var openapiTemplate []byte

// openapiDocs caches the served document per public URL (one per service).
var openapiDocs sync.Map // public URL → []byte

// handleOpenAPI handles "GET /openapi.json".
func (s *Service) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, ok := openapiDocs.Load(s.cfg.PublicURL)
	if !ok {
		b, err := web.OpenAPIWithServer(openapiTemplate, s.cfg.PublicURL)
		if err != nil {
			s.problems.Write(w, r, err)
			return
		}
		doc, _ = openapiDocs.LoadOrStore(s.cfg.PublicURL, b)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(doc.([]byte))
}

// handleHome handles "GET /": the facilitator's pages and API, HTML to a
// browser and JSON links otherwise.
func (s *Service) handleHome(w http.ResponseWriter, r *http.Request) {
	web.WriteIndex(w, r, s.problems, web.IndexPage{
		Service: "ardx x402 facilitator",
		Version: s.cfg.Version,
		Intro:   "Verifies and settles x402 payments (EIP-3009 USDC over EIP-712), exactly once per request body.",
		Self:    s.cfg.PublicURL + "/",
		Sections: []web.IndexSection{
			{Title: "Pages", Links: []web.IndexLink{
				{Href: "/status", Title: "networks, availability and settlement counts"},
				{Href: "/integrate", Title: "sell a route through this facilitator: Express, Hono, Next.js, Go"},
				{Href: "/pricing", Title: "what a settlement costs on each network"},
				{Href: "/echo/status", Title: "the /echo test merchant: network, price, refunds"},
			}},
			{Title: "API", Links: []web.IndexLink{
				{Href: "/openapi.json", Title: "OpenAPI 3.1 description of this API"},
				{Href: "/supported", Title: "payment kinds verified and settled here"},
				{Href: "/verify", Method: "POST", Title: "verify a payment without moving funds"},
				{Href: "/settle", Method: "POST", Title: "settle a payment on-chain, exactly once per body"},
				{Href: "/echo", Title: "a test merchant that answers 402 and refunds what it is paid"},
				{Href: "/discovery/resources", Title: "catalogue of paid resources (x402 bazaar)"},
				{Href: "/.well-known/ard.json", Title: "this facilitator's ARD manifest"},
				{Href: "/mcp", Method: "POST", Title: "MCP server with four read-only tools"},
				{Href: "/status.json", Title: "status document"},
				{Href: "/health", Title: "liveness and readiness"},
			}},
		},
	})
}
