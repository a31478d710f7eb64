package x402

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxHeaderLen bounds a base64 header value we decode. A payload with a long
// smart-wallet signature stays far below it; anything larger is not x402.
const MaxHeaderLen = 32 << 10

// EncodeHeader encodes v as an x402 header value: standard base64, with
// padding, of its JSON, as the official SDKs write it.
func EncodeHeader(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// DecodeHeader decodes an x402 header value into v. It accepts standard
// base64 with or without padding and the URL-safe alphabet, because clients
// in the wild send all three.
func DecodeHeader(value string, v any) error {
	value = strings.TrimSpace(value)
	if value == "" {
		return errors.New("x402: empty header")
	}
	if len(value) > MaxHeaderLen {
		return fmt.Errorf("x402: header of %d bytes is over the %d limit", len(value), MaxHeaderLen)
	}
	b, err := decodeBase64(value)
	if err != nil {
		return fmt.Errorf("x402: header is not base64: %w", err)
	}
	if !isObject(b) {
		return errors.New("x402: header does not hold a JSON object")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("x402: header JSON: %w", err)
	}
	return nil
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// DecodePaymentSignature decodes a v2 PAYMENT-SIGNATURE header.
func DecodePaymentSignature(value string) (PaymentPayloadV2, error) {
	var p PaymentPayloadV2
	err := DecodeHeader(value, &p)
	if err == nil && p.X402Version != Version2 {
		err = fmt.Errorf("x402: %s holds x402Version %d, want 2", HeaderPaymentSignature, p.X402Version)
	}
	return p, err
}

// DecodeXPayment decodes a v1 X-PAYMENT header. A missing x402Version is
// taken as 1.
func DecodeXPayment(value string) (PaymentPayloadV1, error) {
	var p PaymentPayloadV1
	err := DecodeHeader(value, &p)
	if err == nil && p.X402Version == 0 {
		p.X402Version = Version1
	}
	if err == nil && p.X402Version != Version1 {
		err = fmt.Errorf("x402: %s holds x402Version %d, want 1", HeaderXPayment, p.X402Version)
	}
	return p, err
}

// DecodePaymentRequired decodes a v2 PAYMENT-REQUIRED header.
func DecodePaymentRequired(value string) (PaymentRequiredV2, error) {
	var p PaymentRequiredV2
	err := DecodeHeader(value, &p)
	if err == nil && len(p.Accepts) == 0 {
		err = errors.New("x402: PAYMENT-REQUIRED lists no accepted payment")
	}
	return p, err
}

// DecodePaymentResponse decodes a PAYMENT-RESPONSE or X-PAYMENT-RESPONSE header.
func DecodePaymentResponse(value string) (SettleResponse, error) {
	var r SettleResponse
	return r, DecodeHeader(value, &r)
}
