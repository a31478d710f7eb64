package probe

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// The paths probed per network.
const (
	// PathRPC is the chain's JSON-RPC: it answers eth_chainId with the
	// expected id.
	PathRPC = "rpc"
	// PathSettle is the settle path: the network reports it can settle
	// (RPC up, signers funded) and the token answers a read-only call.
	PathSettle = "settle"
)

// TargetName is the counter key of a network's path: "<network>/<path>".
func TargetName(network, path string) string { return network + "/" + path }

// RPCCheck reads the chain id over the network's RPC and fails if it differs
// from want: a node that answers for another chain is not this network.
func RPCCheck(rpc ethereum.ChainIDReader, want *big.Int) func(context.Context) error {
	return func(ctx context.Context) error {
		got, err := rpc.ChainID(ctx)
		if err != nil {
			return fmt.Errorf("eth_chainId: %w", err)
		}
		if want != nil && got.Cmp(want) != 0 {
			return fmt.Errorf("eth_chainId answered %s, want %s", got, want)
		}
		return nil
	}
}

// Settler is what the settle check needs of a network: *evm.Network
// implements it.
type Settler interface {
	// Available reports whether the network can settle now, and why not.
	Available() (bool, string)
	// Asset is the token contract address.
	Asset() string
}

// authorizationStateSelector is the EIP-3009 read every settlement depends
// on (the engine asks it to tell a used authorization).
var authorizationStateSelector = crypto.Keccak256([]byte("authorizationState(address,bytes32)"))[:4]

// SettleCheck probes the settle path without moving anything: the network
// must report itself available, and an eth_call of
// authorizationState(0x0, 0x0) on its token must return one 32-byte word.
// That call is the cheapest one that proves the RPC executes calls against
// the token contract as settlement needs (a node can answer eth_chainId and
// still fail eth_call, for instance when pruned or rate-limited).
func SettleCheck(n Settler, caller ethereum.ContractCaller) func(context.Context) error {
	return func(ctx context.Context) error {
		if ok, reason := n.Available(); !ok {
			if reason == "" {
				reason = "the network cannot settle now"
			}
			return errors.New(reason)
		}
		if !common.IsHexAddress(n.Asset()) {
			return fmt.Errorf("asset %q is not an address", n.Asset())
		}
		asset := common.HexToAddress(n.Asset())
		data := make([]byte, 4+64)
		copy(data, authorizationStateSelector)
		out, err := caller.CallContract(ctx, ethereum.CallMsg{To: &asset, Data: data}, nil)
		if err != nil {
			return fmt.Errorf("eth_call authorizationState on %s: %w", asset.Hex(), err)
		}
		if len(out) != 32 {
			return fmt.Errorf("eth_call authorizationState on %s returned %d bytes, want 32 (is it an EIP-3009 token?)", asset.Hex(), len(out))
		}
		return nil
	}
}
