package facilitator_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ardx-dev/ardx/facilitator"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// FuzzVerify drives POST /verify's decoding path through the real router
// and engine: whatever the body, the answer is the verify shape with a
// status of 200, 400 or 413, never a problem document or a 500.
func FuzzVerify(f *testing.F) {
	env := newTestEnv(f)
	f.Add(env.payment(f, 2, 10_000))
	f.Add(env.payment(f, 1, 10_000))
	f.Add([]byte(facilitator.ExampleRequest()))
	f.Add([]byte(`{"x402Version":1,"paymentPayload":{"x402Version":1,"scheme":"exact","network":"dev","payload":{"signature":"0x","authorization":null}},"paymentRequirements":{"extra":null,"outputSchema":null}}`))
	f.Add([]byte(`{"paymentPayload":[],"paymentRequirements":"x"}`))
	f.Add([]byte(`null`))
	f.Add([]byte("\x00\xff{"))
	h := env.Svc.Handler()

	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/verify", bytes.NewReader(body))
		req.RemoteAddr = "192.0.2.1:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body.Bytes())
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q: %s", ct, rec.Body.Bytes())
		}
		var vr x402.VerifyResponse
		dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&vr); err != nil {
			t.Fatalf("answer %q is not the verify shape: %v", rec.Body.Bytes(), err)
		}
		if rec.Code != http.StatusOK && (vr.IsValid || vr.InvalidReason != x402.ReasonInvalidPayload) {
			t.Fatalf("status %d with %+v", rec.Code, vr)
		}
		if vr.IsValid && (vr.Payer == "" || vr.InvalidReason != "") {
			t.Fatalf("valid answer %+v without payer or with a reason", vr)
		}
		if !vr.IsValid && vr.InvalidReason == "" {
			t.Fatalf("invalid answer %+v without a reason", vr)
		}
	})
}
