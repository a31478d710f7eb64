package settle_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

func mustOpenKV(tb testing.TB, dir string) *kv.DB {
	tb.Helper()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

// newTestEngine returns an engine over chains on a fresh kv in dir (a temp
// dir when ""), closed at cleanup.
func newTestEngine(tb testing.TB, dir string, opts settle.Options, chains ...settle.Chain) (*settle.Engine, *kv.DB) {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	db := mustOpenKV(tb, dir)
	if opts.ReceiptPoll == 0 {
		opts.ReceiptPoll = time.Millisecond
	}
	e, err := settle.NewEngine(db, chains, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.Close(ctx)
		db.Close()
	})
	if err := e.Reconcile(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return e, db
}

func mustSettle(tb testing.TB, e *settle.Engine, body []byte, key string) (x402.SettleResponse, bool) {
	tb.Helper()
	resp, replayed, err := e.Settle(context.Background(), body, key)
	if err != nil {
		tb.Fatalf("settle: %v", err)
	}
	return resp, replayed
}

func TestSettleSuccessThenReplay(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 5000)
	var settled []x402.SettleResponse
	var mu sync.Mutex
	e, _ := newTestEngine(t, "", settle.Options{OnSettled: func(_ *x402.PaymentRequest, r x402.SettleResponse) {
		// A slow hook: its effect must still be there once Settle returns.
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		settled = append(settled, r)
		mu.Unlock()
	}}, c)
	body := newPayment(1).body(t)

	resp, replayed := mustSettle(t, e, body, "")
	if !resp.Success || replayed || resp.Transaction == "" || resp.Network != "eip155:84532" ||
		!strings.EqualFold(resp.Payer, payerA) || resp.Amount != "1000" || resp.ErrorReason != "" {
		t.Fatalf("first settle = %+v replayed=%t", resp, replayed)
	}
	// The same payment re-encoded (member order, whitespace) is the same body.
	reencoded := bytes.ReplaceAll(body, []byte(`,`), []byte(`, `))
	again, replayed := mustSettle(t, e, reencoded, "")
	if !replayed || again != resp {
		t.Fatalf("replay = %+v replayed=%t, want %+v replayed", again, replayed, resp)
	}
	if transfers, broadcasts, _ := c.stats(); transfers != 1 || broadcasts != 1 {
		t.Fatalf("transfers=%d broadcasts=%d, want 1/1", transfers, broadcasts)
	}
	if got := c.balance(merchant).Int64(); got != 1000 {
		t.Fatalf("merchant balance %d", got)
	}
	mu.Lock()
	if len(settled) != 1 || settled[0] != resp {
		t.Fatalf("OnSettled calls = %+v", settled)
	}
	mu.Unlock()
	st := e.Stats()
	if st.Succeeded != 1 || st.Networks["eip155:84532"].Succeeded != 1 || st.Failed != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestSettleConcurrentIdenticalBodiesOneTransfer(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 5000)
	e, _ := newTestEngine(t, "", settle.Options{}, c)
	body := newPayment(2).body(t)
	const n = 20
	resps := make([]x402.SettleResponse, n)
	replays := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { resps[i], replays[i] = mustSettle(t, e, body, "") })
	}
	wg.Wait()
	fresh := 0
	for i, r := range resps {
		if !r.Success || r.Transaction != resps[0].Transaction {
			t.Fatalf("response %d = %+v, first %+v", i, r, resps[0])
		}
		if !replays[i] {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d responses not marked replayed, want exactly 1", fresh)
	}
	if transfers, broadcasts, prepares := c.stats(); transfers != 1 || broadcasts != 1 || prepares != 1 {
		t.Fatalf("transfers=%d broadcasts=%d prepares=%d", transfers, broadcasts, prepares)
	}
}

func TestSettleSameAuthorizationTwoBodies(t *testing.T) {
	tests := []struct {
		name       string
		concurrent bool
	}{
		{name: "sequential"},
		{name: "concurrent, second waits for the first in flight", concurrent: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeChain()
			c.fund(payerA, 5000)
			e, _ := newTestEngine(t, "", settle.Options{}, c)
			p1 := newPayment(3)
			p2 := p1
			p2.resource = "https://merchant.example/other"
			b1, b2 := p1.body(t), p2.body(t)
			if bytes.Equal(b1, b2) {
				t.Fatal("bodies are identical")
			}
			var r1, r2 x402.SettleResponse
			if tc.concurrent {
				// Hold the first transfer in the mempool so the second body
				// arrives while the first is in flight.
				c.mu.Lock()
				c.autoMine = false
				c.mu.Unlock()
				var wg sync.WaitGroup
				wg.Go(func() { r1, _ = mustSettle(t, e, b1, "") })
				waitFor(t, func() bool { _, b, _ := c.stats(); return b == 1 })
				wg.Go(func() { r2, _ = mustSettle(t, e, b2, "") })
				time.Sleep(20 * time.Millisecond)
				c.mine()
				wg.Wait()
			} else {
				r1, _ = mustSettle(t, e, b1, "")
				r2, _ = mustSettle(t, e, b2, "")
			}
			if !r1.Success {
				t.Fatalf("first body = %+v", r1)
			}
			if r2.Success || r2.ErrorReason != x402.ReasonNonceAlreadyUsed || r2.Transaction != "" {
				t.Fatalf("second body = %+v, want %s without transaction", r2, x402.ReasonNonceAlreadyUsed)
			}
			if transfers, broadcasts, _ := c.stats(); transfers != 1 || broadcasts != 1 {
				t.Fatalf("transfers=%d broadcasts=%d, want 1/1", transfers, broadcasts)
			}
			// The second body's failure is recorded too.
			if again, replayed := mustSettle(t, e, b2, ""); !replayed || again != r2 {
				t.Fatalf("second body replay = %+v replayed=%t", again, replayed)
			}
		})
	}
}

func TestSettleAuthorizationFreedByRevertedOwner(t *testing.T) {
	// Body 1's transaction reverts (nothing moves), so body 2 carrying the
	// same authorization may settle it.
	c := newFakeChain()
	c.fund(payerA, 5000)
	e, _ := newTestEngine(t, "", settle.Options{}, c)
	p1 := newPayment(4)
	p2 := p1
	p2.resource = "https://merchant.example/other"
	c.onPrepared = func() { c.fund(payerA, 0) } // emptied between the last simulation and mining
	r1, _ := mustSettle(t, e, p1.body(t), "")
	if r1.Success || r1.ErrorReason != x402.ReasonEVMTransactionFailed || r1.Transaction == "" {
		t.Fatalf("reverted settle = %+v", r1)
	}
	c.fund(payerA, 5000)
	r2, _ := mustSettle(t, e, p2.body(t), "")
	if !r2.Success {
		t.Fatalf("second body after a reverted owner = %+v", r2)
	}
	if transfers, _, _ := c.stats(); transfers != 1 {
		t.Fatalf("transfers = %d", transfers)
	}
}

func TestSettleIdempotencyKey(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 5000)
	e, _ := newTestEngine(t, "", settle.Options{}, c)
	b1, b2 := newPayment(5).body(t), newPayment(6).body(t)
	first, _ := mustSettle(t, e, b1, "key-1")
	if !first.Success {
		t.Fatalf("first = %+v", first)
	}
	tests := []struct {
		name         string
		body         []byte
		key          string
		wantErr      error
		wantReplayed bool
	}{
		{name: "same key same body replays", body: b1, key: "key-1", wantReplayed: true},
		{name: "same key other body conflicts", body: b2, key: "key-1", wantErr: settle.ErrIdempotencyKeyConflict},
		{name: "other key same body replays", body: b1, key: "key-2", wantReplayed: true},
		{name: "new key binds to the replayed body", body: b2, key: "key-2", wantErr: settle.ErrIdempotencyKeyConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, replayed, err := e.Settle(context.Background(), tc.body, tc.key)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && (replayed != tc.wantReplayed || resp != first) {
				t.Fatalf("resp = %+v replayed=%t", resp, replayed)
			}
		})
	}
	if transfers, _, _ := c.stats(); transfers != 1 {
		t.Fatalf("transfers = %d", transfers)
	}
}

func TestSettlePendingThenFinal(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 5000)
	c.autoMine = false
	e, db := newTestEngine(t, "", settle.Options{SettleTimeout: 30 * time.Millisecond}, c)
	body := newPayment(7).body(t)

	// On a loaded machine the first 30 ms may end before the broadcast
	// (the intent's fsync alone can take that long): ask until it is sent.
	var resp x402.SettleResponse
	var replayed bool
	waitFor(t, func() bool {
		resp, replayed = mustSettle(t, e, body, "")
		if resp.Success || resp.ErrorReason != x402.ReasonSettlementPending || replayed {
			t.Fatalf("first = %+v replayed=%t, want pending", resp, replayed)
		}
		return resp.Transaction != ""
	})
	hash := resp.Transaction
	key, _ := settle.BodyKey(body)
	if rec, err := db.Settlement(key); err != nil || rec.State != kv.SettlementPending {
		t.Fatalf("record while pending = %+v, %v", rec.State, err)
	}
	again, replayed := mustSettle(t, e, body, "")
	if again.ErrorReason != x402.ReasonSettlementPending || replayed || again.Transaction != hash {
		t.Fatalf("still pending = %+v replayed=%t", again, replayed)
	}
	c.mine()
	waitFor(t, func() bool { rec, _ := db.Settlement(key); return rec.State.Final() })
	final, replayed := mustSettle(t, e, body, "")
	if !final.Success || final.Transaction != hash || !replayed {
		t.Fatalf("final = %+v replayed=%t", final, replayed)
	}
	if transfers, broadcasts, _ := c.stats(); transfers != 1 || broadcasts != 1 {
		t.Fatalf("transfers=%d broadcasts=%d", transfers, broadcasts)
	}
}

func TestSettleReceiptTimeoutThenOnDemandResolve(t *testing.T) {
	// The receipt wait gives up; the record stays pending; the identical
	// body later finds the receipt without a second broadcast.
	c := newFakeChain()
	c.fund(payerA, 5000)
	c.autoMine = false
	e, _ := newTestEngine(t, "", settle.Options{SettleTimeout: time.Second, ReceiptTimeout: 20 * time.Millisecond}, c)
	body := newPayment(8).body(t)
	resp, _ := mustSettle(t, e, body, "")
	if resp.ErrorReason != x402.ReasonSettlementPending || resp.Transaction == "" {
		t.Fatalf("first = %+v", resp)
	}
	c.mine()
	final, replayed := mustSettle(t, e, body, "")
	if !final.Success || final.Transaction != resp.Transaction || !replayed {
		t.Fatalf("after mining = %+v replayed=%t", final, replayed)
	}
	if _, broadcasts, _ := c.stats(); broadcasts != 1 {
		t.Fatalf("broadcasts = %d", broadcasts)
	}
}

func TestSettleFailures(t *testing.T) {
	tests := []struct {
		name       string
		payment    func() payment
		setup      func(*fakeChain)
		wantReason string
		wantLabel  string // counter network label
	}{
		{
			name:       "payer emptied after verify fails at prepare, no gas",
			payment:    func() payment { return newPayment(9) },
			setup:      func(c *fakeChain) { c.onVerified = func() { c.fund(payerA, 10) } },
			wantReason: x402.ReasonInsufficientBalance,
			wantLabel:  "eip155:84532",
		},
		{
			name:       "unknown network",
			payment:    func() payment { p := newPayment(10); p.network = "eip155:1"; return p },
			wantReason: x402.ReasonUnsupportedNetwork,
			wantLabel:  "unknown",
		},
		{
			name:       "network unavailable",
			payment:    func() payment { return newPayment(11) },
			setup:      func(c *fakeChain) { c.unavailable = "signer gas below threshold" },
			wantReason: x402.ReasonServiceUnavailable,
			wantLabel:  "eip155:84532",
		},
		{
			name:       "broadcast refused, nothing charged",
			payment:    func() payment { return newPayment(12) },
			setup:      func(c *fakeChain) { c.failBroadcast = errors.New("insufficient funds for gas * price + value") },
			wantReason: x402.ReasonTransactionFailed,
			wantLabel:  "eip155:84532",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeChain()
			c.fund(payerA, 5000)
			if tc.setup != nil {
				tc.setup(c)
			}
			e, _ := newTestEngine(t, "", settle.Options{}, c)
			body := tc.payment().body(t)
			resp, replayed := mustSettle(t, e, body, "")
			if resp.Success || resp.ErrorReason != tc.wantReason || resp.Transaction != "" || replayed || resp.ErrorMessage == "" {
				t.Fatalf("resp = %+v replayed=%t, want %s", resp, replayed, tc.wantReason)
			}
			if transfers, broadcasts, _ := c.stats(); transfers != 0 || (tc.wantReason == x402.ReasonInsufficientBalance && broadcasts != 0) {
				t.Fatalf("transfers=%d broadcasts=%d", transfers, broadcasts)
			}
			again, replayed := mustSettle(t, e, body, "")
			if !replayed || again != resp {
				t.Fatalf("replay = %+v replayed=%t", again, replayed)
			}
			if got := e.Stats().Networks[tc.wantLabel].FailedByReason[tc.wantReason]; got != 1 {
				t.Fatalf("stats = %+v", e.Stats())
			}
		})
	}
}

func TestSettleSanctionedMakesNoChainCall(t *testing.T) {
	for _, who := range []string{"payer", "payTo", "recipient"} {
		t.Run(who, func(t *testing.T) {
			c := newFakeChain()
			c.fund(payerA, 5000)
			listed := "0x9999999999999999999999999999999999999999"
			p := newPayment(13)
			switch who {
			case "payer":
				p.from = listed
			case "payTo":
				p.payTo = listed
			case "recipient":
				p.to = listed
			}
			e, _ := newTestEngine(t, "", settle.Options{Screener: listScreener{listed}}, c)
			before := c.calls.Load()
			resp, _ := mustSettle(t, e, p.body(t), "")
			if resp.Success || resp.ErrorReason != x402.ReasonSanctioned || resp.Transaction != "" {
				t.Fatalf("settle = %+v", resp)
			}
			req, err := x402.DecodeRequest(p.body(t))
			if err != nil {
				t.Fatal(err)
			}
			if v := e.Verify(context.Background(), req); v.IsValid || v.InvalidReason != x402.ReasonSanctioned {
				t.Fatalf("verify = %+v", v)
			}
			if replay, replayed := mustSettle(t, e, p.body(t), ""); !replayed || replay != resp {
				t.Fatalf("replay = %+v %t", replay, replayed)
			}
			if got := c.calls.Load() - before; got != 0 {
				t.Fatalf("%d chain calls for a sanctioned payment, want 0", got)
			}
		})
	}
}

type listScreener []string

func (l listScreener) Listed(addr string) bool {
	for _, a := range l {
		if strings.EqualFold(a, addr) {
			return true
		}
	}
	return false
}

func TestSettleInvalidBodies(t *testing.T) {
	c := newFakeChain()
	e, db := newTestEngine(t, "", settle.Options{}, c)
	for _, body := range []string{``, `not json`, `[1,2]`, `{"x402Version":2}`, `{"x402Version":7,"paymentPayload":{},"paymentRequirements":{}}`} {
		resp, replayed, err := e.Settle(context.Background(), []byte(body), "k")
		if err != nil || resp.Success || resp.ErrorReason != x402.ReasonInvalidPayload || replayed {
			t.Fatalf("body %q: resp %+v replayed=%t err=%v", body, resp, replayed, err)
		}
	}
	if p, _ := db.PendingSettlements(); len(p) != 0 {
		t.Fatalf("invalid bodies left records: %+v", p)
	}
	// The key was not bound by an invalid body.
	if resp, _, err := e.Settle(context.Background(), newPayment(14).body(t), "k"); err != nil || resp.ErrorReason != x402.ReasonInsufficientBalance {
		t.Fatalf("valid body with the key = %+v, %v", resp, err)
	}
}

func TestVerifyRouting(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 5000)
	e, _ := newTestEngine(t, "", settle.Options{}, c)
	tests := []struct {
		name   string
		p      payment
		setup  func()
		valid  bool
		reason string
	}{
		{name: "valid", p: newPayment(15), valid: true},
		{name: "unknown network", p: func() payment { p := newPayment(15); p.network = "solana:mainnet"; return p }(), reason: x402.ReasonUnsupportedNetwork},
		// The requirements name the network; the chain then judges a payload
		// signed for another one (the fake accepts it).
		{name: "requirements route", p: func() payment { p := newPayment(15); p.payloadNetwork = "solana:mainnet"; return p }(), valid: true},
		{name: "requirements unknown", p: func() payment {
			p := newPayment(15)
			p.network, p.payloadNetwork = "solana:mainnet", "eip155:84532"
			return p
		}(), reason: x402.ReasonUnsupportedNetwork},
		{name: "chain says invalid", p: func() payment { p := newPayment(15); p.amount = "999999"; return p }(), reason: x402.ReasonInsufficientBalance},
		{name: "unavailable", p: newPayment(15), setup: func() { c.unavailable = "rpc down" }, reason: x402.ReasonServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			req, err := x402.DecodeRequest(tc.p.body(t))
			if err != nil {
				t.Fatal(err)
			}
			v := e.Verify(context.Background(), req)
			if v.IsValid != tc.valid || v.InvalidReason != tc.reason {
				t.Fatalf("verify = %+v", v)
			}
		})
	}
	if ch, ok := e.Chain("base-sepolia"); !ok || ch.ID() != "eip155:84532" {
		t.Fatal("Chain by v1 name")
	}
	if _, ok := e.Chain("eip155:1"); ok {
		t.Fatal("Chain found an unknown network")
	}
}

func TestNewEngineRejectsDuplicateNetworks(t *testing.T) {
	db := mustOpenKV(t, t.TempDir())
	defer db.Close()
	if _, err := settle.NewEngine(db, []settle.Chain{newFakeChain(), newFakeChain()}, settle.Options{}); err == nil {
		t.Fatal("duplicate networks accepted")
	}
}

func waitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("condition not met within 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// settleAll settles bodies concurrently and returns the answers in order.
func settleAll(t *testing.T, e *settle.Engine, bodies [][]byte) []x402.SettleResponse {
	t.Helper()
	out := make([]x402.SettleResponse, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() { out[i], _ = mustSettle(t, e, b, "") })
	}
	wg.Wait()
	return out
}

// The worker signs every payment that is ready when it is free as one run:
// one intent commit, then one batch of broadcasts in nonce order. A payment
// the node refuses in the middle of a run fails alone, nothing charged; the
// payments behind it already reached the node, and its nonce is filled so
// no gap strands them.
func TestSettleRunWithARefusedTransaction(t *testing.T) {
	const n = 12
	c := newFakeChain()
	c.fund(payerA, 1_000_000)
	var bodies [][]byte
	for i := range n {
		bodies = append(bodies, newPayment(byte(100+i)).body(t))
	}
	// Hold the first signature until every payment is simulated, so the
	// rest reach the worker together, as the one run after the first. (A
	// hold on the first broadcast let the worker sign a further run while
	// the refused batch was in flight, which is then signed again by
	// design, and the count below flaked.)
	c.beforeSign = func() {
		for deadline := time.Now().Add(5 * time.Second); c.simulated() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	c.refuseInBatch = errors.New("txpool is full")
	e, _ := newTestEngine(t, "", settle.Options{}, c)
	answers := settleAll(t, e, bodies)

	failed := 0
	for i, a := range answers {
		switch {
		case a.Success:
		case a.ErrorReason == x402.ReasonTransactionFailed && a.Transaction == "":
			failed++
		default:
			t.Errorf("payment %d: %+v", i, a)
		}
	}
	transfers, _, _ := c.stats()
	if failed != 1 || transfers != n-1 || c.poolSize() != 0 {
		t.Fatalf("failed=%d transfers=%d unmined=%d; want 1, %d, 0", failed, transfers, c.poolSize(), n-1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.batches == 0 || c.fills != 1 {
		t.Errorf("batches=%d fills=%d; want a batch and the refused nonce filled once", c.batches, c.fills)
	}
	// Before batches, the payments behind the refused one, which had
	// reached the node, were signed again. (A run signed while the refused
	// batch was on its way, and never sent, is signed again by design.)
	if c.signedAfterSent != 0 {
		t.Errorf("%d transactions signed for payments that had already reached the node; want none", c.signedAfterSent)
	}
}

// A batch that fails as a whole (the RPC unreachable for that one request)
// tells nothing of its transactions: each is sent on its own, in nonce
// order, and every payment settles once.
func TestSettleRunBatchFailureSendsOneByOne(t *testing.T) {
	const n = 8
	c := newFakeChain()
	c.fund(payerA, 1_000_000)
	c.failBatch = errors.New("connection reset by peer")
	var bodies [][]byte
	for i := range n {
		bodies = append(bodies, newPayment(byte(140+i)).body(t))
	}
	c.beforeBroadcast = func() {
		for deadline := time.Now().Add(5 * time.Second); c.simulated() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	e, _ := newTestEngine(t, "", settle.Options{}, c)
	for i, a := range settleAll(t, e, bodies) {
		if !a.Success {
			t.Errorf("payment %d: %+v", i, a)
		}
	}
	transfers, broadcasts, prepares := c.stats()
	if transfers != n || broadcasts != n || prepares != n || c.poolSize() != 0 {
		t.Fatalf("transfers=%d broadcasts=%d signed=%d unmined=%d; want %d each, 0 unmined", transfers, broadcasts, prepares, c.poolSize(), n)
	}
}

// A simulation older than the worker's limit is run again before signing.
func TestSettleStaleSimulationRunsAgain(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 1_000_000)
	c.simulationAge = time.Second
	e, _ := newTestEngine(t, "", settle.Options{}, c)
	bodies := [][]byte{newPayment(120).body(t), newPayment(121).body(t), newPayment(122).body(t)}
	for i, a := range settleAll(t, e, bodies) {
		if !a.Success {
			t.Fatalf("payment %d: %+v", i, a)
		}
	}
	if got := c.simulated(); got != 2*len(bodies) {
		t.Fatalf("simulations = %d, want %d (one after verify, one on the worker)", got, 2*len(bodies))
	}
}

// A payer emptied after the simulation (while the payment waits for the
// worker) fails at the worker's fresh simulation and costs no gas.
func TestSettleStaleSimulationSeesEmptiedPayer(t *testing.T) {
	c := newFakeChain()
	c.fund(payerA, 5000)
	c.simulationAge = time.Second
	c.onSimulated = func() { c.fund(payerA, 0) }
	e, _ := newTestEngine(t, "", settle.Options{}, c)
	body := newPayment(123).body(t)
	resp, _ := mustSettle(t, e, body, "")
	if resp.Success || resp.ErrorReason != x402.ReasonInsufficientBalance {
		t.Fatalf("resp = %+v", resp)
	}
	if _, broadcasts, _ := c.stats(); broadcasts != 0 {
		t.Fatalf("broadcasts = %d, want 0", broadcasts)
	}
}

// Two payments from one payer that together exceed its balance: the second
// is simulated against a state that does not hold the first's unmined
// transfer. It must be held, not broadcast to revert at our gas, and fail
// cleanly once the first is mined. When the balance covers both, both go.
func TestSettlePayerOverspendIsHeldNotBroadcast(t *testing.T) {
	for _, tc := range []struct {
		name      string
		balance   int64
		wantBoth  bool
		wantCasts int
	}{
		{name: "balance covers one", balance: 1500, wantCasts: 1},
		{name: "balance covers both", balance: 5000, wantBoth: true, wantCasts: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeChain()
			c.autoMine = false
			c.fund(payerA, tc.balance)
			e, _ := newTestEngine(t, "", settle.Options{}, c)
			first, second := newPayment(130), newPayment(131)
			first.amount, second.amount = "1000", "1000"
			answers := make(chan x402.SettleResponse, 2)
			go func() { r, _ := mustSettle(t, e, first.body(t), ""); answers <- r }()
			waitFor(t, func() bool { _, _, casts := c.reads(); return casts == 1 })
			go func() { r, _ := mustSettle(t, e, second.body(t), ""); answers <- r }()
			// The second is simulated (and passes: the first is not mined);
			// give the worker time to decide on it before anything is mined.
			waitFor(t, func() bool { sims, _, _ := c.reads(); return sims >= 2 })
			time.Sleep(50 * time.Millisecond)
			if _, reads, casts := c.reads(); casts != tc.wantCasts || reads == 0 {
				t.Fatalf("before mining: broadcasts = %d (want %d), balance reads = %d", casts, tc.wantCasts, reads)
			}
			c.mine()
			var ok, failed int
			for range 2 {
				select {
				case r := <-answers:
					switch {
					case r.Success:
						ok++
					case r.ErrorReason == x402.ReasonInsufficientBalance && r.Transaction == "":
						failed++
					default:
						t.Fatalf("answer %+v", r)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("a settlement did not finish")
				}
			}
			transfers, broadcasts, _ := c.stats()
			if tc.wantBoth && (ok != 2 || transfers != 2) || !tc.wantBoth && (ok != 1 || failed != 1 || transfers != 1 || broadcasts != 1) {
				t.Fatalf("ok=%d failed=%d transfers=%d broadcasts=%d", ok, failed, transfers, broadcasts)
			}
		})
	}
}

// The serial section is a pipeline: while one run's transactions are on
// their way to the node, the worker signs the next run. A payer with a
// payment in the run still being sent owes it already for the next run's
// balance check: a second payment the balance cannot cover as well is held,
// never broadcast, and fails cleanly once the first is mined.
func TestSettlePipelineCountsThePaymentBeingSent(t *testing.T) {
	c := newFakeChain()
	c.autoMine = false
	c.fund(payerA, 1500)
	e, _ := newTestEngine(t, "", settle.Options{}, c)
	first, second := newPayment(150), newPayment(151)
	first.amount, second.amount = "1000", "1000"
	// The first send stays on its way while the second payment arrives,
	// until the worker has read the payer's balance for it, which only a
	// worker free during the send can do.
	checkedDuringSend := make(chan bool, 1)
	secondAnswer := make(chan x402.SettleResponse, 1)
	c.beforeBroadcast = func() {
		go func() {
			r, _ := mustSettle(t, e, second.body(t), "")
			secondAnswer <- r
		}()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, reads, _ := c.reads(); reads > 0 {
				checkedDuringSend <- true
				return
			}
			time.Sleep(time.Millisecond)
		}
		checkedDuringSend <- false
	}
	firstAnswer := make(chan x402.SettleResponse, 1)
	go func() { r, _ := mustSettle(t, e, first.body(t), ""); firstAnswer <- r }()
	if !<-checkedDuringSend {
		t.Fatal("the worker did not check the second payment while the first was being sent")
	}
	waitFor(t, func() bool { _, _, casts := c.reads(); return casts == 1 })
	time.Sleep(20 * time.Millisecond)
	if _, _, casts := c.reads(); casts != 1 {
		t.Fatalf("broadcasts before mining = %d, want 1 (the second payment held)", casts)
	}
	c.mine()
	if r := <-firstAnswer; !r.Success {
		t.Fatalf("first = %+v", r)
	}
	if r := <-secondAnswer; r.Success || r.ErrorReason != x402.ReasonInsufficientBalance || r.Transaction != "" {
		t.Fatalf("second = %+v, want insufficient balance, nothing sent", r)
	}
	if transfers, broadcasts, _ := c.stats(); transfers != 1 || broadcasts != 1 {
		t.Fatalf("transfers=%d broadcasts=%d, want 1 and 1", transfers, broadcasts)
	}
}
