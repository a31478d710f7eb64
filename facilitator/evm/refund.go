package evm

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// maxPlainTransferGas caps a plain ERC-20 transfer from an operator wallet:
// USDC needs about 35-60k; anything far above means the token misbehaves.
const maxPlainTransferGas = 150_000

// SendToken transfers amount of the network's asset from key's address to
// to with an ordinary ERC-20 transfer that key's address signs and pays the
// gas for (the echo merchant's refund), and waits, bounded by ctx, for the
// receipt. It returns the transaction hash, also with an error once the
// transaction was broadcast. Callers sending from one key serialise their
// calls: the nonce is read from the node's pending state each time.
func (n *Network) SendToken(ctx context.Context, key *ecdsa.PrivateKey, to common.Address, amount *big.Int) (string, error) {
	if key == nil || amount == nil || amount.Sign() <= 0 {
		return "", errors.New("evm: send token: key and a positive amount are required")
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	data, err := tokenABI.Pack(methodTransfer.Name, to, amount)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	gas, err := n.backend.EstimateGas(cctx, ethereum.CallMsg{From: from, To: &n.asset, Data: data})
	if err != nil {
		return "", fmt.Errorf("evm: %s: transfer from %s would fail: %w", n.id, from.Hex(), redact(err, n.rpcURL))
	}
	if gas > maxPlainTransferGas {
		return "", fmt.Errorf("evm: %s: transfer would use %d gas, over the %d cap", n.id, gas, maxPlainTransferGas)
	}
	gas += gas / 5
	tip, feeCap, err := n.fees(cctx)
	if err != nil {
		return "", err
	}
	nonce, err := n.backend.PendingNonceAt(cctx, from)
	if err != nil {
		return "", fmt.Errorf("evm: %s: read nonce of %s: %w", n.id, from.Hex(), redact(err, n.rpcURL))
	}
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(n.chainID), &types.DynamicFeeTx{
		ChainID: n.chainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: gas, To: &n.asset, Data: data,
	})
	if err != nil {
		return "", fmt.Errorf("evm: %s: sign transfer: %w", n.id, err)
	}
	if err := n.backend.SendTransaction(cctx, tx); err != nil {
		return "", fmt.Errorf("evm: %s: broadcast transfer: %w", n.id, redact(err, n.rpcURL))
	}
	hash := tx.Hash().Hex()
	wait := 50 * time.Millisecond
	for {
		found, ok, err := n.Receipt(ctx, hash)
		switch {
		case err != nil:
			return hash, err
		case found && ok:
			return hash, nil
		case found:
			return hash, fmt.Errorf("evm: %s: transfer %s reverted", n.id, hash)
		}
		select {
		case <-ctx.Done():
			return hash, fmt.Errorf("evm: %s: transfer %s not mined: %w", n.id, hash, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// TokenBalance returns who's balance of the network's asset.
func (n *Network) TokenBalance(ctx context.Context, who common.Address) (*big.Int, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	out, err := n.call(ctx, common.Address{}, methodBalanceOf, who)
	if err != nil {
		return nil, fmt.Errorf("evm: %s: balanceOf: %w", n.id, redact(err, n.rpcURL))
	}
	return out[0].(*big.Int), nil
}

// GasBalance returns who's balance of the chain's native coin, in wei.
func (n *Network) GasBalance(ctx context.Context, who common.Address) (*big.Int, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	b, err := n.backend.BalanceAt(ctx, who, nil)
	if err != nil {
		return nil, fmt.Errorf("evm: %s: balance of %s: %w", n.id, who.Hex(), redact(err, n.rpcURL))
	}
	return b, nil
}
