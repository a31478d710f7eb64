package settle_test

import (
	"context"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// FuzzSettleBody feeds arbitrary request bodies to Settle (the bytes come
// straight from the network) and checks that every answer is a well-formed
// settle response, that asking twice gives the same answer, and that money
// moves at most once per distinct successful body.
func FuzzSettleBody(f *testing.F) {
	f.Add(newPayment(1).body(f))
	f.Add(newPayment(2).body(f))
	f.Add([]byte(`{"x402Version":1,"paymentPayload":{"scheme":"exact","network":"base-sepolia","payload":{}},"paymentRequirements":{}}`))
	f.Add([]byte(`{"a":1e400}`))
	f.Add([]byte(`"\ud800"`))
	f.Add([]byte(`not json`))
	f.Add([]byte{})

	c := newFakeChain()
	c.fund(payerA, 1<<40)
	// The fake chain answers at once: a pending answer means a stuck flight.
	e, _ := newTestEngine(f, "", settle.Options{SettleTimeout: 5 * time.Second}, c)
	successes := map[string]bool{}

	f.Fuzz(func(t *testing.T, body []byte) {
		resp, _, err := e.Settle(context.Background(), body, "")
		if err != nil {
			t.Fatalf("settle error: %v", err)
		}
		if resp.Success == (resp.ErrorReason != "") {
			t.Fatalf("success and reason disagree: %+v", resp)
		}
		if resp.ErrorReason == x402.ReasonSettlementPending {
			t.Fatalf("no outcome within 5s on an instant chain: %+v", resp)
		}
		again, _, err := e.Settle(context.Background(), body, "")
		if err != nil || again != resp {
			t.Fatalf("second answer %+v (%v) differs from first %+v", again, err, resp)
		}
		if resp.Success {
			key, _ := settle.BodyKey(body)
			successes[key] = true
		}
		if transfers, _, _ := c.stats(); transfers > len(successes) {
			t.Fatalf("%d transfers for %d successful bodies", transfers, len(successes))
		}
	})
}
