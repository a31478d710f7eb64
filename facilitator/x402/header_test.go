package x402_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

func TestHeaderRoundTrip(t *testing.T) {
	var p x402.PaymentPayloadV2
	if err := jsonUnmarshal(`{"x402Version":2,"accepted":`+reqV2+`,"payload":{"signature":"`+sig+`","authorization":`+auth+`}}`, &p); err != nil {
		t.Fatal(err)
	}
	h, err := x402.EncodeHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := base64.StdEncoding.DecodeString(h); err != nil {
		t.Fatalf("not standard padded base64: %v", err)
	}
	got, err := x402.DecodePaymentSignature(h)
	if err != nil || got.Accepted.Network != "eip155:84532" || got.Payload.Authorization.Value != "10000" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// Unpadded and URL-safe forms are accepted too.
	raw := strings.TrimRight(h, "=")
	if _, err := x402.DecodePaymentSignature(raw); err != nil {
		t.Errorf("unpadded: %v", err)
	}
	url := strings.NewReplacer("+", "-", "/", "_").Replace(raw)
	if _, err := x402.DecodePaymentSignature(url); err != nil {
		t.Errorf("url-safe: %v", err)
	}
	if _, err := x402.DecodeXPayment(h); err == nil {
		t.Error("a v2 payload decoded as X-PAYMENT")
	}
}

func TestHeaderDecodersReject(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cases := []struct {
		name   string
		decode func(string) error
		value  string
	}{
		{"empty", func(s string) error { _, err := x402.DecodePaymentSignature(s); return err }, ""},
		{"not base64", func(s string) error { _, err := x402.DecodePaymentSignature(s); return err }, "!!!"},
		{"not an object", func(s string) error { _, err := x402.DecodeXPayment(s); return err }, enc(`[1]`)},
		{"too long", func(s string) error { _, err := x402.DecodePaymentResponse(s); return err }, strings.Repeat("A", x402.MaxHeaderLen+4)},
		{"required without accepts", func(s string) error { _, err := x402.DecodePaymentRequired(s); return err }, enc(`{"x402Version":2,"accepts":[]}`)},
		{"wrong version", func(s string) error { _, err := x402.DecodePaymentSignature(s); return err }, enc(`{"x402Version":1}`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.decode(c.value); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	r, err := x402.DecodePaymentResponse(enc(`{"success":true,"transaction":"0xab","network":"eip155:8453","payer":"0x1"}`))
	if err != nil || !r.Success || r.Transaction != "0xab" {
		t.Fatalf("payment response %+v %v", r, err)
	}
	p, err := x402.DecodeXPayment(enc(`{"scheme":"exact","network":"base","payload":{"signature":"0x01"}}`))
	if err != nil || p.X402Version != 1 {
		t.Fatalf("X-PAYMENT without version: %+v %v", p, err)
	}
}
