package facilitator

import (
	"net/http"
	"strconv"

	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/web"
)

// handleDevelopers handles "GET /developers": every problem type and every
// reason code this facilitator answers with, and what to do about each.
// Problem documents point here ({public-url}/developers#<slug>).
func (s *Service) handleDevelopers(w http.ResponseWriter, r *http.Request) {
	web.ServeDevPage(w, r, developersPage)
}

func status(code int) string { return strconv.Itoa(code) + " " + http.StatusText(code) }

var developersPage = web.DevPage{
	Title: "Facilitator errors and reason codes",
	Intro: "POST /verify and POST /settle always answer in their payment shape: isValid with invalidReason, or success with errorReason. " +
		"Codes starting with invalid_ are the payer's to fix; the others belong to the merchant or to this facilitator, and nobody is charged for them. " +
		"Every other path answers RFC 9457 problems whose type points at an entry below.",
	Sections: []web.DevSection{
		{
			ID: "problems", Title: "Problem types",
			Intro: "The type member of a problem document is this page's URL with one of these anchors.",
			Entries: []web.DevEntry{
				{ID: web.SlugNotFound, Status: status(404), Meaning: "No route at the path. There is no /v1/ prefix: both x402 versions use the same paths.",
					Action: "Check the path against /supported, /verify, /settle, /status and /integrate."},
				{ID: web.SlugMethodNotAllowed, Status: status(405), Meaning: "The path exists but not with this method (GET /mcp and DELETE /mcp among them: the MCP server is stateless).",
					Action: "Use a method from the Allow header."},
				{ID: web.SlugBadRequest, Status: status(400), Meaning: "The body is not JSON, or not the JSON the path expects. On /verify and /settle this arrives as invalid_payload in the payment shape instead.",
					Action: "Send a JSON body; the detail member says what is wrong."},
				{ID: web.SlugPayloadTooLarge, Status: status(413), Meaning: "The body is over 65536 bytes.",
					Action: "Send less; no x402 request needs that much."},
				{ID: web.SlugUnprocessable, Status: status(422), Meaning: "An Idempotency-Key was reused with a different /settle body (this answer is also a failed settle response, errorReason idempotency_key_conflict), or a query parameter is out of range.",
					Action: "Use a new Idempotency-Key for a new payment; send the identical body to retry the old one."},
				{ID: web.SlugConflict, Status: status(409), Meaning: "A payment-identifier id was reused for a purchase with other terms (this answer is also a failed settle response, errorReason payment_identifier_conflict).",
					Action: "Use a new payment id for a new purchase; reuse an id only to retry the same purchase."},
				{ID: web.SlugTooManyRequests, Status: status(429), Meaning: "The client's rate bucket is empty (settle 50/s, payments-read 30/s, discovery 10/s, per client address).",
					Action: "Wait the seconds in Retry-After; RateLimit-Policy names the bucket."},
				{ID: web.SlugNotAcceptable, Status: status(406), Meaning: "The Accept header names no type this path can answer with.",
					Action: "Accept application/json (and text/event-stream on POST /mcp)."},
				{ID: web.SlugUnsupportedMedia, Status: status(415), Meaning: "The body's Content-Type is not one the path reads.",
					Action: "Send Content-Type: application/json."},
				{ID: web.SlugForbidden, Status: status(403), Meaning: "The request was refused as a whole (the MCP transport's origin checks).",
					Action: "Call from a server, not from a page in a browser on another origin."},
				{ID: web.SlugInternal, Status: status(500), Meaning: "The facilitator failed; no internal detail is returned, the operator's log has it under the request id.",
					Action: "Retry with backoff. A /settle retried with the identical body is settled at most once."},
				{ID: web.SlugServiceUnavailable, Status: status(503), Meaning: "The facilitator is shutting down or cannot serve now.",
					Action: "Retry after Retry-After, against another instance if you have one."},
			},
		},
		{
			ID: "payer", Title: "Reason codes the payer can act on",
			Intro: "Answered with status 200 (invalid_payload: 400). The merchant should refuse the request and pass the reason to the client; nothing was moved and nothing was charged.",
			Entries: []web.DevEntry{
				{ID: x402.ReasonInvalidPayload, Status: "400 / 413", Meaning: "The body is not an x402 request this facilitator reads: not strict JSON (duplicate members, invalid UTF-8, lone surrogates, member names in another case, numbers above 2^53), no or an unknown x402Version, the other version's shape or network names, a malformed address, amount, nonce or signature, a zero amount, a maxTimeoutSeconds that is not a positive integer, or an invalid payment id.",
					Action: "Fix the body as invalidMessage or errorMessage says; official x402 clients never send these."},
				{ID: x402.ReasonInvalidScheme, Meaning: "The payload's or the requirements' scheme is not exact.",
					Action: "Pay with the exact scheme; /supported lists what is served."},
				{ID: x402.ReasonNetworkMismatch, Meaning: "The payload was signed for another network than the requirements name, or the requirements name a network this chain is not.",
					Action: "Sign for the network the merchant asked for."},
				{ID: x402.ReasonMissingEIP712Domain, Meaning: "paymentRequirements.extra lacks the token's EIP-712 name and version.",
					Action: "Merchant: put extra {name, version} in the requirements, as /supported gives them per network."},
				{ID: x402.ReasonSignature, Meaning: "The signature is not the payer's over this authorization: signed by another key, over another EIP-712 domain, not 65 bytes for an address without code, or refused by the wallet contract (ERC-1271). On settle also when the token refuses it.",
					Action: "Sign again with the payer's key over the domain in extra and the network's chain id."},
				{ID: x402.ReasonRecipientMismatch, Meaning: "authorization.to is not the merchant's payTo.",
					Action: "Sign a payment to payTo."},
				{ID: x402.ReasonValidBefore, Meaning: "The authorization has expired or expires within 6 seconds.",
					Action: "Sign a fresh authorization with a later validBefore."},
				{ID: x402.ReasonValidAfter, Meaning: "The authorization is not valid yet (validAfter is in the future).",
					Action: "Wait, or sign with validAfter in the past."},
				{ID: x402.ReasonAuthorizationValue, Meaning: "v1: authorization.value is not exactly maxAmountRequired.",
					Action: "Sign for exactly the required amount."},
				{ID: x402.ReasonAuthorizationValueMismatch, Meaning: "v2: authorization.value is not exactly amount.",
					Action: "Sign for exactly the required amount."},
				{ID: x402.ReasonAssetNotDeployed, Meaning: "The requirements' asset has no code on this network.",
					Action: "Merchant: use the asset /supported names for the network."},
				{ID: x402.ReasonAssetMismatch, Meaning: "The asset is a contract but not the token this network settles (not an official code: this facilitator does not pay gas to call arbitrary contracts).",
					Action: "Merchant: use the asset /supported names for the network."},
				{ID: x402.ReasonFactoryNotAllowed, Meaning: "An ERC-6492 signature of a smart wallet that is not deployed yet; this facilitator deploys no wallets.",
					Action: "Deploy the wallet first, then pay with its ERC-1271 signature."},
				{ID: x402.ReasonEIP3009NotSupported, Meaning: "The asset does not implement EIP-3009 (transferWithAuthorization).",
					Action: "Pay with a token that does (USDC)."},
				{ID: x402.ReasonNonceAlreadyUsed, Meaning: "This authorization was already used or canceled on chain.",
					Action: "Sign a new authorization with a new nonce; if you retried a settle, send the identical body to get its recorded outcome."},
				{ID: x402.ReasonTokenNameMismatch, Meaning: "Verify: the token's EIP-712 name is not extra.name.",
					Action: "Merchant: fix extra.name (Base Sepolia USDC is \"USDC\", Base USDC is \"USD Coin\")."},
				{ID: x402.ReasonTokenVersionMismatch, Meaning: "Verify: the token's EIP-712 version is not extra.version.",
					Action: "Merchant: fix extra.version (USDC is \"2\")."},
				{ID: x402.ReasonInsufficientBalance, Meaning: "The payer holds less than the amount.",
					Action: "Fund the payer's address, then sign again."},
				{ID: x402.ReasonSimulationFailed, Meaning: "The simulated transfer reverted and no cause was found (a high-s signature ends here), or it needed more gas than the cap.",
					Action: "Check invalidMessage for the revert; sign again with a wallet that produces standard signatures."},
				{ID: x402.ReasonEVMTransactionFailed, Meaning: "The transfer was mined and reverted (the transaction hash is in the answer), or its gas estimate reverted for a reason settle cannot name.",
					Action: "Inspect the transaction; sign a new authorization."},
				{ID: x402.ReasonSanctioned, Meaning: "The paying, receiving or merchant address is on the sanctions list this facilitator screens. Refused before any chain call.",
					Action: "None: this facilitator will not move funds for that address."},
			},
		},
		{
			ID: "facilitator", Title: "Reason codes of the merchant or the facilitator",
			Intro: "Nobody is charged for these.",
			Entries: []web.DevEntry{
				{ID: x402.ReasonUnsupportedNetwork, Meaning: "The requirements name a network this facilitator does not serve.",
					Action: "Use a network /supported lists."},
				{ID: x402.ReasonUnsupportedScheme, Meaning: "No mechanism for this scheme at all.",
					Action: "Use a kind /supported lists."},
				{ID: x402.ReasonUnsupportedPayloadType, Meaning: "The payload is not an EIP-3009 authorization (Permit2, for one).",
					Action: "Sign an EIP-3009 transferWithAuthorization."},
				{ID: x402.ReasonSettlementPending, Meaning: "The transfer was broadcast but is not final within about 25 seconds; the hash is included when known.",
					Action: "Send the identical body again: it returns the final outcome. Do not deliver yet."},
				{ID: x402.ReasonTransactionFailed, Meaning: "The facilitator could not get the transfer done (broadcast refused, signer problem).",
					Action: "Retry later; the operator is alerted."},
				{ID: x402.ReasonServiceUnavailable, Meaning: "The network cannot settle now (RPC failing, signer out of gas), or the facilitator is shutting down (status 503).",
					Action: "Retry later or elsewhere; /status shows which network is down."},
				{ID: reasonTooManyRequests, Status: status(429), Meaning: "The client's rate bucket is empty.",
					Action: "Wait the seconds in Retry-After."},
				{ID: reasonIdempotencyKeyConflict, Status: status(422), Meaning: "The Idempotency-Key was first used with another body (the answer is also an unprocessable-content problem).",
					Action: "Use a new Idempotency-Key for a new payment."},
				{ID: reasonPaymentIDConflict, Status: status(409), Meaning: "The payment-identifier id was first used for a purchase with other terms (scheme, network, asset, amount, payTo or resource); the answer is also a conflict problem.",
					Action: "Use a new payment id for a new purchase."},
				{ID: reasonVerifyInternal, Status: status(500), Meaning: "Verify failed inside the facilitator.",
					Action: "Retry with backoff."},
				{ID: reasonSettleInternal, Status: status(500), Meaning: "Settle failed inside the facilitator before anything was recorded.",
					Action: "Retry the identical body with backoff: it is settled at most once."},
			},
		},
	},
}
