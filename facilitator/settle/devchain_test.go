package settle_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

// These tests run the engine against the real evm.Network on the in-process
// simulated chain, and count the token's Transfer events: the ground truth
// of how often money moved.

func newDevChain(tb testing.TB) *evm.DevChain {
	tb.Helper()
	d, err := evm.NewDevChain(context.Background(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// devPayment signs a fresh authorization of amount from the dev payer to the
// merchant and returns the /settle body; resource varies the body only.
func devPayment(tb testing.TB, d *evm.DevChain, amount int64, resource string, opt evm.PayOptions) []byte {
	tb.Helper()
	return devPaymentBy(tb, d, d.PayerKey, amount, resource, opt)
}

func devPaymentBy(tb testing.TB, d *evm.DevChain, key *ecdsa.PrivateKey, amount int64, resource string, opt evm.PayOptions) []byte {
	tb.Helper()
	req := d.Network.RequirementsV2(d.Merchant.Hex(), big.NewInt(amount), 60)
	r, err := evm.PaymentV2(key, &x402.ResourceInfo{URL: resource}, req, opt)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// transfersTo counts Transfer events of the test USDC into the merchant.
func transfersTo(tb testing.TB, d *evm.DevChain, to common.Address) int {
	tb.Helper()
	evs, err := d.Transfers(context.Background(), 0)
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.To == to {
			n++
		}
	}
	return n
}

// hookChain wraps a Chain to count calls and to stop the world at a chosen
// step, as a crash would.
type hookChain struct {
	settle.Chain
	calls          atomic.Int64
	broadcasts     atomic.Int64
	blockBroadcast atomic.Bool // Broadcast waits for its context and sends nothing
	hideReceipts   atomic.Bool // Receipt reports "not mined"
	afterVerify    func()      // runs once after a valid Check (settle's re-verification)
	once           sync.Once
}

func (h *hookChain) ID() string     { h.calls.Add(1); return h.Chain.ID() }
func (h *hookChain) V1Name() string { h.calls.Add(1); return h.Chain.V1Name() }
func (h *hookChain) Available() (bool, string) {
	h.calls.Add(1)
	return h.Chain.Available()
}
func (h *hookChain) Verify(ctx context.Context, req *x402.PaymentRequest) x402.VerifyResponse {
	h.calls.Add(1)
	return h.Chain.Verify(ctx, req)
}
func (h *hookChain) Check(ctx context.Context, req *x402.PaymentRequest) x402.VerifyResponse {
	h.calls.Add(1)
	v := h.Chain.Check(ctx, req)
	if v.IsValid && h.afterVerify != nil {
		h.once.Do(h.afterVerify)
	}
	return v
}
func (h *hookChain) AuthorizationID(req *x402.PaymentRequest) string {
	h.calls.Add(1)
	return h.Chain.AuthorizationID(req)
}
func (h *hookChain) Simulate(ctx context.Context, req *x402.PaymentRequest) (*settle.Transfer, *x402.SettleResponse, error) {
	h.calls.Add(1)
	return h.Chain.Simulate(ctx, req)
}
func (h *hookChain) Sign(ctx context.Context, t *settle.Transfer) (*settle.Tx, error) {
	h.calls.Add(1)
	return h.Chain.Sign(ctx, t)
}
func (h *hookChain) Broadcast(ctx context.Context, tx *settle.Tx) error {
	h.calls.Add(1)
	if h.blockBroadcast.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	h.broadcasts.Add(1)
	return h.Chain.Broadcast(ctx, tx)
}
func (h *hookChain) Receipt(ctx context.Context, hash string) (bool, bool, error) {
	h.calls.Add(1)
	if h.hideReceipts.Load() {
		return false, false, nil
	}
	return h.Chain.Receipt(ctx, hash)
}
func (h *hookChain) Receipts(ctx context.Context, hashes []string) ([]settle.ReceiptStatus, error) {
	h.calls.Add(1)
	if h.hideReceipts.Load() {
		return make([]settle.ReceiptStatus, len(hashes)), nil
	}
	return h.Chain.Receipts(ctx, hashes)
}
func (h *hookChain) AuthorizationUsed(ctx context.Context, req *x402.PaymentRequest) (bool, error) {
	h.calls.Add(1)
	return h.Chain.AuthorizationUsed(ctx, req)
}
func (h *hookChain) ResyncNonce(ctx context.Context, signer string) error {
	h.calls.Add(1)
	return h.Chain.ResyncNonce(ctx, signer)
}

func TestDevChainSettleReplayConcurrent(t *testing.T) {
	d := newDevChain(t)
	h := &hookChain{Chain: d.Network}
	e, _ := newTestEngine(t, "", settle.Options{}, h)

	t.Run("settle then replay", func(t *testing.T) {
		body := devPayment(t, d, 1000, "https://m.example/one", evm.PayOptions{})
		resp, replayed := mustSettle(t, e, body, "")
		if !resp.Success || replayed || resp.Network != "eip155:1337" || resp.Amount != "1000" ||
			!strings.EqualFold(resp.Payer, d.Payer.Hex()) || len(resp.Transaction) != 66 {
			t.Fatalf("settle = %+v replayed=%t", resp, replayed)
		}
		again, replayed := mustSettle(t, e, body, "")
		if !replayed || again != resp {
			t.Fatalf("replay = %+v replayed=%t", again, replayed)
		}
		if n := transfersTo(t, d, d.Merchant); n != 1 {
			t.Fatalf("Transfer events = %d, want 1", n)
		}
	})

	t.Run("20 concurrent identical settles, one Transfer", func(t *testing.T) {
		before := transfersTo(t, d, d.Merchant)
		body := devPayment(t, d, 1000, "https://m.example/many", evm.PayOptions{})
		var wg sync.WaitGroup
		resps := make([]x402.SettleResponse, 20)
		for i := range resps {
			wg.Go(func() { resps[i], _ = mustSettle(t, e, body, "") })
		}
		wg.Wait()
		for _, r := range resps {
			if !r.Success || r.Transaction != resps[0].Transaction {
				t.Fatalf("responses differ: %+v vs %+v", r, resps[0])
			}
		}
		if n := transfersTo(t, d, d.Merchant) - before; n != 1 {
			t.Fatalf("Transfer events = %d, want 1", n)
		}
	})

	t.Run("one authorization in two bodies, one broadcast", func(t *testing.T) {
		before, bcasts := transfersTo(t, d, d.Merchant), h.broadcasts.Load()
		var nonce [32]byte
		copy(nonce[:], crypto.Keccak256([]byte("shared authorization")))
		opt := evm.PayOptions{Nonce: &nonce, Now: time.Now()}
		b1 := devPayment(t, d, 1000, "https://m.example/a", opt)
		b2 := devPayment(t, d, 1000, "https://m.example/b", opt)
		var r1, r2 x402.SettleResponse
		var wg sync.WaitGroup
		wg.Go(func() { r1, _ = mustSettle(t, e, b1, "") })
		wg.Go(func() { r2, _ = mustSettle(t, e, b2, "") })
		wg.Wait()
		ok, failed := r1, r2
		if !r1.Success {
			ok, failed = r2, r1
		}
		if !ok.Success || failed.Success || failed.ErrorReason != x402.ReasonNonceAlreadyUsed || failed.Transaction != "" {
			t.Fatalf("bodies = %+v / %+v", r1, r2)
		}
		if n := transfersTo(t, d, d.Merchant) - before; n != 1 {
			t.Fatalf("Transfer events = %d, want 1", n)
		}
		if n := h.broadcasts.Load() - bcasts; n != 1 {
			t.Fatalf("broadcasts = %d, want 1", n)
		}
	})

	t.Run("idempotency key conflict", func(t *testing.T) {
		b1 := devPayment(t, d, 10, "https://m.example/k1", evm.PayOptions{})
		b2 := devPayment(t, d, 10, "https://m.example/k2", evm.PayOptions{})
		if r, _, err := e.Settle(context.Background(), b1, "idem-1"); err != nil || !r.Success {
			t.Fatalf("first = %+v, %v", r, err)
		}
		if _, _, err := e.Settle(context.Background(), b2, "idem-1"); err != settle.ErrIdempotencyKeyConflict {
			t.Fatalf("conflict err = %v", err)
		}
		if r, replayed, err := e.Settle(context.Background(), b1, "idem-1"); err != nil || !replayed || !r.Success {
			t.Fatalf("same key same body = %+v %t %v", r, replayed, err)
		}
	})
}

func TestDevChainPendingThenFinal(t *testing.T) {
	d := newDevChain(t)
	h := &hookChain{Chain: d.Network}
	h.hideReceipts.Store(true) // the node is slow to report the receipt
	e, _ := newTestEngine(t, "", settle.Options{SettleTimeout: 100 * time.Millisecond}, h)
	body := devPayment(t, d, 1000, "https://m.example/slow", evm.PayOptions{})

	resp, replayed := mustSettle(t, e, body, "")
	if resp.ErrorReason != x402.ReasonSettlementPending || resp.Transaction == "" || replayed {
		t.Fatalf("first = %+v replayed=%t", resp, replayed)
	}
	again, replayed := mustSettle(t, e, body, "")
	if again.ErrorReason != x402.ReasonSettlementPending || again.Transaction != resp.Transaction || replayed {
		t.Fatalf("second = %+v replayed=%t", again, replayed)
	}
	h.hideReceipts.Store(false)
	waitFor(t, func() bool {
		r, replayed, err := e.Settle(context.Background(), body, "")
		return err == nil && r.Success && replayed && r.Transaction == resp.Transaction
	})
	if n := transfersTo(t, d, d.Merchant); n != 1 {
		t.Fatalf("Transfer events = %d", n)
	}
	if h.broadcasts.Load() != 1 {
		t.Fatalf("broadcasts = %d", h.broadcasts.Load())
	}
}

func TestDevChainRestartWithPendingIntent(t *testing.T) {
	tests := []struct {
		name  string
		crash func(h *hookChain)
	}{
		{name: "crash between intent and broadcast", crash: func(h *hookChain) { h.blockBroadcast.Store(true) }},
		{name: "crash between broadcast and receipt", crash: func(h *hookChain) { h.hideReceipts.Store(true) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDevChain(t)
			dir := t.TempDir()
			h := &hookChain{Chain: d.Network}
			tc.crash(h)
			body := devPayment(t, d, 1000, "https://m.example/crash", evm.PayOptions{})
			signerETH, _ := d.ETHBalance(context.Background(), d.Signer)
			crashAfterPending(t, dir, h, body)

			// The restarted process opens a fresh Network on the same chain:
			// its nonce manager knows nothing of the recorded transaction.
			n2, err := d.OpenNetwork(context.Background(), evm.NetworkConfig{
				Asset: d.Asset.Hex(), SignerKeys: []*ecdsa.PrivateKey{d.SignerKey},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n2.Close() })
			waitFor(t, func() bool { ok, _ := n2.Available(); return ok })
			e, _ := newTestEngine(t, dir, settle.Options{}, n2) // Reconcile

			resp, replayed := mustSettle(t, e, body, "")
			if !resp.Success || !replayed {
				t.Fatalf("after restart = %+v replayed=%t", resp, replayed)
			}
			// A new payment after the restart takes the next signer nonce.
			fresh, _ := mustSettle(t, e, devPayment(t, d, 7, "https://m.example/after", evm.PayOptions{}), "")
			if !fresh.Success {
				t.Fatalf("settle after restart = %+v", fresh)
			}
			if n := transfersTo(t, d, d.Merchant); n != 2 {
				t.Fatalf("Transfer events = %d, want 2 (the crashed one once, the fresh one)", n)
			}
			after, _ := d.ETHBalance(context.Background(), d.Signer)
			if after.Cmp(signerETH) >= 0 {
				t.Fatal("signer paid no gas: nothing was broadcast?")
			}
		})
	}
}

func TestDevChainPayerEmptiedAfterVerify(t *testing.T) {
	d := newDevChain(t)
	ctx := context.Background()
	h := &hookChain{Chain: d.Network}
	h.afterVerify = func() {
		bal, err := d.BalanceOf(ctx, d.Payer)
		if err != nil {
			t.Error(err)
			return
		}
		if err := d.TransferToken(ctx, d.PayerKey, d.Deployer, bal); err != nil {
			t.Error(err)
		}
	}
	e, _ := newTestEngine(t, "", settle.Options{}, h)
	body := devPayment(t, d, 1000, "https://m.example/empty", evm.PayOptions{})
	before, err := d.ETHBalance(ctx, d.Signer)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := mustSettle(t, e, body, "")
	if resp.Success || resp.ErrorReason != x402.ReasonInsufficientBalance || resp.Transaction != "" {
		t.Fatalf("settle = %+v, want %s", resp, x402.ReasonInsufficientBalance)
	}
	after, _ := d.ETHBalance(ctx, d.Signer)
	if after.Cmp(before) != 0 {
		t.Fatalf("signer ETH %s → %s: gas was spent", before, after)
	}
	if h.broadcasts.Load() != 0 || transfersTo(t, d, d.Merchant) != 0 {
		t.Fatal("something was broadcast")
	}
}

func TestDevChainSanctionedNoChainCall(t *testing.T) {
	d := newDevChain(t)
	h := &hookChain{Chain: d.Network}
	e, _ := newTestEngine(t, "", settle.Options{Screener: listScreener{d.Payer.Hex()}}, h)
	body := devPayment(t, d, 1000, "https://m.example/listed", evm.PayOptions{})
	before := h.calls.Load()
	resp, _ := mustSettle(t, e, body, "")
	if resp.Success || resp.ErrorReason != x402.ReasonSanctioned || resp.Transaction != "" {
		t.Fatalf("settle = %+v", resp)
	}
	req, _ := x402.DecodeRequest(body)
	if v := e.Verify(context.Background(), req); v.InvalidReason != x402.ReasonSanctioned {
		t.Fatalf("verify = %+v", v)
	}
	if n := h.calls.Load() - before; n != 0 {
		t.Fatalf("%d chain calls, want 0", n)
	}
	if transfersTo(t, d, d.Merchant) != 0 {
		t.Fatal("money moved")
	}
}

// TestDevChainRacingReplacementsMoveMoneyOnce: two transactions carrying
// one EIP-3009 authorization, both recorded for one body, both mined. The
// authorization lets only the first to execute move money; the other
// reverts. Reconciliation finds both receipts and records the one that
// moved the money, whichever it is; the payer is charged once. A same-nonce
// replacement racing its original in the pool is the other race: only one
// of them can mine, and it is the outcome.
func TestDevChainRacingReplacementsMoveMoneyOnce(t *testing.T) {
	tests := []struct {
		name string
		// second signs the other transaction from the first
		second func(t *testing.T, n *evm.Network, first *settle.Tx, tr *settle.Transfer) *settle.Tx
		// firstMines says which one must be the outcome
		firstMines bool
		sendOrder  []int // indexes into {first, second}
	}{
		{
			name: "two nonces, first sent first",
			second: func(t *testing.T, n *evm.Network, _ *settle.Tx, tr *settle.Transfer) *settle.Tx {
				return mustSign(t, n, tr)
			},
			firstMines: true, sendOrder: []int{0, 1},
		},
		{
			name: "two nonces, the later nonce's transaction runs second",
			second: func(t *testing.T, n *evm.Network, _ *settle.Tx, tr *settle.Transfer) *settle.Tx {
				return mustSign(t, n, tr)
			},
			firstMines: true, sendOrder: []int{1, 0}, // nonce order decides, not send order
		},
		{
			name: "same nonce, replacement at a higher fee",
			second: func(t *testing.T, n *evm.Network, first *settle.Tx, _ *settle.Transfer) *settle.Tx {
				r, err := n.Replace(context.Background(), first)
				if err != nil {
					t.Fatal(err)
				}
				if r.Nonce != first.Nonce || r.Hash == first.Hash {
					t.Fatalf("replacement %+v of %+v", r, first)
				}
				return r
			},
			firstMines: false, sendOrder: []int{1, 0}, // the original comes too late
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d := newDevChain(t)
			dir := t.TempDir()
			body := devPayment(t, d, 1000, "https://m.example/race", evm.PayOptions{})
			req, err := x402.DecodeRequest(body)
			if err != nil {
				t.Fatal(err)
			}
			tr, fail, err := d.Network.Simulate(ctx, req)
			if err != nil || fail != nil {
				t.Fatalf("simulate: %+v %v", fail, err)
			}
			first := mustSign(t, d.Network, tr)
			second := tc.second(t, d.Network, first, tr)

			db := mustOpenKV(t, dir)
			key, _ := settle.BodyKey(body)
			now := time.Now().UTC()
			err = db.RecordSettlementIntent(kv.Settlement{BodyKey: key, Network: d.Network.ID(), Body: body, CreatedAt: now, Intent: &kv.SettlementIntent{
				AuthorizationID: d.Network.AuthorizationID(req), Signer: first.Signer, Nonce: first.Nonce,
				TxHash: first.Hash, RawTx: first.Raw, RecordedAt: now, Genesis: d.Network.Genesis(),
			}})
			if err == nil {
				_, err = db.ReplaceSettlementTx(key, second.Hash, second.Raw)
			}
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			payerBefore, _ := d.BalanceOf(ctx, d.Payer)
			txs := []*settle.Tx{first, second}
			for _, i := range tc.sendOrder {
				if err := d.Network.Broadcast(ctx, txs[i]); err != nil && !(tc.firstMines == false && i == 0) {
					t.Fatalf("broadcast %d: %v", i, err)
				}
			}

			e, _ := newTestEngine(t, dir, settle.Options{}, d.Network) // Reconcile
			resp, replayed := mustSettle(t, e, body, "")
			want := second.Hash
			if tc.firstMines {
				want = first.Hash
			}
			if !resp.Success || !replayed || resp.Transaction != want {
				t.Fatalf("outcome = %+v replayed=%t, want success with %s", resp, replayed, want)
			}
			if n := transfersTo(t, d, d.Merchant); n != 1 {
				t.Fatalf("Transfer events = %d, want 1", n)
			}
			if after, _ := d.BalanceOf(ctx, d.Payer); new(big.Int).Sub(payerBefore, after).Int64() != 1000 {
				t.Fatalf("payer paid %s, want 1000 once", new(big.Int).Sub(payerBefore, after))
			}
		})
	}
}

func mustSign(t *testing.T, n *evm.Network, tr *settle.Transfer) *settle.Tx {
	t.Helper()
	tx, err := n.Sign(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}
