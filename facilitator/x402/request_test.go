package x402_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// The reference's v1 and v2 example bodies (x402.md §1.4, §1.5).
const (
	sig   = "0x7f448acd9b06a79d5b398177c474a292108b42cbf29281bf50e3fde9ed2d81bf29e7b9605c53f230661acc072b88c76571451d7270e1005ebc6c0b33a18db9081b"
	auth  = `{"from":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","to":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","value":"10000","validAfter":"0","validBefore":"4102444800","nonce":"0x0000000000000000000000000000000000000000000000000000000000000001"}`
	reqV1 = `{"scheme":"exact","network":"base-sepolia","maxAmountRequired":"10000","resource":"https://api.example.com/premium-data","description":"Access to premium market data","mimeType":"application/json","outputSchema":null,"payTo":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","maxTimeoutSeconds":60,"asset":"0x036CbD53842c5426634e7929541eC2318f3dCF7e","extra":{"name":"USDC","version":"2"}}`
	reqV2 = `{"scheme":"exact","network":"eip155:84532","amount":"10000","asset":"0x036CbD53842c5426634e7929541eC2318f3dCF7e","payTo":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","maxTimeoutSeconds":60,"extra":{"name":"USDC","version":"2"}}`
)

func bodyV1(top string) string {
	return `{` + top + `"paymentPayload":{"x402Version":1,"scheme":"exact","network":"base-sepolia","payload":{"signature":"` + sig + `","authorization":` + auth + `}},"paymentRequirements":` + reqV1 + `}`
}

func bodyV2(top string) string {
	return `{` + top + `"paymentPayload":{"x402Version":2,"resource":{"url":"https://api.example.com/premium-data"},"accepted":` + reqV2 + `,"payload":{"signature":"` + sig + `","authorization":` + auth + `},"extensions":{}},"paymentRequirements":` + reqV2 + `}`
}

func TestDecodeRequestAccepts(t *testing.T) {
	cases := []struct {
		name        string
		body        string
		wantVersion int
		wantNetwork string
		wantName    string
	}{
		{"v1 reference body", bodyV1(`"x402Version":1,`), 1, "base-sepolia", "USDC"},
		{"v2 reference body", bodyV2(`"x402Version":2,`), 2, "eip155:84532", "USDC"},
		{"v1 without top-level version", bodyV1(""), 1, "base-sepolia", "USDC"},
		{"v2 without top-level version", bodyV2(""), 2, "eip155:84532", "USDC"},
		{"version as string", bodyV2(`"x402Version":"2",`), 2, "eip155:84532", "USDC"},
		{"extra null", strings.Replace(bodyV1(`"x402Version":1,`), `"extra":{"name":"USDC","version":"2"}`, `"extra":null`, 1), 1, "base-sepolia", ""},
		{"amounts as numbers", strings.Replace(strings.Replace(bodyV1(""), `"maxAmountRequired":"10000"`, `"maxAmountRequired":10000`, 1), `"value":"10000"`, `"value":10000`, 1), 1, "base-sepolia", "USDC"},
		{"maxTimeoutSeconds as string", strings.Replace(bodyV2(""), `"maxTimeoutSeconds":60`, `"maxTimeoutSeconds":"60"`, -1), 2, "eip155:84532", "USDC"},
		{"no version anywhere, v1 shape", strings.Replace(bodyV1(""), `"x402Version":1,`, "", 1), 1, "base-sepolia", "USDC"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := x402.DecodeRequest([]byte(c.body))
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if r.X402Version != c.wantVersion || r.Network() != c.wantNetwork || r.Requirements.Name != c.wantName {
				t.Fatalf("got version %d network %q name %q", r.X402Version, r.Network(), r.Requirements.Name)
			}
			if r.Payer() != "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266" || r.PayTo() != "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" ||
				r.Recipient() != r.PayTo() || r.Amount() != "10000" || r.Scheme != "exact" || r.Signature != sig {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	v2 := bodyV2(`"x402Version":2,`)
	cases := []struct {
		name, body, msg string
	}{
		{"not JSON", `{"x402Version":`, "not an x402 request"},
		{"array", `[]`, "JSON object"},
		{"no payload", `{"x402Version":2,"paymentRequirements":` + reqV2 + `}`, "paymentPayload is required"},
		{"payload not an object", `{"x402Version":2,"paymentPayload":"x","paymentRequirements":` + reqV2 + `}`, "paymentPayload is required"},
		{"no requirements", `{"x402Version":2,"paymentPayload":{}}`, "paymentRequirements is required"},
		{"version 3", strings.Replace(strings.Replace(v2, `"x402Version":2`, `"x402Version":3`, -1), "", "", 1), "not supported"},
		{"versions disagree", strings.Replace(v2, `"x402Version":2,"paymentPayload"`, `"x402Version":1,"paymentPayload"`, 1), "x402Version is 1"},
		{"permit2 payload", strings.Replace(v2, `"authorization":`+auth, `"permit2Authorization":{}`, 1), "Permit2"},
		{"no authorization", strings.Replace(v2, `,"authorization":`+auth, ``, 1), "authorization is required"},
		{"bad from", strings.Replace(v2, `"from":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"`, `"from":"0x12"`, 1), "authorization.from"},
		{"negative value", strings.Replace(v2, `"value":"10000"`, `"value":"-1"`, 1), "authorization.value"},
		{"value over uint256", strings.Replace(v2, `"value":"10000"`, `"value":"`+strings.Repeat("9", 78)+`"`, 1), "uint256"},
		{"short nonce", strings.Replace(v2, `0x0000000000000000000000000000000000000000000000000000000000000001`, `0x01`, 1), "nonce"},
		{"empty signature", strings.Replace(v2, sig, ``, 1), "signature is required"},
		{"signature not hex", strings.Replace(v2, sig, `0xzz`, 1), "not 0x hex"},
		{"amount not decimal", strings.Replace(v2, `"amount":"10000","asset":"0x036CbD53842c5426634e7929541eC2318f3dCF7e","payTo":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","maxTimeoutSeconds":60,"extra":{"name":"USDC","version":"2"}}}`, `"amount":"1e4","asset":"0x036CbD53842c5426634e7929541eC2318f3dCF7e","payTo":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","maxTimeoutSeconds":60,"extra":{"name":"USDC","version":"2"}}}`, 1), "amount"},
		{"scheme not a string", strings.Replace(v2, `"paymentRequirements":{"scheme":"exact"`, `"paymentRequirements":{"scheme":7`, 1), "paymentRequirements"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := x402.DecodeRequest([]byte(c.body))
			if err == nil {
				t.Fatalf("accepted %s", c.body)
			}
			if !errors.Is(err, x402.ErrInvalidPayload) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q, want ErrInvalidPayload mentioning %q", err, c.msg)
			}
		})
	}
}

func TestEncodeCanonicalShapes(t *testing.T) {
	req := x402.PaymentRequirementsV1{Scheme: "exact", Network: "base", MaxAmountRequired: "1", PayTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", Asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", MaxTimeoutSeconds: 60}
	b, _ := json.Marshal(req)
	// v1 requires resource and description even when empty; numbers stay strings.
	for _, want := range []string{`"resource":""`, `"description":""`, `"maxAmountRequired":"1"`, `"maxTimeoutSeconds":60`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	sr, _ := json.Marshal(x402.SettleResponse{Network: "base"})
	if string(sr) != `{"success":false,"transaction":"","network":"base"}` {
		t.Errorf("settle response %s", sr)
	}
	p := x402.NewPayloadV1(req, x402.Authorization{From: "0x1"}, []byte{0xab, 0xcd})
	if p.Payload.Signature != "0xabcd" || p.X402Version != 1 || p.Network != "base" {
		t.Errorf("payload %+v", p)
	}
}
