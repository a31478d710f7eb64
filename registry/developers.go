package registry

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/web"
)

// handleDevelopers handles "GET /developers": every problem type the
// registry answers with, and what to do about each. Problem documents point
// here ({public-url}/developers#<slug>).
func (s *Service) handleDevelopers(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	web.ServeDevPage(w, r, developersPage)
}

var developersPage = web.DevPage{
	Title: "Registry errors",
	Intro: "Every error of this registry is an RFC 9457 problem document (Content-Type application/problem+json) with type, title, status and detail; " +
		"its type is this page's URL with one of the anchors below. Validation failures also list errors: [{field, message}].",
	Sections: []web.DevSection{{
		ID: "problems", Title: "Problem types",
		Entries: []web.DevEntry{
			{ID: web.SlugBadRequest, Status: "400 Bad Request", Meaning: "The body is not JSON at all.",
				Action: "Send a JSON object; the detail says where parsing stopped."},
			{ID: web.SlugUnauthorized, Status: "401 Unauthorized", Meaning: "The request asks for more than the free tier gives (e.g. /feed/changes beyond the last 24 hours or 100 items) and carries no key that allows it.",
				Action: "Stay within the free tier the detail names; keys for more are not offered yet."},
			{ID: web.SlugNotFound, Status: "404 Not Found", Meaning: "No route at the path (there is no /v1/ prefix), or the entry, report or source asked for does not exist.",
				Action: "Check the path against /openapi.json."},
			{ID: web.SlugMethodNotAllowed, Status: "405 Method Not Allowed", Meaning: "The path exists but not with this method.",
				Action: "Use a method from the Allow header (POST /search, GET /agents, ...)."},
			{ID: web.SlugPayloadTooLarge, Status: "413 Payload Too Large", Meaning: "The request body is over the registry's limit.",
				Action: "Send a smaller body; query texts are at most 1024 bytes."},
			{ID: web.SlugUnprocessable, Status: "422 Unprocessable Content", Meaning: "The body is JSON but not what the route takes: an unknown member (typos such as limt are refused), a wrong type, a value out of range, a filter key the index does not know, or a page token from another query.",
				Action: "Fix each member the errors list names; start paging again without the token."},
			{ID: web.SlugInternal, Status: "500 Internal Server Error", Meaning: "The registry failed; no internal detail is returned, the operator's log has it under the request id.",
				Action: "Retry with backoff."},
			{ID: web.SlugServiceUnavailable, Status: "503 Service Unavailable", Meaning: "The search index is not answering, or the request was cancelled while it ran.",
				Action: "Retry after a short wait; /health says when the registry is back."},
			{ID: web.SlugNotImplemented, Status: "501 Not Implemented", Meaning: "POST /credits on a registry whose operator configured no x402 facilitator: it sells no credits (GET /x402 says so). A 503 there means the facilitator did not answer; nothing was charged.",
				Action: "Use a registry that sells credits, or, as its operator, start it with --facilitator-url, --pay-to and --pay-network."},
		},
	}},
}
