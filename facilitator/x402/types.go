// Package x402 owns the wire formats of the x402 payment protocol, versions
// 1 and 2, for the EVM "exact" scheme: payment requirements, the 402 body,
// payment payloads, the facilitator's /verify and /settle request and response
// bodies, the official reason codes, and the base64 header encodings.
//
// DecodeRequest, the one decoder of /verify and /settle bodies, is strict:
// JSON that two parsers could read differently (duplicate members, invalid
// UTF-8, lone surrogates, member names in another case, numbers that change
// value when canonicalised) is refused, and each version keeps its own
// shape and network names. "extra": null and "outputSchema": null are
// accepted, and amounts sent as small bare JSON numbers are read as the
// decimal strings they stand for. Encoding always writes the canonical
// shapes (decimal strings, official field names).
//
// The package knows nothing of chains: it does not hash, sign or call an RPC.
// Package facilitator/evm does that.
package x402

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// Versions of the protocol this package speaks.
const (
	Version1 = 1
	Version2 = 2
)

// SchemeExact is the only payment scheme the facilitator settles.
const SchemeExact = "exact"

// Header names carrying base64 JSON between client, merchant and facilitator.
const (
	// HeaderPaymentSignature carries a v2 PaymentPayload from client to merchant.
	HeaderPaymentSignature = "PAYMENT-SIGNATURE"
	// HeaderXPayment carries a v1 PaymentPayload from client to merchant.
	HeaderXPayment = "X-PAYMENT"
	// HeaderPaymentRequired carries a v2 PaymentRequired on a 402 response.
	HeaderPaymentRequired = "PAYMENT-REQUIRED"
	// HeaderPaymentResponse carries a v2 SettleResponse back to the client.
	HeaderPaymentResponse = "PAYMENT-RESPONSE"
	// HeaderXPaymentResponse carries a v1 SettleResponse back to the client.
	HeaderXPaymentResponse = "X-PAYMENT-RESPONSE"
)

// Decimal is a non-negative integer written as a decimal string, the way
// x402 writes amounts and timestamps. It also accepts a bare JSON number,
// because some clients send maxTimeoutSeconds-style numbers for amounts too;
// it always encodes as a string.
type Decimal string

// UnmarshalJSON accepts "123" and 123.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*d = ""
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*d = Decimal(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a decimal string or number, got %.40s", b)
	}
	*d = Decimal(n.String())
	return nil
}

// Int is a JSON integer that also accepts a numeric string ("60"), for
// x402Version and maxTimeoutSeconds; it encodes as a number.
type Int int64

// UnmarshalJSON accepts 60 and "60".
func (i *Int) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*i = 0
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(s)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer, got %.40s", b)
	}
	*i = Int(n)
	return nil
}

// ResourceInfo describes the paid resource in v2 (it lives in the
// requirements in v1).
type ResourceInfo struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// Extra is the EVM member "extra" of payment requirements: the EIP-712
// domain name and version of the asset, and optionally how it is moved.
type Extra struct {
	Name                string `json:"name,omitempty"`
	Version             string `json:"version,omitempty"`
	AssetTransferMethod string `json:"assetTransferMethod,omitempty"`
}

// PaymentRequirementsV1 is one element of a v1 402 body's "accepts".
// Resource and description are required by the v1 spec, so they are always
// written, even when empty.
type PaymentRequirementsV1 struct {
	Scheme            string          `json:"scheme"`
	Network           string          `json:"network"`
	MaxAmountRequired Decimal         `json:"maxAmountRequired"`
	Resource          string          `json:"resource"`
	Description       string          `json:"description"`
	MimeType          string          `json:"mimeType,omitempty"`
	OutputSchema      json.RawMessage `json:"outputSchema,omitempty"`
	PayTo             string          `json:"payTo"`
	MaxTimeoutSeconds Int             `json:"maxTimeoutSeconds"`
	Asset             string          `json:"asset"`
	Extra             *Extra          `json:"extra,omitempty"`
}

// PaymentRequirementsV2 is one element of a v2 PaymentRequired's "accepts",
// and the "accepted" member of a v2 payload.
type PaymentRequirementsV2 struct {
	Scheme            string  `json:"scheme"`
	Network           string  `json:"network"`
	Amount            Decimal `json:"amount"`
	Asset             string  `json:"asset"`
	PayTo             string  `json:"payTo"`
	MaxTimeoutSeconds Int     `json:"maxTimeoutSeconds"`
	Extra             *Extra  `json:"extra,omitempty"`
}

// PaymentRequiredV1 is the JSON body of a v1 402 response.
type PaymentRequiredV1 struct {
	X402Version int                     `json:"x402Version"`
	Error       string                  `json:"error,omitempty"`
	Accepts     []PaymentRequirementsV1 `json:"accepts"`
}

// PaymentRequiredV2 is the decoded PAYMENT-REQUIRED header of a v2 402.
type PaymentRequiredV2 struct {
	X402Version int                        `json:"x402Version"`
	Error       string                     `json:"error,omitempty"`
	Resource    *ResourceInfo              `json:"resource,omitempty"`
	Accepts     []PaymentRequirementsV2    `json:"accepts"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`
}

// Authorization is the EIP-3009 TransferWithAuthorization message the payer
// signed, as sent: addresses in 0x hex, numbers as decimal strings, nonce as
// 32 bytes of 0x hex.
type Authorization struct {
	From        string  `json:"from"`
	To          string  `json:"to"`
	Value       Decimal `json:"value"`
	ValidAfter  Decimal `json:"validAfter"`
	ValidBefore Decimal `json:"validBefore"`
	Nonce       string  `json:"nonce"`
}

// ExactEVMPayload is the scheme-specific "payload" of an exact EVM payment
// using EIP-3009.
type ExactEVMPayload struct {
	Signature     string         `json:"signature"`
	Authorization *Authorization `json:"authorization,omitempty"`
}

// PaymentPayloadV1 is what a v1 client sends in X-PAYMENT.
type PaymentPayloadV1 struct {
	X402Version int             `json:"x402Version"`
	Scheme      string          `json:"scheme"`
	Network     string          `json:"network"`
	Payload     ExactEVMPayload `json:"payload"`
}

// PaymentPayloadV2 is what a v2 client sends in PAYMENT-SIGNATURE.
type PaymentPayloadV2 struct {
	X402Version int                        `json:"x402Version"`
	Resource    *ResourceInfo              `json:"resource,omitempty"`
	Accepted    PaymentRequirementsV2      `json:"accepted"`
	Payload     ExactEVMPayload            `json:"payload"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`
}

// RequestV1 is the body of POST /verify and POST /settle for version 1.
type RequestV1 struct {
	X402Version         int                   `json:"x402Version"`
	PaymentPayload      PaymentPayloadV1      `json:"paymentPayload"`
	PaymentRequirements PaymentRequirementsV1 `json:"paymentRequirements"`
}

// RequestV2 is the body of POST /verify and POST /settle for version 2.
type RequestV2 struct {
	X402Version         int                   `json:"x402Version"`
	PaymentPayload      PaymentPayloadV2      `json:"paymentPayload"`
	PaymentRequirements PaymentRequirementsV2 `json:"paymentRequirements"`
}

// VerifyResponse is the body of every POST /verify answer.
type VerifyResponse struct {
	IsValid        bool   `json:"isValid"`
	InvalidReason  string `json:"invalidReason,omitempty"`
	InvalidMessage string `json:"invalidMessage,omitempty"`
	Payer          string `json:"payer,omitempty"`
}

// SettleResponse is the body of every POST /settle answer, and the decoded
// PAYMENT-RESPONSE header.
type SettleResponse struct {
	Success      bool   `json:"success"`
	ErrorReason  string `json:"errorReason,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	Payer        string `json:"payer,omitempty"`
	// Transaction is the transaction hash, "" when nothing was broadcast.
	Transaction string `json:"transaction"`
	Network     string `json:"network"`
	Amount      string `json:"amount,omitempty"`
}

// NewPayloadV1 builds the v1 payload a client sends for the requirements it
// accepted, given the authorization it signed and the signature bytes.
func NewPayloadV1(req PaymentRequirementsV1, auth Authorization, signature []byte) PaymentPayloadV1 {
	return PaymentPayloadV1{
		X402Version: Version1,
		Scheme:      req.Scheme,
		Network:     req.Network,
		Payload:     ExactEVMPayload{Signature: HexSignature(signature), Authorization: &auth},
	}
}

// NewPayloadV2 builds the v2 payload a client sends: the accepted
// requirements copied verbatim, the server's extensions echoed, the signed
// authorization.
func NewPayloadV2(resource *ResourceInfo, accepted PaymentRequirementsV2, auth Authorization, signature []byte, extensions map[string]json.RawMessage) PaymentPayloadV2 {
	return PaymentPayloadV2{
		X402Version: Version2,
		Resource:    resource,
		Accepted:    accepted,
		Payload:     ExactEVMPayload{Signature: HexSignature(signature), Authorization: &auth},
		Extensions:  extensions,
	}
}

// NewRequestV1 builds the facilitator request body a v1 merchant sends.
func NewRequestV1(p PaymentPayloadV1, req PaymentRequirementsV1) RequestV1 {
	return RequestV1{X402Version: Version1, PaymentPayload: p, PaymentRequirements: req}
}

// NewRequestV2 builds the facilitator request body a v2 merchant sends.
func NewRequestV2(p PaymentPayloadV2, req PaymentRequirementsV2) RequestV2 {
	return RequestV2{X402Version: Version2, PaymentPayload: p, PaymentRequirements: req}
}

// HexSignature writes signature bytes the way x402 sends them: 0x hex.
func HexSignature(sig []byte) string { return "0x" + hex.EncodeToString(sig) }
