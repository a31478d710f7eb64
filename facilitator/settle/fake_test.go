package settle_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// fakeChain is an in-memory EVM with one signer, a mempool, EIP-3009
// authorization state and balances: enough to tell one transfer from two
// and to crash the engine at any step. Every method call is counted.
type fakeChain struct {
	id, v1 string

	calls atomic.Int64 // every Chain method call

	mu             sync.Mutex
	unavailable    string
	autoMine       bool
	localNonce     uint64             // the nonce manager's next nonce
	accountNonce   uint64             // next nonce the chain accepts (mined count)
	pool           map[string]*fakeTx // broadcast, not mined, by hash
	receipts       map[string]bool    // mined: hash → success
	authUsed       map[string]bool
	balances       map[string]*big.Int // lower-case address → balance
	transfers      int                 // successful transfers mined
	broadcasts     int                 // transactions accepted into the pool
	prepares       int                 // transactions signed
	balanceReads   int
	simulations    int
	resyncs        int
	replacements   int
	fills          int
	genesis        string
	blocks         uint64 // blocks mined: each mine that included something
	heads          int    // Head calls
	receiptBatches int    // Receipts calls
	// failReceipts, when set, is what Receipts answers (the node's
	// receipt reads failing); failedReads counts those answers.
	failReceipts error
	failedReads  int
	// sentAuth holds the authorizations with a transaction the pool took;
	// signedAfterSent counts transactions signed for one of them.
	sentAuth        map[string]bool
	signedAfterSent int
	// simulationAge backdates every simulation, to exercise the worker's
	// fresh simulation of a stale one.
	simulationAge time.Duration

	// blockBroadcast, when set, makes Broadcast wait for the context to end
	// and fail without sending: the process "dies" between intent and send.
	blockBroadcast bool
	// failBroadcast, when set, is returned by Broadcast without sending.
	failBroadcast error
	// failBatch, when set, fails BroadcastBatch as a whole without sending
	// (a transport error); batches counts the batches that were sent.
	failBatch error
	batches   int
	// refuseInBatch, when set, is what the node answers, on every attempt,
	// for the second transaction of the first batch of three or more.
	refuseInBatch error
	refusedAuth   string
	// refuse, when set, may refuse one transaction (by its authorization).
	refuse func(authID string) error
	// beforeSign runs once, at the start of the first Sign, without c.mu
	// held.
	beforeSign func()
	// beforeBroadcast runs once, at the start of the first Broadcast,
	// without c.mu held.
	beforeBroadcast func()
	// onPrepared runs after Sign signed a transaction, onVerified after
	// Verify found a payment valid; each runs once, without c.mu held.
	onPrepared  func()
	onVerified  func()
	onSimulated func()
}

type fakeTx struct {
	hash   string
	nonce  uint64
	fee    int64 // a replacement must pay more
	authID string
	from   string
	to     string
	amount *big.Int
}

func newFakeChain() *fakeChain {
	return &fakeChain{
		id: "eip155:84532", v1: "base-sepolia", autoMine: true,
		pool: map[string]*fakeTx{}, receipts: map[string]bool{}, authUsed: map[string]bool{}, balances: map[string]*big.Int{},
		sentAuth: map[string]bool{},
	}
}

var _ settle.Chain = (*fakeChain)(nil)

func (c *fakeChain) ID() string     { c.calls.Add(1); return c.id }
func (c *fakeChain) V1Name() string { c.calls.Add(1); return c.v1 }

func (c *fakeChain) Available() (bool, string) {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unavailable == "", c.unavailable
}

func (c *fakeChain) fund(addr string, amount int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.balances[strings.ToLower(addr)] = big.NewInt(amount)
}

func (c *fakeChain) balance(addr string) *big.Int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.balances[strings.ToLower(addr)]; b != nil {
		return new(big.Int).Set(b)
	}
	return new(big.Int)
}

// check is the simulation shared by Verify and Prepare; c.mu held.
func (c *fakeChain) checkLocked(req *x402.PaymentRequest) (reason string) {
	if c.authUsed[c.authID(req)] {
		return x402.ReasonNonceAlreadyUsed
	}
	amount, _ := new(big.Int).SetString(string(req.Authorization.Value), 10)
	if !x402.EqualAddress(req.Recipient(), req.PayTo()) {
		return x402.ReasonRecipientMismatch
	}
	bal := c.balances[strings.ToLower(req.Payer())]
	if bal == nil || bal.Cmp(amount) < 0 {
		return x402.ReasonInsufficientBalance
	}
	return ""
}

func (c *fakeChain) Verify(ctx context.Context, req *x402.PaymentRequest) x402.VerifyResponse {
	c.calls.Add(1)
	c.mu.Lock()
	if r := c.checkLocked(req); r != "" {
		c.mu.Unlock()
		return x402.VerifyResponse{InvalidReason: r, InvalidMessage: "fake: " + r, Payer: req.Payer()}
	}
	hook := c.onVerified
	c.onVerified = nil
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return x402.VerifyResponse{IsValid: true, Payer: req.Payer()}
}

// Check is Verify: the fake's checks include no separate simulation.
func (c *fakeChain) Check(ctx context.Context, req *x402.PaymentRequest) x402.VerifyResponse {
	return c.Verify(ctx, req)
}

func (c *fakeChain) authID(req *x402.PaymentRequest) string {
	return strings.ToLower("84532:" + req.Requirements.Asset + ":" + req.Payer() + ":" + req.Authorization.Nonce)
}

func (c *fakeChain) AuthorizationID(req *x402.PaymentRequest) string {
	c.calls.Add(1)
	return c.authID(req)
}

func (c *fakeChain) Simulate(ctx context.Context, req *x402.PaymentRequest) (*settle.Transfer, *x402.SettleResponse, error) {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.simulations++
	if r := c.checkLocked(req); r != "" {
		return nil, &x402.SettleResponse{ErrorReason: r, ErrorMessage: "fake simulation: " + r, Network: req.Network(), Payer: req.Payer()}, nil
	}
	amount, _ := new(big.Int).SetString(string(req.Authorization.Value), 10)
	data, _ := json.Marshal(map[string]any{"auth": c.authID(req), "from": strings.ToLower(req.Payer()), "to": strings.ToLower(req.Recipient()), "amount": amount.String()})
	if hook := c.onSimulated; hook != nil {
		c.onSimulated = nil
		c.mu.Unlock()
		hook()
		c.mu.Lock()
	}
	return &settle.Transfer{Data: data, Gas: 60_000, SimulatedAt: time.Now().Add(-c.simulationAge)}, nil, nil
}

func (c *fakeChain) Sign(ctx context.Context, t *settle.Transfer) (*settle.Tx, error) {
	c.calls.Add(1)
	c.mu.Lock()
	if hook := c.beforeSign; hook != nil {
		c.beforeSign = nil
		c.mu.Unlock()
		hook()
		c.mu.Lock()
	}
	var m map[string]any
	if err := json.Unmarshal(t.Data, &m); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	nonce := c.localNonce
	c.localNonce++
	c.prepares++
	if a, _ := m["auth"].(string); a != "" && c.sentAuth[a] {
		c.signedAfterSent++
	}
	m["nonce"] = nonce
	raw, _ := json.Marshal(m)
	sum := sha256.Sum256(raw)
	hash := "0x" + hex.EncodeToString(sum[:])
	hook := c.onPrepared
	c.onPrepared = nil
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return &settle.Tx{Signer: "0xfacilitator", Nonce: nonce, Hash: hash, Raw: raw}, nil
}

func decodeFakeRaw(raw []byte) (*fakeTx, error) {
	var m struct {
		Nonce  uint64 `json:"nonce"`
		Auth   string `json:"auth"`
		From   string `json:"from"`
		To     string `json:"to"`
		Amount string `json:"amount"`
		Fee    int64  `json:"fee"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	amount, ok := new(big.Int).SetString(m.Amount, 10)
	if m.Auth == "" { // a gap filler: moves nothing
		amount, ok = new(big.Int), true
	}
	if !ok {
		return nil, errors.New("fake: bad amount")
	}
	sum := sha256.Sum256(raw)
	return &fakeTx{hash: "0x" + hex.EncodeToString(sum[:]), nonce: m.Nonce, fee: m.Fee, authID: m.Auth, from: m.From, to: m.To, amount: amount}, nil
}

func (c *fakeChain) Broadcast(ctx context.Context, tx *settle.Tx) error {
	c.calls.Add(1)
	c.mu.Lock()
	if hook := c.beforeBroadcast; hook != nil {
		c.beforeBroadcast = nil
		c.mu.Unlock()
		hook()
		c.mu.Lock()
	}
	if c.blockBroadcast {
		c.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	defer c.mu.Unlock()
	if c.failBroadcast != nil {
		return c.failBroadcast
	}
	ftx, err := decodeFakeRaw(tx.Raw)
	if err != nil || ftx.hash != tx.Hash {
		return fmt.Errorf("fake: malformed transaction: %v", err)
	}
	if _, ok := c.pool[ftx.hash]; ok {
		return nil // already known
	}
	if _, ok := c.receipts[ftx.hash]; ok {
		return nil
	}
	if c.refuse != nil {
		if err := c.refuse(ftx.authID); err != nil {
			return err
		}
	}
	if c.refusedAuth != "" && ftx.authID == c.refusedAuth {
		return c.refuseInBatch
	}
	if ftx.nonce < c.accountNonce {
		return errors.New("nonce too low")
	}
	for h, other := range c.pool {
		if other.nonce == ftx.nonce {
			if ftx.fee <= other.fee {
				return errors.New("replacement transaction underpriced")
			}
			delete(c.pool, h)
		}
	}
	c.pool[ftx.hash] = ftx
	c.broadcasts++
	if ftx.authID != "" {
		c.sentAuth[ftx.authID] = true
	}
	if c.autoMine {
		c.mineLocked()
	}
	return nil
}

// BroadcastBatch sends txs in order, each as Broadcast does, as a node
// answers a JSON-RPC batch.
func (c *fakeChain) BroadcastBatch(ctx context.Context, txs []*settle.Tx) ([]error, error) {
	c.mu.Lock()
	if c.failBatch != nil {
		defer c.mu.Unlock()
		return nil, c.failBatch
	}
	c.batches++
	if c.refuseInBatch != nil && c.refusedAuth == "" && len(txs) >= 3 {
		if ftx, err := decodeFakeRaw(txs[1].Raw); err == nil {
			c.refusedAuth = ftx.authID
		}
	}
	c.mu.Unlock()
	errs := make([]error, len(txs))
	for i, tx := range txs {
		errs[i] = c.Broadcast(ctx, tx)
	}
	return errs, nil
}

// mine includes every pool transaction whose nonce is next, in order.
func (c *fakeChain) mine() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mineLocked()
}

func (c *fakeChain) mineLocked() {
	included := false
	defer func() {
		if included {
			c.blocks++
		}
	}()
	for progressed := true; progressed; {
		progressed = false
		for h, tx := range c.pool {
			if tx.nonce != c.accountNonce {
				continue
			}
			delete(c.pool, h)
			c.accountNonce++
			progressed, included = true, true
			if tx.authID == "" {
				c.receipts[h] = true
				continue
			}
			bal := c.balances[tx.from]
			if c.authUsed[tx.authID] || bal == nil || bal.Cmp(tx.amount) < 0 {
				c.receipts[h] = false
				continue
			}
			c.authUsed[tx.authID] = true
			bal.Sub(bal, tx.amount)
			to := c.balances[tx.to]
			if to == nil {
				to = new(big.Int)
				c.balances[tx.to] = to
			}
			to.Add(to, tx.amount)
			c.receipts[h] = true
			c.transfers++
		}
	}
}

// dropPool forgets unmined transactions, as a restarted node does.
func (c *fakeChain) dropPool() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.pool)
}

// useAuthorization spends an authorization outside the facilitator (the
// payer submitted it elsewhere), consuming one signer-independent slot.
func (c *fakeChain) useAuthorization(authID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.authUsed[authID] = true
}

// burnNonce makes the chain's account nonce move past n, as another
// transaction from the same signer key would.
func (c *fakeChain) burnNonce() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.accountNonce++
	c.blocks++
}

func (c *fakeChain) PayerBalance(ctx context.Context, req *x402.PaymentRequest) (*big.Int, error) {
	c.calls.Add(1)
	c.mu.Lock()
	c.balanceReads++
	c.mu.Unlock()
	return c.balance(req.Payer()), nil
}

func (c *fakeChain) Receipt(ctx context.Context, hash string) (bool, bool, error) {
	c.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return false, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ok, found := c.receipts[hash]
	return found, ok, nil
}

func (c *fakeChain) Head(ctx context.Context) (uint64, error) {
	c.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heads++
	return c.blocks, nil
}

func (c *fakeChain) Receipts(ctx context.Context, hashes []string) ([]settle.ReceiptStatus, error) {
	c.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.receiptBatches++
	if c.failReceipts != nil {
		c.failedReads++
		return nil, c.failReceipts
	}
	out := make([]settle.ReceiptStatus, len(hashes))
	for i, h := range hashes {
		out[i].Success, out[i].Found = c.receipts[h]
	}
	return out, nil
}

func (c *fakeChain) AuthorizationUsed(ctx context.Context, req *x402.PaymentRequest) (bool, error) {
	c.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authUsed[c.authID(req)], nil
}

func (c *fakeChain) ResyncNonce(ctx context.Context, signer string) error {
	c.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resyncs++
	n := c.accountNonce
	for {
		found := false
		for _, tx := range c.pool {
			if tx.nonce == n {
				found = true
			}
		}
		if !found {
			break
		}
		n++
	}
	c.localNonce = n
	return nil
}

// poolSize counts broadcast transactions not mined (a nonce gap keeps them).
func (c *fakeChain) poolSize() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pool)
}

func (c *fakeChain) reads() (simulations, balanceReads, broadcasts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.simulations, c.balanceReads, c.broadcasts
}

func (c *fakeChain) simulated() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.simulations
}

func (c *fakeChain) stats() (transfers, broadcasts, prepares int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.transfers, c.broadcasts, c.prepares
}

// Addresses used by the fake tests.
const (
	payerA   = "0x1111111111111111111111111111111111111111"
	merchant = "0x2222222222222222222222222222222222222222"
	asset    = "0x3333333333333333333333333333333333333333"
)

// payment describes one signed authorization; body renders it.
type payment struct {
	network string
	// payloadNetwork, when set, is the network the payload claims instead.
	payloadNetwork string
	from, to       string
	payTo          string
	amount         string
	nonce          byte
	resource       string // differs between bodies carrying one authorization
}

func newPayment(nonce byte) payment {
	return payment{network: "eip155:84532", from: payerA, to: merchant, payTo: merchant, amount: "1000", nonce: nonce, resource: "https://merchant.example/a"}
}

func (p payment) body(tb testing.TB) []byte {
	tb.Helper()
	req := x402.PaymentRequirementsV2{
		Scheme: "exact", Network: p.network, Amount: x402.Decimal(p.amount), Asset: asset, PayTo: p.payTo,
		MaxTimeoutSeconds: 60, Extra: &x402.Extra{Name: "USDC", Version: "2"},
	}
	auth := x402.Authorization{
		From: p.from, To: p.to, Value: x402.Decimal(p.amount), ValidAfter: "0", ValidBefore: "99999999999",
		Nonce: "0x" + strings.Repeat(fmt.Sprintf("%02x", p.nonce), 32),
	}
	sig := bytes.Repeat([]byte{0xab}, 65)
	accepted := req
	if p.payloadNetwork != "" {
		accepted.Network = p.payloadNetwork
	}
	payload := x402.NewPayloadV2(&x402.ResourceInfo{URL: p.resource}, accepted, auth, sig, nil)
	b, err := json.Marshal(x402.NewRequestV2(payload, req))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func (c *fakeChain) Genesis() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.genesis
}

func (c *fakeChain) MinedNonce(ctx context.Context, signer string) (uint64, error) {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accountNonce, nil
}

func (c *fakeChain) Replace(ctx context.Context, tx *settle.Tx) (*settle.Tx, error) {
	c.calls.Add(1)
	var m map[string]any
	if err := json.Unmarshal(tx.Raw, &m); err != nil {
		return nil, err
	}
	fee, _ := m["fee"].(float64)
	m["fee"] = fee + 1
	raw, _ := json.Marshal(m)
	sum := sha256.Sum256(raw)
	c.mu.Lock()
	c.replacements++
	c.mu.Unlock()
	return &settle.Tx{Signer: tx.Signer, Nonce: tx.Nonce, Hash: "0x" + hex.EncodeToString(sum[:]), Raw: raw}, nil
}

func (c *fakeChain) FillNonce(ctx context.Context, signer string, nonce uint64) (*settle.Tx, error) {
	c.calls.Add(1)
	raw, _ := json.Marshal(map[string]any{"nonce": nonce, "fee": 100})
	sum := sha256.Sum256(raw)
	c.mu.Lock()
	c.fills++
	c.mu.Unlock()
	return &settle.Tx{Signer: signer, Nonce: nonce, Hash: "0x" + hex.EncodeToString(sum[:]), Raw: raw}, nil
}
