package facilitator_test

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/web"
)

// purchase signs a fresh v2 authorization paying amount for resource, with
// the payment-identifier extension carrying id (none when "").
func (env *testEnv) purchase(tb testing.TB, id, resource string, amount int64, opt evm.PayOptions) []byte {
	tb.Helper()
	req := env.Net.RequirementsV2(env.PayTo.Hex(), big.NewInt(amount), 60)
	body, err := evm.PaymentV2(env.Payer, &x402.ResourceInfo{URL: resource}, req, opt)
	if err != nil {
		tb.Fatal(err)
	}
	if id != "" {
		body.PaymentPayload.Extensions = map[string]json.RawMessage{
			x402.ExtensionPaymentIdentifier: json.RawMessage(`{"info":{"required":false,"id":"` + id + `"}}`),
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

func settleAnswer(tb testing.TB, env *testEnv, body []byte) (answer, x402.SettleResponse) {
	tb.Helper()
	a := do(tb, "POST", env.URL+"/settle", body, nil)
	var sr x402.SettleResponse
	a.decode(tb, &sr)
	return a, sr
}

// TestPaymentIdentifierOnePurchase: a lost answer plus a retry with a fresh
// authorization is one purchase when both carry the same payment id.
func TestPaymentIdentifierOnePurchase(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	dc := mustDevChain(t)
	payer := crypto.PubkeyToAddress(env.Payer.PublicKey)
	balance := func() *big.Int {
		b, err := dc.BalanceOf(ctx, payer)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := balance()

	const id = "pay_7d5d747be160e280504c099d984bcfe0"
	const resource = "https://shop.example.test/report"
	a1, first := settleAnswer(t, env, env.purchase(t, id, resource, 7_000, evm.PayOptions{}))
	if a1.Status != 200 || !first.Success || a1.Header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("first purchase: %d %s", a1.Status, a1.Body)
	}

	// The retry: a new authorization (new nonce), the same purchase and id.
	retry := env.purchase(t, id, resource, 7_000, evm.PayOptions{})
	a2, again := settleAnswer(t, env, retry)
	if a2.Status != 200 || again != first || a2.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("retry: %d %s, want the first purchase's outcome %+v replayed", a2.Status, a2.Body, first)
	}
	if spent := new(big.Int).Sub(before, balance()); spent.Int64() != 7_000 {
		t.Fatalf("the payer paid %s for one purchase, want 7000", spent)
	}
	// The retry's own authorization was never used: verify still finds it valid.
	v := do(t, "POST", env.URL+"/verify", retry, nil)
	var vr x402.VerifyResponse
	v.decode(t, &vr)
	if !vr.IsValid {
		t.Fatalf("the retry's authorization was consumed: %s", v.Body)
	}

	// The same id for another purchase is a 409 that is also a settle answer.
	a3, conflict := settleAnswer(t, env, env.purchase(t, id, resource, 8_000, evm.PayOptions{}))
	p := wantProblem(t, a3, http.StatusConflict, web.SlugConflict)
	if conflict.Success || conflict.ErrorReason != "payment_identifier_conflict" || conflict.ErrorMessage != p.Detail || !strings.EqualFold(conflict.Payer, payer.Hex()) {
		t.Fatalf("conflict answer %s", a3.Body)
	}
	if spent := new(big.Int).Sub(before, balance()); spent.Int64() != 7_000 {
		t.Fatalf("the payer paid %s after the conflict, want 7000", spent)
	}

	// A purchase whose first attempt failed moves to the retry: nothing
	// was bought the first time.
	const id2 = "pay_retry_after_a_failure_0001"
	expired := big.NewInt(1)
	_, failed := settleAnswer(t, env, env.purchase(t, id2, resource, 3_000, evm.PayOptions{ValidBefore: expired}))
	if failed.Success || failed.ErrorReason != x402.ReasonValidBefore {
		t.Fatalf("expired attempt: %+v", failed)
	}
	a4, ok := settleAnswer(t, env, env.purchase(t, id2, resource, 3_000, evm.PayOptions{}))
	if !ok.Success || a4.Header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("retry after a failure: %d %s", a4.Status, a4.Body)
	}
	if spent := new(big.Int).Sub(before, balance()); spent.Int64() != 10_000 {
		t.Fatalf("the payer paid %s in all, want 10000", spent)
	}
}
