// Package settle owns exactly-once settlement of x402 payments: the Chain
// contract a network must offer, and the Engine that screens, re-verifies,
// prepares, durably records, broadcasts and confirms each payment so that one
// canonical request body moves money at most once, across concurrent
// requests, different bodies carrying one authorization, crashes and
// restarts.
//
// The order of work for a new body is fixed: screening (no chain call at
// all), network routing, Chain.Check, Chain.Simulate (the transfer
// simulated again, as the gas estimate), then, on the network's single
// worker, Chain.Sign with the next signer nonce, a fsynced intent record in
// kv, Chain.Broadcast, and in the background a receipt wait that records the
// final outcome. The worker takes every payment that is ready when it is
// free as one run: one commit for their intents, then broadcasts in nonce
// order. StartReconciling resolves, in the background while the service
// answers, the intents a previous process left pending; a transaction whose
// receipt does not come is sent again, then replaced at a higher fee with
// the same nonce, and a nonce gap in front of it is filled.
package settle

import (
	"context"
	"math/big"
	"time"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// Transfer is a payment's transfer call, simulated and not yet signed.
type Transfer struct {
	Data        []byte    // calldata of the transfer
	Gas         uint64    // gas limit to sign with
	SimulatedAt time.Time // when the simulation that allowed it ran
}

// Tx is a signed transferWithAuthorization transaction ready to broadcast.
type Tx struct {
	Signer string // 0x address of the gas-paying signer
	Nonce  uint64 // the signer's account nonce used
	Hash   string // 0x transaction hash
	Raw    []byte // the signed transaction, binary (types.Transaction.MarshalBinary)
}

// ReceiptStatus is what a node says of one transaction's receipt: Found is
// false while it is not mined; Err is the node's error for this one.
type ReceiptStatus struct {
	Found, Success bool
	Err            error
}

// Chain is one network the engine settles on; *evm.Network implements it.
type Chain interface {
	// ID returns the network's CAIP-2 id, e.g. "eip155:84532".
	ID() string
	// V1Name returns the v1 short name ("base-sepolia"), "" if none.
	V1Name() string
	// Available reports false, with a reason, when the network cannot settle
	// (RPC failing, signer gas below threshold).
	Available() (ok bool, reason string)
	// Verify checks a payment completely (scheme, EIP-712 domain, network,
	// signature, recipient, time window, exact amount, simulated transfer,
	// diagnosis) without moving anything.
	Verify(ctx context.Context, req *x402.PaymentRequest) x402.VerifyResponse
	// Check is Verify without the simulated transfer: the settle path's
	// re-verification, with Simulate right after it as the simulation (the
	// official facilitator's settle also re-verifies without simulating).
	Check(ctx context.Context, req *x402.PaymentRequest) x402.VerifyResponse
	// AuthorizationID identifies the signed authorization: lower-case
	// "<chainId>:<asset>:<from>:<nonce>".
	AuthorizationID(req *x402.PaymentRequest) string
	// Simulate checks the payment once more and simulates its transfer as
	// the signer will send it (the gas estimate). A payment that would fail
	// returns fail != nil (the invalid_* or transaction_failed response,
	// Transaction "") and no transfer. It takes no nonce and signs nothing,
	// so it runs concurrently, outside the network's serial section.
	Simulate(ctx context.Context, req *x402.PaymentRequest) (t *Transfer, fail *x402.SettleResponse, err error)
	// Sign builds and signs the transaction for a simulated transfer with the
	// next locally managed nonce of one of the network's signers. It does not
	// broadcast; on error no nonce is taken.
	Sign(ctx context.Context, t *Transfer) (*Tx, error)
	// Broadcast sends a prepared transaction; a transaction the node already
	// knows is not an error.
	Broadcast(ctx context.Context, tx *Tx) error
	// BroadcastBatch sends a run's transactions in order in one round trip
	// where the node allows it (a JSON-RPC batch) and returns one error per
	// transaction, each as Broadcast's; err means nothing is known of any.
	BroadcastBatch(ctx context.Context, txs []*Tx) (errs []error, err error)
	// Receipt reports a transaction's outcome; found is false while it is not
	// mined.
	Receipt(ctx context.Context, hash string) (found, success bool, err error)
	// Head returns the number of the chain's latest block; the receipt
	// watcher follows it to know when to ask for receipts.
	Head(ctx context.Context) (uint64, error)
	// Receipts reports the outcome of each of hashes as Receipt does, in one
	// round trip where the node allows it (a JSON-RPC batch); err means
	// nothing is known of any.
	Receipts(ctx context.Context, hashes []string) ([]ReceiptStatus, error)
	// AuthorizationUsed reads authorizationState(from, nonce) on the asset.
	AuthorizationUsed(ctx context.Context, req *x402.PaymentRequest) (bool, error)
	// PayerBalance reads the payer's balance of the asset at the latest
	// block, in its smallest unit.
	PayerBalance(ctx context.Context, req *x402.PaymentRequest) (*big.Int, error)
	// ResyncNonce re-reads a signer's pending nonce from the chain (after a
	// failed broadcast).
	ResyncNonce(ctx context.Context, signer string) error
	// Genesis returns the hash of the chain's genesis block, "" while it is
	// not known. An intent recorded on another genesis names a chain that
	// is gone.
	Genesis() string
	// MinedNonce returns the signer's nonce at the latest block: how many
	// of its transactions the chain has mined.
	MinedNonce(ctx context.Context, signer string) (uint64, error)
	// Replace signs tx again, same signer, nonce and call, with fees high
	// enough to replace it in a node's pool (EIP-1559 replacement: both fee
	// fields raised by more than the nodes' 10% price bump). It broadcasts
	// nothing.
	Replace(ctx context.Context, tx *Tx) (*Tx, error)
	// FillNonce signs a transaction that moves nothing (no value, to the
	// signer itself) with the signer's nonce, to fill a gap in front of
	// recorded transactions; its fees replace a stuck transaction there.
	FillNonce(ctx context.Context, signer string, nonce uint64) (*Tx, error)
}
