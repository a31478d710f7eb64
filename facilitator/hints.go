package facilitator

import (
	"encoding/json"
	"net/http"

	"github.com/ardx-dev/ardx/web"
)

// exampleRequest is a complete, correctly signed v2 payment request (the
// x402 reference vector: anvil dev key #0 pays 0.01 USDC on Base Sepolia).
// It is static so the hint never depends on which networks are live.
const exampleRequest = `{
  "x402Version": 2,
  "paymentPayload": {
    "x402Version": 2,
    "resource": {"url": "https://api.example.com/premium-data", "description": "Access to premium market data", "mimeType": "application/json"},
    "accepted": {
      "scheme": "exact", "network": "eip155:84532", "amount": "10000",
      "asset": "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
      "payTo": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "maxTimeoutSeconds": 60,
      "extra": {"name": "USDC", "version": "2"}
    },
    "payload": {
      "signature": "0x7f448acd9b06a79d5b398177c474a292108b42cbf29281bf50e3fde9ed2d81bf29e7b9605c53f230661acc072b88c76571451d7270e1005ebc6c0b33a18db9081b",
      "authorization": {
        "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
        "value": "10000", "validAfter": "0", "validBefore": "4102444800",
        "nonce": "0x0000000000000000000000000000000000000000000000000000000000000001"
      }
    },
    "extensions": {}
  },
  "paymentRequirements": {
    "scheme": "exact", "network": "eip155:84532", "amount": "10000",
    "asset": "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
    "payTo": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "maxTimeoutSeconds": 60,
    "extra": {"name": "USDC", "version": "2"}
  }
}`

// ExampleRequest returns the example body that GET /verify and GET /settle
// show: a signed v2 payment request.
func ExampleRequest() json.RawMessage { return json.RawMessage(exampleRequest) }

// Hint is the body of GET /verify and GET /settle: what to POST there.
type Hint struct {
	Method       string            `json:"method"`
	Path         string            `json:"path"`
	Description  string            `json:"description"`
	ContentType  string            `json:"contentType"`
	MaxBodyBytes int               `json:"maxBodyBytes"`
	Body         map[string]string `json:"body"`
	Headers      map[string]string `json:"headers,omitempty"`
	Response     map[string]string `json:"response"`
	Supported    string            `json:"supported"`
	Example      json.RawMessage   `json:"example"`
}

var requestBodyFields = map[string]string{
	"x402Version":         "integer, 1 or 2; 2 names networks by CAIP-2 (eip155:8453), 1 by short name (base)",
	"paymentPayload":      "object: the client's signed payload exactly as sent in the PAYMENT-SIGNATURE (v2) or X-PAYMENT (v1) header, base64-decoded",
	"paymentRequirements": "object: the payment option the merchant advertised and the client accepted",
}

func (s *Service) hint(path string) Hint {
	h := Hint{
		Method:       http.MethodPost,
		Path:         path,
		ContentType:  "application/json",
		MaxBodyBytes: MaxBodyBytes,
		Body:         requestBodyFields,
		Supported:    s.cfg.PublicURL + "/supported",
		Example:      ExampleRequest(),
	}
	switch path {
	case "/verify":
		h.Description = "Checks a signed x402 payment without moving funds. Free. Answers 200 with isValid; an invalid payment is isValid false with invalidReason, not an HTTP error."
		h.Response = map[string]string{
			"isValid":        "boolean",
			"payer":          "address, when valid",
			"invalidReason":  "machine code, when invalid (invalid_* codes are the payer's to fix)",
			"invalidMessage": "human detail, when invalid",
		}
	case "/settle":
		h.Description = "Settles a signed x402 payment on-chain, exactly once per request body; re-posting the identical body returns the recorded outcome with Idempotency-Replayed: true. Deliver the paid resource only after success true."
		h.Headers = map[string]string{
			"Idempotency-Key": "optional; binds to the first body sent with it, a different body with the same key is refused with 422",
		}
		h.Response = map[string]string{
			"success":      "boolean",
			"transaction":  "transaction hash; empty string when nothing was broadcast",
			"network":      "network of the payment",
			"payer":        "address",
			"amount":       "amount in the asset's smallest unit, on success",
			"errorReason":  "machine code, on failure; settlement_pending means re-post the identical body later",
			"errorMessage": "human detail, on failure",
		}
	}
	return h
}

// handleVerifyHint handles "GET /verify".
func (s *Service) handleVerifyHint(w http.ResponseWriter, r *http.Request) {
	web.WriteJSON(w, http.StatusOK, s.hint("/verify"))
}

// handleSettleHint handles "GET /settle".
func (s *Service) handleSettleHint(w http.ResponseWriter, r *http.Request) {
	web.WriteJSON(w, http.StatusOK, s.hint("/settle"))
}
