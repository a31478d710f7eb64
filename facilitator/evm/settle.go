package evm

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

const (
	// maxTransferGas caps what one settlement may burn: a FiatToken transfer
	// costs 55-90k gas, an ERC-1271 wallet adds its own check. A payment
	// needing more is refused rather than relayed (gas-drain defence).
	maxTransferGas = 400_000
	// fallbackTip is used when the node cannot suggest a tip (0.1 gwei).
	fallbackTip = 100_000_000
)

// AuthorizationID identifies the signed authorization across request bodies:
// lower-case "<chainId>:<asset>:<from>:<nonce>".
func (n *Network) AuthorizationID(req *x402.PaymentRequest) string {
	return strings.ToLower(fmt.Sprintf("%s:%s:%s:%s", n.chainID, req.Requirements.Asset, req.Authorization.From, req.Authorization.Nonce))
}

// Simulate re-checks the payment and simulates the transfer once more, as
// the gas estimate from the signer side, so a payment that would fail costs
// no gas. It takes no nonce.
func (n *Network) Simulate(ctx context.Context, req *x402.PaymentRequest) (*settle.Transfer, *x402.SettleResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	c, fail := n.check(ctx, req)
	if fail != nil {
		return n.prepareFailure(req, fail)
	}
	data := transferCalldata(c)
	gas, err := n.backend.EstimateGas(ctx, ethereum.CallMsg{From: n.signers[0].addr, To: &n.asset, Data: data})
	if err != nil {
		if isRevert(err) {
			return n.prepareFailure(req, settleRevert(req, revertReason(err)))
		}
		return nil, nil, fmt.Errorf("evm: %s: estimate gas: %w", n.id, redact(err, n.rpcURL))
	}
	if gas > maxTransferGas {
		return n.prepareFailure(req, invalidf(req, x402.ReasonSimulationFailed,
			"the transfer would use %d gas, over the %d cap", gas, maxTransferGas))
	}
	// A margin over the estimate: state may shift between estimate and
	// inclusion (another transfer warming or cooling the same slots).
	gas = min(gas+gas/5+5_000, maxTransferGas)
	return &settle.Transfer{Data: data, Gas: gas, SimulatedAt: time.Now()}, nil, nil
}

// Sign builds and signs the transferWithAuthorization transaction of a
// simulated transfer with EIP-1559 fees and the next local nonce of the
// next signer in turn. It broadcasts nothing.
func (n *Network) Sign(ctx context.Context, t *settle.Transfer) (*settle.Tx, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	tip, feeCap, err := n.fees(ctx)
	if err != nil {
		return nil, err
	}
	s := n.signers[int(n.next.Add(1)-1)%len(n.signers)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.nonceKnown {
		nonce, err := n.backend.PendingNonceAt(ctx, s.addr)
		if err != nil {
			return nil, fmt.Errorf("evm: %s: read signer nonce: %w", n.id, redact(err, n.rpcURL))
		}
		s.nonce, s.nonceKnown = nonce, true
	}
	tx, err := types.SignNewTx(s.key, types.LatestSignerForChainID(n.chainID), &types.DynamicFeeTx{
		ChainID: n.chainID, Nonce: s.nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: t.Gas, To: &n.asset, Data: t.Data,
	})
	if err != nil {
		return nil, fmt.Errorf("evm: %s: sign transaction: %w", n.id, err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("evm: %s: encode transaction: %w", n.id, err)
	}
	s.nonce++
	return &settle.Tx{Signer: s.addr.Hex(), Nonce: tx.Nonce(), Hash: tx.Hash().Hex(), Raw: raw}, nil
}

// prepareFailure turns a verify failure into Simulate's answer: the payer's
// faults become a failed settle response, the RPC's become an error.
func (n *Network) prepareFailure(req *x402.PaymentRequest, v *x402.VerifyResponse) (*settle.Transfer, *x402.SettleResponse, error) {
	if v.InvalidReason == x402.ReasonServiceUnavailable {
		return nil, nil, fmt.Errorf("evm: %s: %s", n.id, v.InvalidMessage)
	}
	return nil, &x402.SettleResponse{
		Success: false, ErrorReason: v.InvalidReason, ErrorMessage: v.InvalidMessage,
		Payer: req.Payer(), Transaction: "", Network: req.Network(),
	}, nil
}

// feeQuoteTTL is how long a fee quote is reused. The fee cap is twice the
// base fee on top of the tip, and the base fee moves at most 12.5% a block,
// so a quote a second old still gets a transaction included; reusing it
// saves two RPCs in the serial part of every settlement.
const feeQuoteTTL = time.Second

// feeQuote is a cached answer of fees.
type feeQuote struct {
	tip, feeCap *big.Int
	at          time.Time
}

// fees returns the EIP-1559 tip and fee cap: the node's suggested tip (or a
// fallback) and twice the base fee on top, so the transaction stays
// includable through several blocks of rising base fees.
func (n *Network) fees(ctx context.Context) (tip, feeCap *big.Int, err error) {
	if q := n.feeQuote.Load(); q != nil && time.Since(q.at) < feeQuoteTTL {
		return q.tip, q.feeCap, nil
	}
	head, err := n.backend.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("evm: %s: read head: %w", n.id, redact(err, n.rpcURL))
	}
	tip, err = n.backend.SuggestGasTipCap(ctx)
	if err != nil || tip == nil || tip.Sign() <= 0 {
		tip = big.NewInt(fallbackTip)
	}
	base := head.BaseFee
	if base == nil {
		base = big.NewInt(1_000_000_000)
	}
	feeCap = new(big.Int).Add(tip, new(big.Int).Mul(base, big.NewInt(2)))
	n.feeQuote.Store(&feeQuote{tip: tip, feeCap: feeCap, at: time.Now()})
	return tip, feeCap, nil
}

// Broadcast sends a prepared transaction. A transaction the node already
// knows (pending or mined) is not an error, so a retry after a crash is safe.
func (n *Network) Broadcast(ctx context.Context, tx *settle.Tx) error {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	var t types.Transaction
	if err := t.UnmarshalBinary(tx.Raw); err != nil {
		return fmt.Errorf("evm: %s: decode prepared transaction: %w", n.id, err)
	}
	return n.sendResult(ctx, &t, n.backend.SendTransaction(ctx, &t))
}

// BroadcastBatch sends prepared transactions in order in one round trip (a
// JSON-RPC batch) and returns one error per transaction, each as Broadcast
// would; err when the batch itself failed and nothing is known of any.
func (n *Network) BroadcastBatch(ctx context.Context, txs []*settle.Tx) ([]error, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	decoded := make([]*types.Transaction, len(txs))
	for i, tx := range txs {
		decoded[i] = new(types.Transaction)
		if err := decoded[i].UnmarshalBinary(tx.Raw); err != nil {
			return nil, fmt.Errorf("evm: %s: decode prepared transaction: %w", n.id, err)
		}
	}
	errs, err := sendTransactions(ctx, n.backend, decoded)
	if err != nil {
		return nil, fmt.Errorf("evm: %s: broadcast batch: %w", n.id, redact(err, n.rpcURL))
	}
	for i, t := range decoded {
		if errs[i] != nil {
			errs[i] = n.sendResult(ctx, t, errs[i])
		}
	}
	return errs, nil
}

// sendTransactions sends txs in one batch when the backend can, else one
// by one.
func sendTransactions(ctx context.Context, b Backend, txs []*types.Transaction) ([]error, error) {
	if bs, ok := b.(interface {
		SendTransactions(context.Context, []*types.Transaction) ([]error, error)
	}); ok {
		return bs.SendTransactions(ctx, txs)
	}
	errs := make([]error, len(txs))
	for i, t := range txs {
		errs[i] = b.SendTransaction(ctx, t)
	}
	return errs, nil
}

// sendResult reads a send's error: nil when the node took t or already
// knows it (pending or mined).
func (n *Network) sendResult(ctx context.Context, t *types.Transaction, err error) error {
	if err == nil {
		return nil
	}
	if strings.Contains(strings.ToLower(err.Error()), "already known") {
		return nil
	}
	if _, _, terr := n.backend.TransactionByHash(ctx, t.Hash()); terr == nil {
		return nil
	}
	return fmt.Errorf("evm: %s: broadcast %s: %w", n.id, t.Hash().Hex(), redact(err, n.rpcURL))
}

// Receipt reports a transaction's outcome; found is false while it is not mined.
func (n *Network) Receipt(ctx context.Context, hash string) (found, success bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	if _, err := hexutil.Decode(hash); err != nil || len(hash) != 66 {
		return false, false, fmt.Errorf("evm: %s: %q is not a transaction hash", n.id, hash)
	}
	r, err := n.backend.TransactionReceipt(ctx, common.HexToHash(hash))
	if receiptNotYet(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("evm: %s: receipt %s: %w", n.id, hash, redact(err, n.rpcURL))
	}
	return true, r.Status == types.ReceiptStatusSuccessful, nil
}

// receiptNotYet reports whether a receipt look-up's error means no receipt
// yet: not found, or a geth node still indexing its transactions (after a
// start, or on the simulated chain just after a block), which answers
// "transaction indexing is in progress" for a receipt it may have.
func receiptNotYet(err error) bool {
	return errors.Is(err, ethereum.NotFound) || err != nil && strings.Contains(err.Error(), "transaction indexing is in progress")
}

// Head returns the number of the node's latest block.
func (n *Network) Head(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	var (
		v   uint64
		err error
	)
	if bn, ok := n.backend.(interface {
		BlockNumber(context.Context) (uint64, error)
	}); ok {
		v, err = bn.BlockNumber(ctx)
	} else {
		var h *types.Header
		if h, err = n.backend.HeaderByNumber(ctx, nil); err == nil {
			v = h.Number.Uint64()
		}
	}
	if err != nil {
		return 0, fmt.Errorf("evm: %s: latest block number: %w", n.id, redact(err, n.rpcURL))
	}
	return v, nil
}

// Receipts reports the outcome of each of hashes as Receipt does, asked in
// one JSON-RPC batch where the backend allows it.
func (n *Network) Receipts(ctx context.Context, hashes []string) ([]settle.ReceiptStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	hs := make([]common.Hash, len(hashes))
	for i, h := range hashes {
		if _, err := hexutil.Decode(h); err != nil || len(h) != 66 {
			return nil, fmt.Errorf("evm: %s: %q is not a transaction hash", n.id, h)
		}
		hs[i] = common.HexToHash(h)
	}
	out := make([]settle.ReceiptStatus, len(hashes))
	br, ok := n.backend.(interface {
		TransactionReceipts(context.Context, []common.Hash) ([]*types.Receipt, []error, error)
	})
	if !ok {
		for i, h := range hashes {
			out[i].Found, out[i].Success, out[i].Err = n.Receipt(ctx, h)
		}
		return out, nil
	}
	rs, errs, err := br.TransactionReceipts(ctx, hs)
	if err != nil {
		return nil, fmt.Errorf("evm: %s: receipts: %w", n.id, redact(err, n.rpcURL))
	}
	for i, r := range rs {
		switch {
		case receiptNotYet(errs[i]):
		case errs[i] != nil:
			out[i].Err = fmt.Errorf("evm: %s: receipt %s: %w", n.id, hashes[i], redact(errs[i], n.rpcURL))
		case r != nil:
			out[i].Found, out[i].Success = true, r.Status == types.ReceiptStatusSuccessful
		}
	}
	return out, nil
}

// AuthorizationUsed reads authorizationState(from, nonce) on the asset.
func (n *Network) AuthorizationUsed(ctx context.Context, req *x402.PaymentRequest) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	a, err := ParseAuthorization(req.Authorization)
	if err != nil {
		return false, err
	}
	out, err := n.call(ctx, common.Address{}, methodAuthorizationState, a.From, a.Nonce)
	if err != nil {
		return false, fmt.Errorf("evm: %s: authorizationState: %w", n.id, redact(err, n.rpcURL))
	}
	return out[0].(bool), nil
}

// PayerBalance reads the payer's balance of the asset at the latest block.
func (n *Network) PayerBalance(ctx context.Context, req *x402.PaymentRequest) (*big.Int, error) {
	a, err := ParseAuthorization(req.Authorization)
	if err != nil {
		return nil, err
	}
	return n.TokenBalance(ctx, a.From)
}

// ResyncNonce re-reads a signer's pending nonce from the chain, after a
// broadcast failed and the local counter may have run ahead.
func (n *Network) ResyncNonce(ctx context.Context, signerAddr string) error {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	for _, s := range n.signers {
		if !x402.EqualAddress(s.addr.Hex(), signerAddr) {
			continue
		}
		nonce, err := n.backend.PendingNonceAt(ctx, s.addr)
		if err != nil {
			return fmt.Errorf("evm: %s: read signer nonce: %w", n.id, redact(err, n.rpcURL))
		}
		s.mu.Lock()
		if s.nonceKnown && s.nonce != nonce {
			n.log.Info("signer nonce resynced", "network", n.id, "signer", s.addr.Hex(), "local", s.nonce, "chain", nonce)
		}
		s.nonce, s.nonceKnown = nonce, true
		s.mu.Unlock()
		return nil
	}
	return fmt.Errorf("evm: %s: %s is not a signer of this network", n.id, signerAddr)
}

// MinedNonce returns the signer's nonce at the latest block.
func (n *Network) MinedNonce(ctx context.Context, signerAddr string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	s, err := n.signer(signerAddr)
	if err != nil {
		return 0, err
	}
	nonce, err := n.backend.NonceAt(ctx, s.addr, nil)
	if err != nil {
		return 0, fmt.Errorf("evm: %s: read mined nonce: %w", n.id, redact(err, n.rpcURL))
	}
	return nonce, nil
}

// maxFeeMultiple bounds replacements: a fee cap never goes past this many
// times the current quote's, so a transaction that stays stuck for another
// reason cannot drain the signer in rising fees.
const maxFeeMultiple = 10

// Replace signs tx again with the same signer, nonce, gas and call, and
// fees that replace it in a node's pool: each fee field at least the
// current quote and more than 10% (here 12.5% + 1 wei) above the old one,
// as geth's and other clients' replacement rules require.
func (n *Network) Replace(ctx context.Context, tx *settle.Tx) (*settle.Tx, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	var old types.Transaction
	if err := old.UnmarshalBinary(tx.Raw); err != nil {
		return nil, fmt.Errorf("evm: %s: decode transaction to replace: %w", n.id, err)
	}
	s, err := n.signer(tx.Signer)
	if err != nil {
		return nil, err
	}
	tip, feeCap, err := n.fees(ctx)
	if err != nil {
		return nil, err
	}
	tip = maxBig(tip, bump(old.GasTipCap()))
	feeCap = maxBig(maxBig(feeCap, bump(old.GasFeeCap())), tip)
	if quoteCap := n.feeQuote.Load(); quoteCap != nil && feeCap.Cmp(new(big.Int).Mul(quoteCap.feeCap, big.NewInt(maxFeeMultiple))) > 0 {
		return nil, fmt.Errorf("evm: %s: replacing %s would pay over %d times the current fee cap", n.id, old.Hash().Hex(), maxFeeMultiple)
	}
	return n.signWith(s, &types.DynamicFeeTx{
		ChainID: n.chainID, Nonce: old.Nonce(), GasTipCap: tip, GasFeeCap: feeCap,
		Gas: old.Gas(), To: old.To(), Value: old.Value(), Data: old.Data(),
	})
}

// FillNonce signs a transaction that moves nothing (no value, to the
// signer itself, 21,000 gas) with the signer's nonce, at twice the current
// fees so it also replaces a cheaper transaction stuck at that nonce.
func (n *Network) FillNonce(ctx context.Context, signerAddr string, nonce uint64) (*settle.Tx, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	s, err := n.signer(signerAddr)
	if err != nil {
		return nil, err
	}
	tip, feeCap, err := n.fees(ctx)
	if err != nil {
		return nil, err
	}
	two := big.NewInt(2)
	return n.signWith(s, &types.DynamicFeeTx{
		ChainID: n.chainID, Nonce: nonce, GasTipCap: new(big.Int).Mul(tip, two), GasFeeCap: new(big.Int).Mul(feeCap, two),
		Gas: 21_000, To: &s.addr, Value: new(big.Int),
	})
}

func (n *Network) signWith(s *signer, inner *types.DynamicFeeTx) (*settle.Tx, error) {
	tx, err := types.SignNewTx(s.key, types.LatestSignerForChainID(n.chainID), inner)
	if err != nil {
		return nil, fmt.Errorf("evm: %s: sign transaction: %w", n.id, err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("evm: %s: encode transaction: %w", n.id, err)
	}
	return &settle.Tx{Signer: s.addr.Hex(), Nonce: tx.Nonce(), Hash: tx.Hash().Hex(), Raw: raw}, nil
}

// signer returns the network's signer with address addr.
func (n *Network) signer(addr string) (*signer, error) {
	for _, s := range n.signers {
		if x402.EqualAddress(s.addr.Hex(), addr) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("evm: %s: %s is not a signer of this network", n.id, addr)
}

// bump returns v raised by 12.5% and one wei: above the 10% price bump
// nodes require of a replacement.
func bump(v *big.Int) *big.Int {
	out := new(big.Int).Rsh(v, 3)
	out.Add(out, v)
	return out.Add(out, big.NewInt(1))
}

func maxBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}
