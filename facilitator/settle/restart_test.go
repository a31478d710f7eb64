package settle_test

import (
	"context"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// crashAfterPending runs one settle that cannot finish (the response is
// settlement_pending), then "kills" the process: the engine is closed with
// no grace and the kv file closed, as a restart would find them.
func crashAfterPending(t *testing.T, dir string, c settle.Chain, body []byte) x402.SettleResponse {
	t.Helper()
	db := mustOpenKV(t, dir)
	e, err := settle.NewEngine(db, []settle.Chain{c}, settle.Options{SettleTimeout: 50 * time.Millisecond, ReceiptPoll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, _, err := e.Settle(context.Background(), body, "")
	if err != nil || resp.ErrorReason != x402.ReasonSettlementPending {
		t.Fatalf("settle before crash = %+v, %v", resp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	e.Close(ctx)
	cancel()
	db.Close()
	return resp
}

func TestRestartReconcilesPendingIntents(t *testing.T) {
	tests := []struct {
		name string
		// before the crash
		block, noMine bool
		// while the process is down
		down func(c *fakeChain, authID string)
		// want after Reconcile
		wantSuccess    bool
		wantReason     string
		wantTransfers  int
		wantBroadcasts int
		wantFreedAuth  bool // another body with the authorization may settle
	}{
		{
			name:  "intent recorded, never broadcast: recorded bytes broadcast on restart",
			block: true, wantSuccess: true, wantTransfers: 1, wantBroadcasts: 1,
		},
		{
			name:   "broadcast, mined while down: receipt decides, no rebroadcast",
			noMine: true, down: func(c *fakeChain, _ string) { c.mine() },
			wantSuccess: true, wantTransfers: 1, wantBroadcasts: 1,
		},
		{
			name:   "broadcast, dropped by the node while down: same bytes broadcast again",
			noMine: true, down: func(c *fakeChain, _ string) { c.dropPool(); c.autoMine = true },
			wantSuccess: true, wantTransfers: 1, wantBroadcasts: 2,
		},
		{
			name:  "never broadcast, signer nonce taken meanwhile, authorization unused: failed, nothing charged",
			block: true, down: func(c *fakeChain, _ string) { c.burnNonce() },
			wantReason: x402.ReasonTransactionFailed, wantFreedAuth: true,
		},
		{
			name:  "never broadcast, payer spent the authorization elsewhere: nonce used",
			block: true, down: func(c *fakeChain, auth string) { c.burnNonce(); c.useAuthorization(auth) },
			wantReason: x402.ReasonNonceAlreadyUsed,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := newFakeChain()
			c.fund(payerA, 5000)
			c.blockBroadcast, c.autoMine = tc.block, !tc.noMine
			p := newPayment(20)
			body := p.body(t)
			before := crashAfterPending(t, dir, c, body)
			if tc.block && before.Transaction != "" {
				t.Fatalf("pending before broadcast carries a hash: %+v", before)
			}

			// The restarted process: a fresh nonce manager, a working node.
			c.mu.Lock()
			c.blockBroadcast = false
			c.localNonce = c.accountNonce
			c.mu.Unlock()
			req, _ := x402.DecodeRequest(body)
			if tc.down != nil {
				tc.down(c, c.authID(req))
			}
			e, db := newTestEngine(t, dir, settle.Options{}, c) // runs Reconcile

			key, _ := settle.BodyKey(body)
			rec, err := db.Settlement(key)
			if err != nil || !rec.State.Final() {
				t.Fatalf("record after reconcile = %+v, %v", rec.State, err)
			}
			if p, _ := db.PendingSettlements(); len(p) != 0 {
				t.Fatalf("pending after reconcile: %d", len(p))
			}
			resp, replayed := mustSettle(t, e, body, "")
			if !replayed || resp.Success != tc.wantSuccess || resp.ErrorReason != tc.wantReason {
				t.Fatalf("after restart = %+v replayed=%t", resp, replayed)
			}
			if tc.wantSuccess && (resp.Transaction != rec.Intent.TxHash || resp.Amount != "1000") {
				t.Fatalf("success without the recorded hash: %+v", resp)
			}
			transfers, broadcasts, _ := c.stats()
			if transfers != tc.wantTransfers || broadcasts != tc.wantBroadcasts {
				t.Fatalf("transfers=%d broadcasts=%d, want %d/%d", transfers, broadcasts, tc.wantTransfers, tc.wantBroadcasts)
			}

			// Another body with the same authorization: settles only if the
			// first provably moved nothing and released it.
			other := p
			other.resource = "https://merchant.example/retry"
			r2, _ := mustSettle(t, e, other.body(t), "")
			if r2.Success != tc.wantFreedAuth {
				t.Fatalf("second body = %+v, want success %t", r2, tc.wantFreedAuth)
			}
			if transfers, _, _ := c.stats(); transfers > 1 {
				t.Fatalf("transfers = %d", transfers)
			}
		})
	}
}

func TestRestartSettleBeforeReconcileResolvesFirst(t *testing.T) {
	// The HTTP layer forgot Reconcile: the first Settle starts the pass, so
	// the recorded transaction keeps its signer nonce and both settle.
	dir := t.TempDir()
	c := newFakeChain()
	c.fund(payerA, 5000)
	c.blockBroadcast = true
	crashed := newPayment(21).body(t)
	crashAfterPending(t, dir, c, crashed)
	c.mu.Lock()
	c.blockBroadcast = false
	c.localNonce = c.accountNonce
	c.mu.Unlock()

	db := mustOpenKV(t, dir)
	defer db.Close()
	e, err := settle.NewEngine(db, []settle.Chain{c}, settle.Options{ReceiptPoll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	fresh, _ := mustSettle(t, e, newPayment(22).body(t), "")
	if !fresh.Success {
		t.Fatalf("new body = %+v", fresh)
	}
	old, replayed := mustSettle(t, e, crashed, "")
	if !old.Success || !replayed {
		t.Fatalf("crashed body = %+v replayed=%t", old, replayed)
	}
	if transfers, broadcasts, _ := c.stats(); transfers != 2 || broadcasts != 2 {
		t.Fatalf("transfers=%d broadcasts=%d", transfers, broadcasts)
	}
	if st := e.Stats(); st.Succeeded != 2 {
		t.Fatalf("stats = %+v", st)
	}
}
