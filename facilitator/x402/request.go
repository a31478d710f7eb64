package x402

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// PaymentRequest is a /verify or /settle body decoded and normalised across
// v1 and v2: every string is as sent, and the checks that need no chain
// (formats of addresses, numbers, nonce and signature) have passed.
type PaymentRequest struct {
	// X402Version is 1 or 2: the top-level x402Version, else the payload's.
	X402Version int
	// Scheme is the payload's scheme (v1 paymentPayload.scheme, v2
	// paymentPayload.accepted.scheme).
	Scheme string
	// PayloadNetwork is the payload's network (v1 paymentPayload.network, v2
	// paymentPayload.accepted.network); "" when the client left it out.
	PayloadNetwork string
	// Signature is the 0x-hex signature over the authorization.
	Signature string
	// Authorization is the signed EIP-3009 message.
	Authorization Authorization
	// Requirements are the terms the merchant advertised.
	Requirements Requirements
	// Resource is the URL paid for: v2 paymentPayload.resource.url, v1
	// paymentRequirements.resource; "" when not sent.
	Resource string
	// PaymentID is the payment-identifier extension's id (v2), the
	// client's idempotency key for the purchase; "" when not sent.
	PaymentID string
}

// ExtensionPaymentIdentifier names the x402 payment-identifier extension.
const ExtensionPaymentIdentifier = "payment-identifier"

// The payment-identifier extension's id: 16 to 128 of [A-Za-z0-9_-].
const (
	minPaymentIDLen = 16
	maxPaymentIDLen = 128
)

// PurchaseFingerprint identifies what is bought, whatever authorization
// pays for it: the hex SHA-256 of scheme, network, asset, amount, payTo and
// resource. A payment id is bound to it: a retry of the same purchase
// carries a fresh authorization but the same fingerprint.
func (r *PaymentRequest) PurchaseFingerprint() string {
	rq := r.Requirements
	b, _ := json.Marshal([]string{rq.Scheme, rq.Network, strings.ToLower(rq.Asset), rq.Amount, strings.ToLower(rq.PayTo), r.Resource})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Requirements are payment requirements normalised across v1 and v2.
type Requirements struct {
	Scheme  string
	Network string
	// Amount is v2 amount or v1 maxAmountRequired, a decimal string.
	Amount            string
	Asset             string
	PayTo             string
	MaxTimeoutSeconds int64
	// Name and Version are the asset's EIP-712 domain from extra; "" when missing.
	Name    string
	Version string
	// Resource is the v1 resource URL ("" in v2, where it lives in the payload).
	Resource string
}

// Payer returns authorization.from as sent.
func (r *PaymentRequest) Payer() string { return r.Authorization.From }

// PayTo returns the merchant's address from the requirements.
func (r *PaymentRequest) PayTo() string { return r.Requirements.PayTo }

// Recipient returns authorization.to, the address the payer signed for.
func (r *PaymentRequest) Recipient() string { return r.Authorization.To }

// Network returns the network as the client sent it (the payload's, else the
// requirements'), which is what settle responses echo.
func (r *PaymentRequest) Network() string {
	if r.PayloadNetwork != "" {
		return r.PayloadNetwork
	}
	return r.Requirements.Network
}

// Amount returns the required amount (v2 amount, v1 maxAmountRequired) in
// the asset's smallest unit.
func (r *PaymentRequest) Amount() string { return r.Requirements.Amount }

// ErrInvalidPayload is wrapped by every DecodeRequest error; it maps to
// ReasonInvalidPayload.
var ErrInvalidPayload = errors.New(ReasonInvalidPayload)

// The shapes DecodeRequest reads: a union of v1 and v2 members with raw
// JSON where the two versions disagree on a member's type. checkStrict has
// already refused duplicate members and names in the wrong case, so
// encoding/json's case-insensitive matching never decides anything here.
type wireRequest struct {
	X402Version         json.RawMessage `json:"x402Version"`
	PaymentPayload      json.RawMessage `json:"paymentPayload"`
	PaymentRequirements json.RawMessage `json:"paymentRequirements"`
}

type wireRequirements struct {
	Scheme            string          `json:"scheme"`
	Network           string          `json:"network"`
	Amount            *Decimal        `json:"amount"`
	MaxAmountRequired *Decimal        `json:"maxAmountRequired"`
	Resource          json.RawMessage `json:"resource"`
	PayTo             string          `json:"payTo"`
	MaxTimeoutSeconds json.RawMessage `json:"maxTimeoutSeconds"`
	Asset             string          `json:"asset"`
	Extra             json.RawMessage `json:"extra"`
}

type wirePayload struct {
	X402Version json.RawMessage   `json:"x402Version"`
	Scheme      *string           `json:"scheme"`
	Network     *string           `json:"network"`
	Accepted    *wireRequirements `json:"accepted"`
	Resource    json.RawMessage   `json:"resource"`
	Extensions  json.RawMessage   `json:"extensions"`
	Payload     *struct {
		Signature            string          `json:"signature"`
		Authorization        *Authorization  `json:"authorization"`
		Permit2Authorization json.RawMessage `json:"permit2Authorization"`
	} `json:"payload"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidPayload, fmt.Sprintf(format, args...))
}

// DecodeRequest decodes a /verify or /settle body of either version. It is
// the one decoder of both routes, and strict: JSON that parsers could read
// differently (see checkStrict), a missing or non-integer x402Version, a
// payload or requirements of the other version's shape, a network name of
// the other version's form, a maxTimeoutSeconds that is not a positive
// integer and a zero amount are all refused. Any error wraps
// ErrInvalidPayload and says in words what is wrong; the caller answers
// invalid_payload with it.
func DecodeRequest(body []byte) (*PaymentRequest, error) {
	if !isObject(body) {
		return nil, invalid("the body is not an x402 request: want a JSON object")
	}
	if err := checkStrict(body); err != nil {
		return nil, invalid("%v", err)
	}
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, invalid("the body is not an x402 request: %v", err)
	}
	version, err := parseVersion("x402Version", w.X402Version)
	if err != nil {
		return nil, err
	}
	if !isObject(w.PaymentPayload) {
		return nil, invalid("paymentPayload is required and must be an object")
	}
	if !isObject(w.PaymentRequirements) {
		return nil, invalid("paymentRequirements is required and must be an object")
	}
	var p wirePayload
	if err := json.Unmarshal(w.PaymentPayload, &p); err != nil {
		return nil, invalid("paymentPayload: %v", err)
	}
	var rq wireRequirements
	if err := json.Unmarshal(w.PaymentRequirements, &rq); err != nil {
		return nil, invalid("paymentRequirements: %v", err)
	}
	if len(p.X402Version) > 0 {
		pv, err := parseVersion("paymentPayload.x402Version", p.X402Version)
		if err != nil {
			return nil, err
		}
		if pv != version {
			return nil, invalid("x402Version is %d but paymentPayload.x402Version is %d", version, pv)
		}
	}

	out := &PaymentRequest{X402Version: version}
	if version == Version2 {
		if p.Accepted == nil {
			return nil, invalid("paymentPayload.accepted is required in x402Version 2 (a v1-shaped payload was sent as version 2)")
		}
		if p.Scheme != nil || p.Network != nil {
			return nil, invalid("paymentPayload.scheme and .network are v1 members; in x402Version 2 they live in paymentPayload.accepted")
		}
		out.Scheme, out.PayloadNetwork = p.Accepted.Scheme, p.Accepted.Network
		if _, err := normaliseRequirements(p.Accepted, version, "paymentPayload.accepted"); err != nil {
			return nil, err
		}
	} else {
		if p.Accepted != nil {
			return nil, invalid("paymentPayload.accepted is a v2 member (a v2-shaped payload was sent as version 1)")
		}
		if p.Scheme == nil || p.Network == nil {
			return nil, invalid("paymentPayload.scheme and paymentPayload.network are required in x402Version 1")
		}
		out.Scheme, out.PayloadNetwork = *p.Scheme, *p.Network
		if err := checkNetworkForm(version, "paymentPayload.network", out.PayloadNetwork); err != nil {
			return nil, err
		}
	}

	if p.Payload == nil {
		return nil, invalid("paymentPayload.payload is required")
	}
	if p.Payload.Authorization == nil {
		if len(p.Payload.Permit2Authorization) > 0 {
			return nil, invalid("Permit2 payloads are not supported; sign an EIP-3009 authorization")
		}
		return nil, invalid("paymentPayload.payload.authorization is required")
	}
	out.Authorization = *p.Payload.Authorization
	out.Signature = p.Payload.Signature
	if err := checkAuthorization(&out.Authorization, out.Signature); err != nil {
		return nil, err
	}

	req, err := normaliseRequirements(&rq, version, "paymentRequirements")
	if err != nil {
		return nil, err
	}
	out.Requirements = req
	out.Resource = req.Resource
	if version == Version2 {
		if isObject(p.Resource) {
			var res struct {
				URL string `json:"url"`
			}
			_ = json.Unmarshal(p.Resource, &res) // a non-string url is no URL
			out.Resource = res.URL
		}
		if out.PaymentID, err = paymentID(p.Extensions); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// paymentID reads the payment-identifier extension of a v2 payload's
// extensions: its info.id, checked as the extension's schema says. An
// extension that says required with no id is refused, as the extension's
// 400 says.
func paymentID(extensions json.RawMessage) (string, error) {
	if !isObject(extensions) {
		return "", nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(extensions, &all); err != nil {
		return "", nil
	}
	raw, ok := all[ExtensionPaymentIdentifier]
	if !ok {
		return "", nil
	}
	var ext struct {
		Info *struct {
			Required *bool   `json:"required"`
			ID       *string `json:"id"`
		} `json:"info"`
	}
	const where = "paymentPayload.extensions.payment-identifier"
	if err := json.Unmarshal(raw, &ext); err != nil || ext.Info == nil {
		return "", invalid("%s must be an object with an info object", where)
	}
	if ext.Info.ID == nil {
		if ext.Info.Required != nil && *ext.Info.Required {
			return "", invalid("%s is required but carries no info.id", where)
		}
		return "", nil
	}
	id := *ext.Info.ID
	if len(id) < minPaymentIDLen || len(id) > maxPaymentIDLen || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
		return "", invalid("%s.info.id %q must be %d to %d letters, digits, '-' or '_'", where, truncate(id), minPaymentIDLen, maxPaymentIDLen)
	}
	return id, nil
}

// parseVersion reads an x402Version member: the JSON integer 1 or 2.
func parseVersion(name string, raw json.RawMessage) (int, error) {
	switch s := string(bytes.TrimSpace(raw)); s {
	case "":
		return 0, invalid("%s is required: the integer 1 or 2", name)
	case "1":
		return Version1, nil
	case "2":
		return Version2, nil
	default:
		return 0, invalid("%s %.20s is not supported; use the integer 1 or 2", name, s)
	}
}

// checkNetworkForm holds each version to its naming: 2 uses CAIP-2 ids
// ("eip155:8453"), 1 uses short names ("base").
func checkNetworkForm(version int, name, network string) error {
	caip2 := strings.Contains(network, ":")
	switch {
	case network == "":
		return invalid("%s is required", name)
	case version == Version2 && !caip2:
		return invalid("%s %q is a v1 name; x402Version 2 uses CAIP-2 ids such as \"eip155:8453\"", name, truncate(network))
	case version == Version1 && caip2:
		return invalid("%s %q is a CAIP-2 id; x402Version 1 uses short names such as \"base\"", name, truncate(network))
	}
	return nil
}

// normaliseRequirements checks requirements (or a v2 payload's accepted
// copy, named by what) against version and normalises them.
func normaliseRequirements(rq *wireRequirements, version int, what string) (Requirements, error) {
	r := Requirements{
		Scheme:  rq.Scheme,
		Network: rq.Network,
		Asset:   rq.Asset,
		PayTo:   rq.PayTo,
	}
	if err := checkNetworkForm(version, what+".network", r.Network); err != nil {
		return r, err
	}
	amount, other := rq.Amount, rq.MaxAmountRequired
	amountName, otherName := "amount", "maxAmountRequired"
	if version == Version1 {
		amount, other = other, amount
		amountName, otherName = otherName, amountName
	}
	if other != nil {
		return r, invalid("%s.%s is a member of the other version; x402Version %d names the amount %s", what, otherName, version, amountName)
	}
	if amount == nil {
		return r, invalid("%s.%s is required", what, amountName)
	}
	r.Amount = string(*amount)
	n, err := ParseUint256(r.Amount)
	if err != nil {
		return r, invalid("%s.%s: %v", what, amountName, err)
	}
	if n.Sign() == 0 {
		return r, invalid("%s.%s is zero: a payment must move something (the facilitator would pay gas for nothing)", what, amountName)
	}
	secs, err := strconv.ParseInt(string(bytes.TrimSpace(rq.MaxTimeoutSeconds)), 10, 64)
	if err != nil || secs <= 0 {
		return r, invalid("%s.maxTimeoutSeconds must be a positive integer, not %.20s", what, rq.MaxTimeoutSeconds)
	}
	r.MaxTimeoutSeconds = secs
	if len(rq.Resource) > 0 && rq.Resource[0] == '"' {
		_ = json.Unmarshal(rq.Resource, &r.Resource)
	}
	// extra is free-form: a non-object or non-string name leaves the domain
	// missing, which verification reports with its own reason.
	if isObject(rq.Extra) {
		var extra map[string]json.RawMessage
		if json.Unmarshal(rq.Extra, &extra) == nil {
			_ = json.Unmarshal(extra["name"], &r.Name)
			_ = json.Unmarshal(extra["version"], &r.Version)
		}
	}
	if !IsAddress(r.PayTo) {
		return r, invalid("%s.payTo %q is not a 0x address", what, truncate(r.PayTo))
	}
	if !IsAddress(r.Asset) {
		return r, invalid("%s.asset %q is not a 0x address", what, truncate(r.Asset))
	}
	return r, nil
}

func checkAuthorization(a *Authorization, sig string) error {
	if !IsAddress(a.From) {
		return invalid("authorization.from %q is not a 0x address", truncate(a.From))
	}
	if !IsAddress(a.To) {
		return invalid("authorization.to %q is not a 0x address", truncate(a.To))
	}
	for _, f := range []struct {
		name string
		v    Decimal
	}{{"value", a.Value}, {"validAfter", a.ValidAfter}, {"validBefore", a.ValidBefore}} {
		if _, err := ParseUint256(string(f.v)); err != nil {
			return invalid("authorization.%s: %v", f.name, err)
		}
	}
	if n, ok := hexBytes(a.Nonce); !ok || n != 32 {
		return invalid("authorization.nonce must be 32 bytes of 0x hex")
	}
	if sig == "" {
		return invalid("paymentPayload.payload.signature is required")
	}
	if n, ok := hexBytes(sig); !ok || n == 0 {
		return invalid("paymentPayload.payload.signature is not 0x hex")
	}
	return nil
}

var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// ParseUint256 parses a decimal string into a uint256 value.
func ParseUint256(s string) (*big.Int, error) {
	if s == "" {
		return nil, errors.New("missing")
	}
	if len(s) > 78 {
		return nil, errors.New("too many digits for a uint256")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return nil, fmt.Errorf("%q is not a decimal integer", truncate(s))
		}
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Cmp(maxUint256) > 0 {
		return nil, fmt.Errorf("%q does not fit a uint256", truncate(s))
	}
	return n, nil
}

// IsAddress reports whether s is 0x followed by 40 hex digits (any case).
func IsAddress(s string) bool {
	n, ok := hexBytes(s)
	return ok && n == 20
}

// hexBytes reports the byte length of 0x-prefixed hex.
func hexBytes(s string) (int, bool) {
	if len(s) < 2 || (s[:2] != "0x" && s[:2] != "0X") || len(s)%2 != 0 {
		return 0, false
	}
	for _, c := range s[2:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return 0, false
		}
	}
	return (len(s) - 2) / 2, true
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// EqualAddress compares two hex addresses case-insensitively (checksums are
// a display convention, not part of the address).
func EqualAddress(a, b string) bool { return strings.EqualFold(a, b) }
