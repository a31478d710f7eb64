package evm_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ardx-dev/ardx/facilitator/evm"
)

// downBackend is an RPC that does not answer while down is set.
type downBackend struct {
	evm.Backend
	down atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:9: connect: connection refused")

func (b *downBackend) ChainID(ctx context.Context) (*big.Int, error) {
	if b.down.Load() {
		return nil, errDown
	}
	return b.Backend.ChainID(ctx)
}

func (b *downBackend) HeaderByNumber(ctx context.Context, n *big.Int) (*types.Header, error) {
	if b.down.Load() {
		return nil, errDown
	}
	return b.Backend.HeaderByNumber(ctx, n)
}

func (b *downBackend) CodeAt(ctx context.Context, a common.Address, n *big.Int) ([]byte, error) {
	if b.down.Load() {
		return nil, errDown
	}
	return b.Backend.CodeAt(ctx, a, n)
}

func (b *downBackend) CallContract(ctx context.Context, m ethereum.CallMsg, n *big.Int) ([]byte, error) {
	if b.down.Load() {
		return nil, errDown
	}
	return b.Backend.CallContract(ctx, m, n)
}

// TestNetworkWithDeadRPCStartsWithdrawnAndJoins: Open succeeds with the RPC
// down, the network is unavailable with a reason and publishes no token
// facts; once the RPC answers, the background check joins it.
func TestNetworkWithDeadRPCStartsWithdrawnAndJoins(t *testing.T) {
	d := mustDevChain(t)
	b := &downBackend{Backend: d.Client}
	b.down.Store(true)
	n, err := evm.Open(context.Background(), evm.NetworkConfig{
		Name: "eip155:1337", Backend: b, Asset: d.Asset.Hex(),
		SignerKeys: []*ecdsa.PrivateKey{d.SignerKey}, HealthInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Open with the RPC down: %v", err)
	}
	defer n.Close()
	if ok, why := n.Available(); ok || !strings.Contains(why, "not answering") {
		t.Fatalf("Available = %t %q, want withdrawn because the RPC is not answering", ok, why)
	}
	if n.TokenName() != "" || n.Genesis() != "" {
		t.Fatalf("facts published before the chain answered: %q %q", n.TokenName(), n.Genesis())
	}
	b.down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for ok, _ := n.Available(); !ok; ok, _ = n.Available() {
		if time.Now().After(deadline) {
			t.Fatal("not joined 10 s after the RPC answered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n.TokenName() != "USDC" || n.Decimals() != 6 || n.Genesis() != d.Network.Genesis() {
		t.Fatalf("after joining: name %q decimals %d genesis %q", n.TokenName(), n.Decimals(), n.Genesis())
	}
}

// TestNetworkOpenRefusesAWrongChainOrToken: an RPC that answers for another
// chain, or no contract at the asset, is the operator's mistake and stops
// the start, as before.
func TestNetworkOpenRefusesAWrongChainOrToken(t *testing.T) {
	d := mustDevChain(t)
	for name, cfg := range map[string]evm.NetworkConfig{
		"another chain":     {Name: "eip155:8453", Backend: d.Client, Asset: d.Asset.Hex()},
		"no token contract": {Name: "eip155:1337", Backend: d.Client, Asset: d.Merchant.Hex()},
	} {
		cfg.SignerKeys = []*ecdsa.PrivateKey{d.SignerKey}
		if n, err := evm.Open(context.Background(), cfg); err == nil {
			n.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
}

// indexingBackend answers receipt look-ups as a geth node does while it
// indexes its transactions (after a start, or on the simulated chain just
// after a block), for the first few calls.
type indexingBackend struct {
	evm.Backend
	left atomic.Int32
}

func (b *indexingBackend) TransactionReceipt(ctx context.Context, h common.Hash) (*types.Receipt, error) {
	if b.left.Add(-1) >= 0 {
		return nil, errors.New("transaction indexing is in progress")
	}
	return b.Backend.TransactionReceipt(ctx, h)
}

// TestReceiptWhileTheNodeIndexes: "transaction indexing is in progress" is
// no receipt yet, not a failure; the receipt is read once the node has it.
func TestReceiptWhileTheNodeIndexes(t *testing.T) {
	d := mustDevChain(t)
	b := &indexingBackend{Backend: d.Client}
	n, err := evm.Open(context.Background(), evm.NetworkConfig{
		Name: "eip155:1337", Backend: b, Asset: d.Asset.Hex(), SignerKeys: []*ecdsa.PrivateKey{d.SignerKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	hash := common.HexToHash("0x" + strings.Repeat("ab", 32)).Hex()
	b.left.Store(1)
	if found, _, err := n.Receipt(context.Background(), hash); err != nil || found {
		t.Fatalf("while indexing: found=%v err=%v, want not yet and no error", found, err)
	}
	if found, _, err := n.Receipt(context.Background(), hash); err != nil || found {
		t.Fatalf("an unknown transaction: found=%v err=%v", found, err)
	}
	// The receipt watcher's batch read says the same.
	b.left.Store(1)
	rs, err := n.Receipts(context.Background(), []string{hash, hash})
	if err != nil || len(rs) != 2 || rs[0].Found || rs[0].Err != nil || rs[1].Found || rs[1].Err != nil {
		t.Fatalf("batch while indexing: %+v %v, want two not-yet answers without errors", rs, err)
	}
}
