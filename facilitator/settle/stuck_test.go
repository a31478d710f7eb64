package settle_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

// TestStuckTransactionSentAgainThenReplaced: a broadcast transaction does
// not mine. After StuckAfter the engine sends it again, then replaces it
// with the same nonce at a higher fee, recorded before it is sent; the
// replacement mines and is the outcome; money moved once.
func TestStuckTransactionSentAgainThenReplaced(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 5000)
	c.autoMine = false
	e, db := newTestEngine(t, "", settle.Options{SettleTimeout: 200 * time.Millisecond, StuckAfter: 20 * time.Millisecond}, c)
	body := newPayment(31).body(t)
	first, _ := mustSettle(t, e, body, "")
	if first.ErrorReason != x402.ReasonSettlementPending || first.Transaction == "" {
		t.Fatalf("first = %+v", first)
	}
	key, _ := settle.BodyKey(body)
	// The pool holds one transaction per nonce: the replacement took the
	// original's place (the fake refuses a cheaper one).
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.replacements >= 1 && c.broadcasts >= 2 })
	c.mine()

	waitFor(t, func() bool { rec, _ := db.Settlement(key); return rec.State.Final() })
	final, replayed := mustSettle(t, e, body, "")
	rec, _ := db.Settlement(key)
	// Whichever recorded transaction mined is the outcome: a replacement
	// (it took the original's place in the pool), maybe not the latest one
	// recorded, if another replacement was on its way when it mined.
	hashes := rec.Intent.Hashes()
	if !final.Success || !replayed || !slices.Contains(hashes, final.Transaction) {
		t.Fatalf("final = %+v replayed=%t, recorded %v: want success with one of them", final, replayed, hashes)
	}
	if len(rec.Intent.Replaced) == 0 || final.Transaction == rec.Intent.Replaced[0] {
		t.Fatalf("replaced hashes = %v, outcome %s: want a replacement of the original mined", rec.Intent.Replaced, final.Transaction)
	}
	if transfers, _, _ := c.stats(); transfers != 1 {
		t.Fatalf("transfers = %d", transfers)
	}
}

// TestStuckTransactionWhoseNonceIsSpentElsewhere: while our transaction
// waits, another transaction of the signer key takes its nonce. None of our
// hashes can mine any more, the authorization is unused: the settlement
// fails, nothing charged, and the authorization is free for another body.
func TestStuckTransactionWhoseNonceIsSpentElsewhere(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 5000)
	c.autoMine = false
	e, db := newTestEngine(t, "", settle.Options{SettleTimeout: 500 * time.Millisecond, StuckAfter: 20 * time.Millisecond}, c)
	p := newPayment(32)
	body := p.body(t)
	if first, _ := mustSettle(t, e, body, ""); first.ErrorReason != x402.ReasonSettlementPending {
		t.Fatalf("first = %+v", first)
	}
	c.burnNonce()
	key, _ := settle.BodyKey(body)
	waitFor(t, func() bool { rec, _ := db.Settlement(key); return rec.State.Final() })
	final, replayed := mustSettle(t, e, body, "")
	if final.Success || final.ErrorReason != x402.ReasonTransactionFailed || !replayed {
		t.Fatalf("final = %+v replayed=%t", final, replayed)
	}
	if rec, _ := db.Settlement(key); rec.State != kv.SettlementFailed {
		t.Fatalf("state = %s", rec.State)
	}
	c.mu.Lock()
	c.autoMine = true
	c.mu.Unlock()
	other := p
	other.resource = "https://merchant.example/retry"
	if r2, _ := mustSettle(t, e, other.body(t), ""); !r2.Success {
		t.Fatalf("another body with the freed authorization = %+v", r2)
	}
	if transfers, _, _ := c.stats(); transfers != 1 {
		t.Fatalf("transfers = %d", transfers)
	}
}
