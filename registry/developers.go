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
			{ID: web.SlugUnauthorized, Status: "401 Unauthorized", Meaning: "The Authorization header does not carry a live key (malformed, unknown, or revoked by a rotation): such a request is never answered as an anonymous one. Or the route needs a key (private entries, claim verification, key rotation) and none was sent, or the request asks for more than the free tier gives (e.g. /feed/changes beyond the last 24 hours or 100 items).",
				Action: "Send Authorization: Bearer <key> with a live key (POST /claim or POST /monitoring/start mints one; after POST /keys/rotate use the new one), or stay within the free tier the detail names."},
			{ID: web.SlugNotFound, Status: "404 Not Found", Meaning: "No route at the path (there is no /v1/ prefix), or the entry, report or source asked for does not exist.",
				Action: "Check the path against /openapi.json."},
			{ID: web.SlugMethodNotAllowed, Status: "405 Method Not Allowed", Meaning: "The path exists but not with this method.",
				Action: "Use a method from the Allow header (POST /search, GET /agents, ...)."},
			{ID: web.SlugPayloadTooLarge, Status: "413 Payload Too Large", Meaning: "The request body is over the registry's limit.",
				Action: "Send a smaller body; query texts are at most 1024 bytes."},
			{ID: web.SlugUnprocessable, Status: "422 Unprocessable Content", Meaning: "The body is JSON but not what the route takes: an unknown member (typos such as limt are refused), a wrong type, a value out of range, a filter key the index does not know, or a page token from another query.",
				Action: "Fix each member the errors list names; start paging again without the token."},
			{ID: web.SlugForbidden, Status: "403 Forbidden", Meaning: "POST /claim/verify found neither the TXT record nor the file holding the token (the detail says what each check saw), or the key's account has not proved ownership of the domain it registers private entries for.",
				Action: "Put the record or file in place as POST /claim said (DNS may take a while to propagate) and verify again; claim the domain before registering entries for it."},
			{ID: web.SlugConflict, Status: "409 Conflict", Meaning: "No pending claim of the domain by this account, or its challenge expired; or a private entry's identifier is already held by another entry; or the domain holds its most private entries.",
				Action: "Start a new claim with POST /claim; choose another identifier; delete entries before adding more."},
			{ID: web.SlugTooManyRequests, Status: "429 Too Many Requests", Meaning: "The rate limit of this key's account (with a key) or of this address (without one) is spent; minting keys has its own limit per address.",
				Action: "Wait the seconds in Retry-After; RateLimit-Policy and RateLimit name the bucket and what is left."},
			{ID: web.SlugInternal, Status: "500 Internal Server Error", Meaning: "The registry failed; no internal detail is returned, the operator's log has it under the request id.",
				Action: "Retry with backoff."},
			{ID: web.SlugServiceUnavailable, Status: "503 Service Unavailable", Meaning: "The search index is not answering, or the request was cancelled while it ran.",
				Action: "Retry after a short wait; /health says when the registry is back."},
			{ID: web.SlugNotImplemented, Status: "501 Not Implemented", Meaning: "POST /credits on a registry whose operator configured no x402 facilitator: it sells no credits (GET /x402 says so). A 503 there means the facilitator did not answer; nothing was charged.",
				Action: "Use a registry that sells credits, or, as its operator, start it with --facilitator-url, --pay-to and --pay-network."},
		},
	}},
}
