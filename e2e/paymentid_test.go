//go:build e2e

package e2e

import (
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// TestPaymentIdentifierWithOfficialClient: the official client signs a
// fresh authorization for every 402, so a merchant whose settle answer got
// lost and who retries holds a second, different body. With the official
// @x402/extensions payment-identifier id in both (declared by the merchant's
// 402, appended by the client, as the extension's example does), ardx
// settles the purchase once, across a crash of the facilitator between the
// two: the id is bound durably. The same id for other terms is a 409.
func TestPaymentIdentifierWithOfficialClient(t *testing.T) {
	dir := npmDir(t)
	env := newPayEnv(t)
	ardx, url := env.startFacilitator(t)

	const id = "pay_e2e_0123456789abcdef0123"
	payerKey := hex.EncodeToString(crypto.FromECDSA(env.payerKey))
	job := func(name string, value int64, paymentID string) signJob {
		return signJob{ID: name, Version: x402.Version2, PayerKey: payerKey, PaymentID: paymentID,
			Requirements: env.officialRequirements(x402.Version2, devNetwork, value), ChainID: env.chain.chainID.Int64()}
	}
	payloads := signOfficial(t, dir, []signJob{
		job("first", 10_000, id), job("retry", 10_000, id), job("other terms", 20_000, id),
	})
	for name, p := range payloads {
		ext, _ := p["extensions"].(map[string]any)
		info, _ := member(t, ext, x402.ExtensionPaymentIdentifier, "info")["id"].(string)
		if info != id {
			t.Fatalf("%s: the official client put payment id %q in the payload, want %q", name, info, id)
		}
	}
	body := func(name string, value int64) map[string]any {
		return paymentBody(t, x402.Version2, payloads[name], env.officialRequirements(x402.Version2, devNetwork, value))
	}

	first := postAnswer(t, url+"/settle", body("first", 10_000))
	if ok, _ := first.boolean("success"); !ok {
		t.Fatalf("the first attempt did not settle: %s", first)
	}

	// The facilitator crashes after answering (the merchant lost the
	// answer); the retry reaches a restarted process.
	killArdx(t, ardx)
	_, url = env.startFacilitator(t)
	retry := postAnswer(t, url+"/settle", body("retry", 10_000))
	replayed := retry.header.Get("Idempotency-Replayed")
	if ok, _ := retry.boolean("success"); !ok || retry.str("transaction") != first.str("transaction") || replayed != "true" {
		t.Fatalf("the retry answered %s (Idempotency-Replayed %q), want the first purchase %s replayed", retry, replayed, first)
	}

	conflict := postAnswer(t, url+"/settle", body("other terms", 20_000))
	if conflict.status != http.StatusConflict || conflict.str("errorReason") != "payment_identifier_conflict" || conflict.fields["success"] != false ||
		conflict.str("type") == "" || conflict.fields["status"] != float64(409) {
		t.Fatalf("the same id for other terms answered %s, want a 409 that is a problem and a failed settle", conflict)
	}

	used := env.token.authorizationsUsed(t, env.payer)
	if len(used) != 1 {
		t.Fatalf("%d authorizations used on chain, want 1 (one purchase)", len(used))
	}
	if got := env.token.balanceOf(t, env.merchant); got.Int64() != 10_000 {
		t.Fatalf("the merchant received %s, want 10000", got)
	}
}
