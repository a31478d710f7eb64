package x402pay_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry/access/x402pay"
)

var offer = x402pay.Offer{
	Resource: x402pay.Resource{URL: "http://registry.test/credits", Description: "credits"},
	V2: x402pay.Requirements{Scheme: "exact", Network: "eip155:1337", Amount: "1000000",
		Asset: "0x5FbDB2315678afecb367f032d93F642f64180aa3", PayTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
		MaxTimeoutSeconds: 300, Extra: &x402pay.Extra{Name: "USDC", Version: "2"}},
}

func payload() map[string]any {
	var accepted map[string]any
	b, _ := json.Marshal(offer.V2)
	json.Unmarshal(b, &accepted)
	return map[string]any{
		"x402Version": 2,
		"resource":    map[string]any{"url": offer.Resource.URL},
		"accepted":    accepted,
		"payload": map[string]any{
			"signature": "0x" + strings.Repeat("ab", 65),
			"authorization": map[string]any{
				"from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "to": offer.V2.PayTo, "value": "1000000",
				"validAfter": "0", "validBefore": "4102444800", "nonce": "0x" + strings.Repeat("01", 32),
			},
		},
	}
}

func encode(v any) string {
	b, _ := json.Marshal(v)
	return base64.StdEncoding.EncodeToString(b)
}

// TestDecodePayment: the payment header is read strictly; what it signed
// must be exactly the offer.
func TestDecodePayment(t *testing.T) {
	mutate := func(f func(p map[string]any)) string {
		p := payload()
		f(p)
		return encode(p)
	}
	auth := func(p map[string]any) map[string]any {
		return p["payload"].(map[string]any)["authorization"].(map[string]any)
	}
	tests := []struct {
		name    string
		headers map[string][]string
		want    error
	}{
		{"valid", map[string][]string{"PAYMENT-SIGNATURE": {encode(payload())}}, nil},
		{"url-safe unpadded base64", map[string][]string{"PAYMENT-SIGNATURE": {strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(encode(payload())), "=")}}, nil},
		{"no header", nil, x402pay.ErrNoPayment},
		{"two headers", map[string][]string{"PAYMENT-SIGNATURE": {encode(payload()), encode(payload())}}, x402pay.ErrBadPayment},
		{"v1 header on a v2-only network", map[string][]string{"X-PAYMENT": {encode(payload())}}, x402pay.ErrBadPayment},
		{"not base64", map[string][]string{"PAYMENT-SIGNATURE": {"%%%"}}, x402pay.ErrBadPayment},
		{"not an object", map[string][]string{"PAYMENT-SIGNATURE": {base64.StdEncoding.EncodeToString([]byte(`[1]`))}}, x402pay.ErrBadPayment},
		{"trailing data", map[string][]string{"PAYMENT-SIGNATURE": {base64.StdEncoding.EncodeToString([]byte(`{"x402Version":2} {}`))}}, x402pay.ErrBadPayment},
		{"unknown member", map[string][]string{"PAYMENT-SIGNATURE": {mutate(func(p map[string]any) { p["extra"] = 1 })}}, x402pay.ErrBadPayment},
		{"version 1 in PAYMENT-SIGNATURE", map[string][]string{"PAYMENT-SIGNATURE": {mutate(func(p map[string]any) { p["x402Version"] = 1 })}}, x402pay.ErrBadPayment},
		{"other amount accepted", map[string][]string{"PAYMENT-SIGNATURE": {mutate(func(p map[string]any) { p["accepted"].(map[string]any)["amount"] = "1" })}}, x402pay.ErrBadPayment},
		{"other payTo accepted", map[string][]string{"PAYMENT-SIGNATURE": {mutate(func(p map[string]any) {
			p["accepted"].(map[string]any)["payTo"] = "0x0000000000000000000000000000000000000001"
		})}}, x402pay.ErrBadPayment},
		{"authorization pays someone else", map[string][]string{"PAYMENT-SIGNATURE": {mutate(func(p map[string]any) {
			auth(p)["to"] = "0x0000000000000000000000000000000000000001"
		})}}, x402pay.ErrBadPayment},
		{"authorization moves less", map[string][]string{"PAYMENT-SIGNATURE": {mutate(func(p map[string]any) { auth(p)["value"] = "999999" })}}, x402pay.ErrBadPayment},
		{"short nonce", map[string][]string{"PAYMENT-SIGNATURE": {mutate(func(p map[string]any) { auth(p)["nonce"] = "0x01" })}}, x402pay.ErrBadPayment},
		{"no authorization", map[string][]string{"PAYMENT-SIGNATURE": {mutate(func(p map[string]any) { delete(p["payload"].(map[string]any), "authorization") })}}, x402pay.ErrBadPayment},
		{"oversized", map[string][]string{"PAYMENT-SIGNATURE": {strings.Repeat("A", 40<<10)}}, x402pay.ErrBadPayment},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/credits", nil)
			for k, vs := range tc.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			p, err := x402pay.DecodePayment(r, offer)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err != nil {
				return
			}
			var body struct {
				X402Version         int                  `json:"x402Version"`
				PaymentRequirements x402pay.Requirements `json:"paymentRequirements"`
			}
			if json.Unmarshal(p.Body, &body) != nil || body.X402Version != 2 || body.PaymentRequirements.Amount != "1000000" {
				t.Fatalf("settle body: %s", p.Body)
			}
			if !strings.HasPrefix(p.Ref, "x402:eip155:1337:") || !strings.HasSuffix(p.Ref, strings.Repeat("01", 32)) {
				t.Fatalf("ref %q", p.Ref)
			}
		})
	}
}

// TestWritePaymentRequired: a 402 carries the v2 terms in PAYMENT-REQUIRED
// and a v1 body.
func TestWritePaymentRequired(t *testing.T) {
	w := httptest.NewRecorder()
	x402pay.WritePaymentRequired(w, offer, "", nil)
	if w.Code != http.StatusPaymentRequired {
		t.Fatalf("status %d", w.Code)
	}
	raw, err := base64.StdEncoding.DecodeString(w.Header().Get("PAYMENT-REQUIRED"))
	if err != nil {
		t.Fatal(err)
	}
	var pr x402pay.PaymentRequired
	if err := json.Unmarshal(raw, &pr); err != nil || pr.X402Version != 2 || len(pr.Accepts) != 1 || pr.Accepts[0].Amount != offer.V2.Amount || pr.Accepts[0].PayTo != offer.V2.PayTo || *pr.Accepts[0].Extra != *offer.V2.Extra || pr.Resource.URL != offer.Resource.URL || pr.Error == "" {
		t.Fatalf("PAYMENT-REQUIRED: %s %v", raw, err)
	}
	var body x402pay.PaymentRequiredV1
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.X402Version != 1 || body.Accepts == nil {
		t.Fatalf("body: %s", w.Body)
	}
}

// FuzzDecodePayment: no header value makes the decoder panic, and what it
// accepts pays exactly the offer.
func FuzzDecodePayment(f *testing.F) {
	f.Add(encode(payload()))
	f.Add("e30")
	f.Add(base64.StdEncoding.EncodeToString([]byte(`{"x402Version":2,"accepted":null}`)))
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest(http.MethodPost, "/credits", nil)
		r.Header.Set("PAYMENT-SIGNATURE", v)
		p, err := x402pay.DecodePayment(r, offer)
		if err != nil {
			return
		}
		var body struct {
			PaymentPayload x402pay.PayloadV2 `json:"paymentPayload"`
		}
		if json.Unmarshal(p.Body, &body) != nil || body.PaymentPayload.Payload.Authorization.Value != offer.V2.Amount ||
			!strings.EqualFold(body.PaymentPayload.Payload.Authorization.To, offer.V2.PayTo) {
			t.Fatalf("accepted a payment that does not pay the offer: %s", p.Body)
		}
	})
}
