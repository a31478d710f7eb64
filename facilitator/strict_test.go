package facilitator_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// TestStrictDecodingSameOnVerifyAndSettle: bodies that parsers read
// differently, or that the contract refuses, get one answer on both routes:
// 400 invalid_payload in the route's payment shape. None of them moves
// money: the signed payment they were made from settles afterwards.
func TestStrictDecodingSameOnVerifyAndSettle(t *testing.T) {
	env := newTestEnv(t)
	body := string(env.payment(t, 2, 10_000))
	v1 := string(env.payment(t, 1, 10_000))
	const top = `{"x402Version":2,`
	if !strings.HasPrefix(body, top) {
		t.Fatalf("payment body starts %.40s", body)
	}
	withTop := func(member string) []byte { return []byte(top + member + "," + body[len(top):]) }
	cases := []struct {
		name string
		body []byte
	}{
		{"duplicate member", withTop(`"x402Version":2`)},
		{"invalid UTF-8", withTop("\"note\":\"\xff\"")},
		{"lone surrogate", withTop(`"note":"\udc00"`)},
		{"member name in the wrong case", []byte(strings.Replace(body, `"paymentRequirements"`, `"PaymentRequirements"`, 1))},
		{"integer above 2^53", withTop(`"note":9007199254740993`)},
		{"no x402Version", []byte("{" + body[len(top):])},
		{"v2 with a short network name", []byte(strings.ReplaceAll(body, `"`+env.Net.ID()+`"`, `"`+env.Net.V1Name()+`"`))},
		{"v1 with a CAIP-2 network name", []byte(strings.ReplaceAll(v1, `"`+env.Net.V1Name()+`"`, `"`+env.Net.ID()+`"`))},
		{"negative maxTimeoutSeconds", []byte(strings.Replace(body, `"maxTimeoutSeconds":60`, `"maxTimeoutSeconds":-5`, 1))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if bytes.Equal(tc.body, []byte(body)) {
				t.Fatal("the case changed nothing")
			}
			vr := do(t, "POST", env.URL+"/verify", tc.body, nil)
			var v x402.VerifyResponse
			vr.decode(t, &v)
			sr := do(t, "POST", env.URL+"/settle", tc.body, nil)
			var s x402.SettleResponse
			sr.decode(t, &s)
			if vr.Status != http.StatusBadRequest || v.IsValid || v.InvalidReason != x402.ReasonInvalidPayload {
				t.Errorf("verify: %d %s, want 400 invalid_payload", vr.Status, vr.Body)
			}
			if sr.Status != http.StatusBadRequest || s.Success || s.ErrorReason != x402.ReasonInvalidPayload || s.Transaction != "" {
				t.Errorf("settle: %d %s, want 400 invalid_payload", sr.Status, sr.Body)
			}
			if v.InvalidMessage != s.ErrorMessage {
				t.Errorf("verify says %q, settle says %q", v.InvalidMessage, s.ErrorMessage)
			}
		})
	}
	a := do(t, "POST", env.URL+"/settle", []byte(body), nil)
	var s x402.SettleResponse
	a.decode(t, &s)
	if !s.Success {
		t.Fatalf("the original payment did not settle after the refused variants: %s", a.Body)
	}
}
