package settle

import (
	"context"
	"math/big"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// Payer debts. Each payment is simulated against the last mined state,
// which does not include this facilitator's own transactions still waiting
// to be mined. Two payments from one payer that together exceed the
// payer's balance would both pass, and the second would revert on-chain at
// our gas: a free gas drain for anyone who signs more than they hold. So
// each network tracks, per payer, the amounts broadcast and not yet mined.
// A payment from a payer with such a debt is signed only if a fresh balance
// read covers the debt and the payment. Otherwise it is held until the
// debt is settled, and then simulated again, which decides cleanly.

// debt is what one payer owes in transactions broadcast and not yet
// confirmed, and the payments held until those confirm.
type debt struct {
	amount *big.Int
	txs    int
	held   []*job
}

func payerKey(req *x402.PaymentRequest) string { return strings.ToLower(req.Payer()) }

func paymentValue(req *x402.PaymentRequest) *big.Int {
	v, ok := new(big.Int).SetString(string(req.Authorization.Value), 10)
	if !ok || v.Sign() < 0 {
		return new(big.Int)
	}
	return v
}

// runBalances remembers, within one run, each payer's balance read and the
// amounts signed so far.
type runBalances map[string]*runBalance

type runBalance struct {
	balance *big.Int // nil until read
	signed  *big.Int
}

// affordable reports whether j's payment can be signed now: true when its
// payer owes nothing unconfirmed and has signed nothing earlier in this
// run, else when the balance (read once per payer and run) covers what is
// owed plus this payment. On a read error it answers false: holding is the
// safe side.
func (e *Engine) affordable(ctx context.Context, n *network, j *job, rb runBalances) bool {
	key := payerKey(j.req)
	value := paymentValue(j.req)
	n.mu.Lock()
	owed := new(big.Int)
	if d := n.debts[key]; d != nil {
		owed.Set(d.amount)
	}
	n.mu.Unlock()
	b := rb[key]
	if b == nil {
		b = &runBalance{signed: new(big.Int)}
		rb[key] = b
	}
	owed.Add(owed, b.signed)
	if owed.Sign() > 0 {
		if b.balance == nil {
			bal, err := n.chain.PayerBalance(ctx, j.req)
			if err != nil {
				e.log.Warn("read payer balance; holding the payment until the payer's transactions confirm", "network", n.id, "body", j.f.key, "err", err)
				return false
			}
			b.balance = bal
		}
		if b.balance.Cmp(new(big.Int).Add(owed, value)) < 0 {
			return false
		}
	}
	b.signed.Add(b.signed, value)
	return true
}

// hold parks j until its payer's unconfirmed transactions are mined. Its
// simulation is marked stale so it is simulated again when it returns.
func (e *Engine) hold(n *network, j *job) {
	if j.transfer != nil {
		j.transfer.SimulatedAt = time.Time{}
	}
	key := payerKey(j.req)
	n.mu.Lock()
	d := n.debts[key]
	if d == nil {
		d = &debt{amount: new(big.Int)}
		n.debts[key] = d
	}
	d.held = append(d.held, j)
	n.mu.Unlock()
}

// owe records a broadcast transaction of req's payer.
func (n *network) owe(req *x402.PaymentRequest) {
	key := payerKey(req)
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.debts[key]
	if d == nil {
		d = &debt{amount: new(big.Int)}
		n.debts[key] = d
	}
	d.amount.Add(d.amount, paymentValue(req))
	d.txs++
}

// paid ends the debt of one transaction (mined, or given up waiting for)
// and returns the held payments to the queue once the payer owes nothing.
func (e *Engine) paid(n *network, req *x402.PaymentRequest) {
	key := payerKey(req)
	n.mu.Lock()
	d := n.debts[key]
	if d == nil {
		n.mu.Unlock()
		return
	}
	d.amount.Sub(d.amount, paymentValue(req))
	d.txs--
	var release []*job
	if d.txs <= 0 {
		release = d.held
		delete(n.debts, key)
	}
	n.mu.Unlock()
	e.requeueHeld(n, release)
}

// releaseIdle returns held payments whose payer owes nothing unconfirmed
// (the transactions they waited behind were never broadcast) and has no
// payment in the run on its way to the node. Worker only.
func (e *Engine) releaseIdle(n *network) {
	var release []*job
	n.mu.Lock()
	for key, d := range n.debts {
		if d.txs <= 0 && !n.inflightPays(key) {
			release = append(release, d.held...)
			delete(n.debts, key)
		}
	}
	n.mu.Unlock()
	e.requeueHeld(n, release)
}

// requeueHeld returns held payments to the queue, in the order they were
// held, from a goroutine of its own: the worker may be the caller, and its
// own queue may be full.
func (e *Engine) requeueHeld(n *network, jobs []*job) {
	if len(jobs) == 0 {
		return
	}
	go func() {
		for _, j := range jobs {
			e.enqueue(n, j)
		}
	}()
}
