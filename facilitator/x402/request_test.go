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
		{"extra null", strings.Replace(bodyV1(`"x402Version":1,`), `"extra":{"name":"USDC","version":"2"}`, `"extra":null`, 1), 1, "base-sepolia", ""},
		{"amounts as small numbers", strings.Replace(strings.Replace(bodyV1(`"x402Version":1,`), `"maxAmountRequired":"10000"`, `"maxAmountRequired":10000`, 1), `"value":"10000"`, `"value":10000`, 1), 1, "base-sepolia", "USDC"},
		{"payload without its own version", strings.Replace(bodyV2(`"x402Version":2,`), `"paymentPayload":{"x402Version":2,`, `"paymentPayload":{`, 1), 2, "eip155:84532", "USDC"},
		{"a surrogate pair and escapes", strings.Replace(bodyV2(`"x402Version":2,`), `"extensions":{}`, `"extensions":{"note":"\ud83d\ude00 \\u0041 \"q\""}`, 1), 2, "eip155:84532", "USDC"},
		{"exact fractions and exponents elsewhere", strings.Replace(bodyV2(`"x402Version":2,`), `"extensions":{}`, `"extensions":{"a":0.1,"b":1e2,"c":-0.5,"d":9007199254740992,"e":[1.0]}`, 1), 2, "eip155:84532", "USDC"},
		{"unknown members in another case outside x402 objects", strings.Replace(bodyV2(`"x402Version":2,`), `"extensions":{}`, `"extensions":{"Scheme":1,"scheme":2}`, 1), 2, "eip155:84532", "USDC"},
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
				r.Recipient() != r.PayTo() || r.Amount() != "10000" || r.Scheme != "exact" || r.Signature != sig || r.Requirements.MaxTimeoutSeconds != 60 {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

// TestDecodeRequestRejects is the strict decoder's table: every body here
// is invalid_payload on /verify and /settle alike.
func TestDecodeRequestRejects(t *testing.T) {
	v2 := bodyV2(`"x402Version":2,`)
	v1 := bodyV1(`"x402Version":1,`)
	inExtensions := func(member string) string {
		return strings.Replace(v2, `"extensions":{}`, `"extensions":{`+member+`}`, 1)
	}
	cases := []struct {
		name, body, msg string
	}{
		{"not JSON", `{"x402Version":`, "not an x402 request"},
		{"array", `[]`, "JSON object"},
		{"trailing data", v2 + `{}`, "after top-level value"},
		{"no payload", `{"x402Version":2,"paymentRequirements":` + reqV2 + `}`, "paymentPayload is required"},
		{"payload not an object", `{"x402Version":2,"paymentPayload":"x","paymentRequirements":` + reqV2 + `}`, "paymentPayload is required"},
		{"no requirements", `{"x402Version":2,"paymentPayload":{}}`, "paymentRequirements is required"},

		// Bodies parsers read differently.
		{"duplicate top-level member", strings.Replace(v2, `"x402Version":2,`, `"x402Version":2,"x402Version":2,`, 1), `"x402Version" twice`},
		{"duplicate member deep inside", strings.Replace(v2, `"value":"10000"`, `"value":"10000","value":"1"`, 1), `"value" twice`},
		{"duplicate written with an escape", strings.Replace(v2, `"value":"10000"`, `"value":"10000","\u0076alue":"1"`, 1), `"value" twice`},
		{"duplicate in extensions", inExtensions(`"a":1,"a":2`), `"a" twice`},
		{"invalid UTF-8 byte", inExtensions(`"a":"` + "\xff" + `"`), "UTF-8"},
		{"overlong UTF-8", inExtensions(`"a":"` + "\xc0\xaf" + `"`), "UTF-8"},
		{"lone high surrogate", inExtensions(`"a":"\ud800"`), "lone high surrogate"},
		{"high surrogate then a letter", inExtensions(`"a":"\ud800x"`), "lone high surrogate"},
		{"two high surrogates", inExtensions(`"a":"\ud800\ud800"`), "lone high surrogate"},
		{"lone low surrogate", inExtensions(`"a":"\udc00"`), "lone low surrogate"},
		{"lone surrogate in a member name", inExtensions(`"\udfff":1`), "lone low surrogate"},
		{"member name in the wrong case", strings.Replace(v2, `"x402Version":2,"paymentPayload"`, `"X402Version":2,"paymentPayload"`, 1), `it is "x402Version"`},
		{"requirements member in the wrong case", strings.Replace(v2, `"paymentRequirements":{"scheme":"exact"`, `"paymentRequirements":{"Scheme":"exact"`, 1), `it is "scheme"`},
		{"authorization member in the wrong case", strings.Replace(v2, `"from":`, `"FROM":`, 1), `it is "from"`},
		{"wrong case by Unicode folding (long s)", strings.Replace(v2, `"paymentRequirements":{"scheme":"exact"`, `"paymentRequirements":{"\u017fcheme":"exact"`, 1), `it is "scheme"`},
		{"integer above 2^53", strings.Replace(v1, `"value":"10000"`, `"value":9007199254740993`, 1), "changes value"},
		{"integer above 2^53 in extensions", inExtensions(`"n":12345678901234567890`), "changes value"},
		{"over-precise decimal", inExtensions(`"n":0.10000000000000000001`), "changes value"},
		{"number out of range", inExtensions(`"n":1e400`), "changes value"},
		{"huge exponent", inExtensions(`"n":1e-99999999999`), "changes value"},

		// Versions, shapes and network names.
		{"no x402Version", bodyV2(""), "x402Version is required"},
		{"no x402Version, v1 shape", strings.Replace(bodyV1(""), `"x402Version":1,`, "", 1), "x402Version is required"},
		{"x402Version as a string", bodyV2(`"x402Version":"2",`), "use the integer 1 or 2"},
		{"x402Version 2.0", bodyV2(`"x402Version":2.0,`), "use the integer 1 or 2"},
		{"version 3", strings.Replace(v2, `"x402Version":2`, `"x402Version":3`, -1), "not supported"},
		{"versions disagree", strings.Replace(v2, `"x402Version":2,"paymentPayload"`, `"x402Version":1,"paymentPayload"`, 1), "x402Version is 1"},
		{"v1-shaped body declared version 2", strings.Replace(bodyV1(`"x402Version":2,`), `"paymentPayload":{"x402Version":1,`, `"paymentPayload":{`, 1), "accepted is required"},
		{"v2-shaped body declared version 1", strings.Replace(bodyV2(`"x402Version":1,`), `"paymentPayload":{"x402Version":2,`, `"paymentPayload":{`, 1), "v2 member"},
		{"v2 with maxAmountRequired", strings.Replace(v2, `"paymentRequirements":{"scheme":"exact","network":"eip155:84532","amount":"10000"`, `"paymentRequirements":{"scheme":"exact","network":"eip155:84532","maxAmountRequired":"10000"`, 1), "maxAmountRequired is a member of the other version"},
		{"v1 with amount", strings.Replace(v1, `"maxAmountRequired":"10000"`, `"amount":"10000"`, 1), "amount is a member of the other version"},
		{"v2 with a short network name", strings.Replace(v2, `"eip155:84532"`, `"base-sepolia"`, -1), "is a v1 name"},
		{"v2 requirements with a short network name", strings.Replace(v2, `"paymentRequirements":{"scheme":"exact","network":"eip155:84532"`, `"paymentRequirements":{"scheme":"exact","network":"base-sepolia"`, 1), "paymentRequirements.network \"base-sepolia\" is a v1 name"},
		{"v1 with a CAIP-2 network", strings.Replace(v1, `"base-sepolia"`, `"eip155:84532"`, -1), "is a CAIP-2 id"},
		{"negative maxTimeoutSeconds", strings.Replace(v2, `"maxTimeoutSeconds":60`, `"maxTimeoutSeconds":-5`, -1), "maxTimeoutSeconds must be a positive integer"},
		{"zero maxTimeoutSeconds", strings.Replace(v1, `"maxTimeoutSeconds":60`, `"maxTimeoutSeconds":0`, -1), "maxTimeoutSeconds must be a positive integer"},
		{"maxTimeoutSeconds as a string", strings.Replace(v2, `"maxTimeoutSeconds":60`, `"maxTimeoutSeconds":"60"`, -1), "maxTimeoutSeconds must be a positive integer"},
		{"no maxTimeoutSeconds", strings.Replace(v1, `"maxTimeoutSeconds":60,`, ``, -1), "maxTimeoutSeconds must be a positive integer"},
		{"zero-value payment", strings.Replace(strings.Replace(v2, `"amount":"10000"`, `"amount":"0"`, -1), `"value":"10000"`, `"value":"0"`, 1), "is zero"},
		{"zero-value v1 payment", strings.Replace(strings.Replace(v1, `"maxAmountRequired":"10000"`, `"maxAmountRequired":"0"`, -1), `"value":"10000"`, `"value":"0"`, 1), "is zero"},
		{"no amount", strings.Replace(v2, `"amount":"10000",`, ``, -1), "amount is required"},

		// Payload contents.
		{"permit2 payload", strings.Replace(v2, `"authorization":`+auth, `"permit2Authorization":{}`, 1), "Permit2"},
		{"no authorization", strings.Replace(v2, `,"authorization":`+auth, ``, 1), "authorization is required"},
		{"bad from", strings.Replace(v2, `"from":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"`, `"from":"0x12"`, 1), "authorization.from"},
		{"negative value", strings.Replace(v2, `"value":"10000"`, `"value":"-1"`, 1), "authorization.value"},
		{"value over uint256", strings.Replace(v2, `"value":"10000"`, `"value":"`+strings.Repeat("9", 78)+`"`, 1), "uint256"},
		{"short nonce", strings.Replace(v2, `0x0000000000000000000000000000000000000000000000000000000000000001`, `0x01`, 1), "nonce"},
		{"empty signature", strings.Replace(v2, sig, ``, 1), "signature is required"},
		{"signature not hex", strings.Replace(v2, sig, `0xzz`, 1), "not 0x hex"},
		{"amount not decimal", strings.Replace(v2, `"paymentRequirements":{"scheme":"exact","network":"eip155:84532","amount":"10000"`, `"paymentRequirements":{"scheme":"exact","network":"eip155:84532","amount":"1e4"`, 1), "amount"},
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

// TestPaymentIdentifier reads the payment-identifier extension's id and
// the purchase fingerprint it is bound to.
func TestPaymentIdentifier(t *testing.T) {
	withExt := func(ext string) string {
		return strings.Replace(bodyV2(`"x402Version":2,`), `"extensions":{}`, `"extensions":{"payment-identifier":`+ext+`}`, 1)
	}
	const id = "pay_7d5d747be160e280504c099d984bcfe0"
	r, err := x402.DecodeRequest([]byte(withExt(`{"info":{"required":false,"id":"` + id + `"},"schema":{"type":"object"}}`)))
	if err != nil || r.PaymentID != id || r.Resource != "https://api.example.com/premium-data" {
		t.Fatalf("decode: %+v %v", r, err)
	}
	for _, ok := range []string{`{"info":{"required":false}}`, `{"info":{}}`} {
		if r, err := x402.DecodeRequest([]byte(withExt(ok))); err != nil || r.PaymentID != "" {
			t.Errorf("%s: %+v %v", ok, r, err)
		}
	}
	for _, bad := range []string{`{"info":{"id":"short"}}`, `{"info":{"id":"pay_7d5d747be160e2/0504c"}}`, `{"info":{"id":"` + strings.Repeat("a", 129) + `"}}`,
		`{"info":{"id":7}}`, `{"info":{"required":true}}`, `{}`, `"x"`} {
		if _, err := x402.DecodeRequest([]byte(withExt(bad))); err == nil || !strings.Contains(err.Error(), "payment-identifier") {
			t.Errorf("%s: accepted (%v)", bad, err)
		}
	}
	v1, _ := x402.DecodeRequest([]byte(bodyV1(`"x402Version":1,`)))
	if v1.Resource != "https://api.example.com/premium-data" {
		t.Errorf("v1 resource %q", v1.Resource)
	}

	// Another authorization for the same purchase keeps the fingerprint;
	// other terms change it.
	base, _ := x402.DecodeRequest([]byte(bodyV2(`"x402Version":2,`)))
	other, _ := x402.DecodeRequest([]byte(strings.Replace(bodyV2(`"x402Version":2,`), "0x0000000000000000000000000000000000000000000000000000000000000001", "0x0000000000000000000000000000000000000000000000000000000000000002", 1)))
	if base.PurchaseFingerprint() != other.PurchaseFingerprint() {
		t.Error("a fresh authorization changed the purchase fingerprint")
	}
	for _, change := range [][2]string{
		{`"amount":"10000"`, `"amount":"10001"`},
		{`"payTo":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"`, `"payTo":"0x90F79bf6EB2c4f870365E785982E1f101E93b906"`},
		{`premium-data"}`, `other-data"}`},
	} {
		b := strings.ReplaceAll(bodyV2(`"x402Version":2,`), change[0], change[1])
		c, err := x402.DecodeRequest([]byte(b))
		if err != nil {
			t.Fatal(err)
		}
		if c.PurchaseFingerprint() == base.PurchaseFingerprint() {
			t.Errorf("changing %s kept the fingerprint", change[0])
		}
	}
}

// BenchmarkDecodeRequest: the strict decoder on the reference v2 body (the
// strict pass, then the typed decode).
func BenchmarkDecodeRequest(b *testing.B) {
	body := []byte(bodyV2(`"x402Version":2,`))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x402.DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
