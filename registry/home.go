package registry

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/web"
)

// handleHome handles "GET /": the registry's pages and API, HTML to a
// browser and JSON links otherwise.
func (s *Service) handleHome(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	web.WriteIndex(w, r, s.problems, web.IndexPage{
		Service: "ardx ARD registry",
		Intro:   "An Agentic Resource Discovery registry: search MCP servers, A2A agents, skills and API operations.",
		Self:    s.cfg.PublicURL + "/",
		Sections: []web.IndexSection{
			{Title: "Pages", Links: []web.IndexLink{
				{Href: "/tools", Title: "capability index: every callable tool and operation, searchable"},
				{Href: "/bench", Title: "search benchmark: recall, MRR and nDCG of this registry and its upstreams on a frozen task set"},
			}},
			{Title: "API", Links: []web.IndexLink{
				{Href: "/openapi.json", Title: "OpenAPI 3.1 description of this API"},
				{Href: "/search", Method: "POST", Title: "ranked search, with federation across upstream registries"},
				{Href: "/explore", Method: "POST", Title: "facets of the index"},
				{Href: "/agents", Title: "deterministic browsing of every entry"},
				{Href: "/stats", Title: "index and demand statistics"},
				{Href: "/tool-safety", Title: "tool-safety scan of MCP tool entries"},
				{Href: "/manifest/build", Method: "POST", Title: "build an ARD manifest for a domain"},
				{Href: "/doctor", Method: "POST", Title: "check a domain's ARD publication"},
				{Href: "/audit", Method: "POST", Title: "a domain's coverage across registries"},
				{Href: "/plan", Method: "POST", Title: "a task in plain words as steps with candidate resources"},
				{Href: "/health", Title: "liveness"},
			}},
		},
	})
}
