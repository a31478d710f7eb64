package x402_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// FuzzDecodeRequest: any input either decodes into a request whose
// invariants hold or fails with ErrInvalidPayload; it never panics. What it
// accepts has a settlement key (RFC 8785 canonical form), and the canonical
// form decodes to the same request: the key and the payment agree.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		bodyV1(`"x402Version":1,`), bodyV2(`"x402Version":2,`), bodyV2(""), `{}`, `{"paymentPayload":{},"paymentRequirements":{}}`, `null`,
		strings.Replace(bodyV2(`"x402Version":2,`), `"extensions":{}`, `"extensions":{"a":"\ud83d\ude00","b":[0.5,1e3]}`, 1),
		strings.Replace(bodyV1(`"x402Version":1,`), `"value":"10000"`, `"value":10000`, 1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := x402.DecodeRequest(b)
		if err != nil {
			if !errors.Is(err, x402.ErrInvalidPayload) {
				t.Fatalf("error does not wrap ErrInvalidPayload: %v", err)
			}
			return
		}
		if r.X402Version != 1 && r.X402Version != 2 {
			t.Fatalf("version %d", r.X402Version)
		}
		if !x402.IsAddress(r.Payer()) || !x402.IsAddress(r.PayTo()) || !x402.IsAddress(r.Recipient()) {
			t.Fatalf("addresses %q %q %q", r.Payer(), r.PayTo(), r.Recipient())
		}
		if _, err := x402.ParseUint256(r.Amount()); err != nil {
			t.Fatalf("amount %q: %v", r.Amount(), err)
		}
		canon, err := jcs.Transform(b)
		if err != nil {
			t.Fatalf("accepted a body with no canonical form: %v", err)
		}
		again, err := x402.DecodeRequest(canon)
		if err != nil {
			t.Fatalf("the canonical form of an accepted body is refused: %v\n%s", err, canon)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("the canonical form decodes differently:\n%+v\n%+v", r, again)
		}
	})
}

// FuzzDecodeHeaders: the header decoders never panic, and whatever decodes
// as a payload re-encodes and decodes to the same version.
func FuzzDecodeHeaders(f *testing.F) {
	f.Add(base64.StdEncoding.EncodeToString([]byte(`{"x402Version":2,"accepted":` + reqV2 + `,"payload":{"signature":"0x01"}}`)))
	f.Add(base64.StdEncoding.EncodeToString([]byte(`{"x402Version":2,"accepts":[` + reqV2 + `]}`)))
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"success":true}`)))
	f.Add("")
	f.Fuzz(func(t *testing.T, h string) {
		if p, err := x402.DecodePaymentSignature(h); err == nil {
			again, err := x402.EncodeHeader(p)
			if err != nil {
				t.Fatal(err)
			}
			if q, err := x402.DecodePaymentSignature(again); err != nil || q.X402Version != p.X402Version {
				t.Fatalf("re-decode: %v", err)
			}
		}
		_, _ = x402.DecodeXPayment(h)
		_, _ = x402.DecodePaymentRequired(h)
		_, _ = x402.DecodePaymentResponse(h)
	})
}
