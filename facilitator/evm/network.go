// Package evm owns the facilitator's EVM chain layer: named networks (Base,
// Base Sepolia, any eip155 chain), EIP-712 hashing and signing of EIP-3009
// authorizations, verification of x402 "exact" payments with the official
// facilitator's reason codes and order of checks, the settlement primitives
// (prepare, broadcast, receipt, nonce management across several signers),
// and an in-process dev chain with a deployed test USDC.
//
// *Network implements settle.Chain; the exactly-once engine in
// facilitator/settle drives it. Private keys never reach a log line or an
// error.
package evm

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

var _ settle.Chain = (*Network)(nil)

// Backend is the part of an Ethereum JSON-RPC client the facilitator uses.
// *ethclient.Client and the simulated backend's client both satisfy it.
type Backend interface {
	ethereum.ChainIDReader
	ethereum.ContractCaller
	ethereum.GasEstimator
	ethereum.TransactionSender
	CodeAt(ctx context.Context, account common.Address, blockNumber *big.Int) ([]byte, error)
	BalanceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (*big.Int, error)
	NonceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (uint64, error)
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
	TransactionByHash(ctx context.Context, hash common.Hash) (tx *types.Transaction, isPending bool, err error)
}

// KnownNetwork is a network ardx knows by name.
type KnownNetwork struct {
	// ID is the CAIP-2 id.
	ID string
	// V1Name is the x402 v1 short name.
	V1Name  string
	ChainID int64
	// Asset is the USDC contract.
	Asset string
	// Name and Version are USDC's EIP-712 domain there (checked against the
	// contract at Open).
	Name    string
	Version string
	Testnet bool
}

// KnownNetworks are the networks Open resolves by name.
var KnownNetworks = []KnownNetwork{
	{ID: "eip155:8453", V1Name: "base", ChainID: 8453, Asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", Name: "USD Coin", Version: "2"},
	{ID: "eip155:84532", V1Name: "base-sepolia", ChainID: 84532, Asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", Name: "USDC", Version: "2", Testnet: true},
}

// DevChainID and DevV1Name identify the in-process dev chain.
const (
	DevChainID = 1337
	DevV1Name  = "dev"
)

// ChainIDOf returns the chain id of a CAIP-2 eip155 network or a v1 name
// ardx knows ("base", "base-sepolia", "dev").
func ChainIDOf(network string) (*big.Int, bool) {
	if rest, ok := strings.CutPrefix(network, "eip155:"); ok {
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || n <= 0 {
			return nil, false
		}
		return big.NewInt(n), true
	}
	for _, k := range KnownNetworks {
		if k.V1Name == network {
			return big.NewInt(k.ChainID), true
		}
	}
	if network == DevV1Name {
		return big.NewInt(DevChainID), true
	}
	return nil, false
}

// NetworkConfig configures Open.
type NetworkConfig struct {
	// Name is "base", "base-sepolia", or "eip155:<chainId>" (also accepted
	// for the two known networks).
	Name string
	// V1Name overrides the x402 v1 short name ("" keeps the known one; an
	// unknown chain has none unless given).
	V1Name string
	// RPC is the JSON-RPC URL; ignored when Backend is set.
	RPC string
	// Backend is an already connected client (tests, the dev chain).
	Backend Backend
	// Asset is the token contract; required unless Name is a known network.
	Asset string
	// SignerKeys pay gas; at least one. Transactions rotate over them.
	SignerKeys []*ecdsa.PrivateKey
	// MinSignerBalance is the ETH (wei) below which a signer makes the
	// network unavailable; nil means 0.0001 ETH.
	MinSignerBalance *big.Int
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock for authorization windows; nil means time.Now.
	Now func() time.Time
	// CallTimeout bounds each RPC call; zero means 10 s.
	CallTimeout time.Duration
	// HealthInterval is how often availability is re-checked in the
	// background; zero means 5 s.
	HealthInterval time.Duration
}

// Network is one EVM network with its asset and signers. It is safe for
// concurrent use. Close stops its background health checks.
type Network struct {
	id, v1  string
	chainID *big.Int
	asset   common.Address
	testnet bool
	// The token's facts and the genesis hash, read from the chain once it
	// answers; written before joined is set and never after.
	name       string
	version    string
	decimals   uint8
	genesis    string
	joined     atomic.Bool
	backend    Backend
	closeRPC   func()
	rpcURL     string // only to redact it from errors
	signers    []*signer
	next       atomic.Uint64
	minBalance *big.Int
	log        *slog.Logger
	now        func() time.Time
	timeout    time.Duration

	known    *KnownNetwork
	health   atomic.Pointer[health]
	feeQuote atomic.Pointer[feeQuote]
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

type signer struct {
	key  *ecdsa.PrivateKey
	addr common.Address

	mu         sync.Mutex // serialises nonce allocation
	nonce      uint64
	nonceKnown bool
}

type health struct {
	ok     bool
	reason string
}

// Open connects to a network, checks its chain id, reads the asset's
// EIP-712 name, version and decimals from the contract (cached for the
// life of the Network), checks the signers' gas once and starts the
// background availability check. A network whose RPC does not answer is
// opened withdrawn (Available false, absent from /supported) and joins
// when its RPC answers; a node serving another chain, or no contract at
// the asset, is an error.
func Open(ctx context.Context, cfg NetworkConfig) (*Network, error) {
	n := &Network{
		log:        cfg.Logger,
		now:        cfg.Now,
		timeout:    cfg.CallTimeout,
		minBalance: cfg.MinSignerBalance,
		v1:         cfg.V1Name,
		rpcURL:     cfg.RPC,
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.now == nil {
		n.now = time.Now
	}
	if n.timeout <= 0 {
		n.timeout = 10 * time.Second
	}
	if n.minBalance == nil {
		n.minBalance = big.NewInt(100_000_000_000_000) // 0.0001 ETH
	}
	interval := cfg.HealthInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}

	known, chainID, err := resolve(cfg.Name)
	if err != nil {
		return nil, err
	}
	n.chainID = chainID
	n.id = "eip155:" + chainID.String()
	asset := cfg.Asset
	if known != nil {
		if n.v1 == "" {
			n.v1 = known.V1Name
		}
		if asset == "" {
			asset = known.Asset
		}
		n.testnet = known.Testnet
	}
	if !common.IsHexAddress(asset) {
		return nil, fmt.Errorf("evm: network %s: asset %q is not an address", n.id, asset)
	}
	n.asset = common.HexToAddress(asset)
	if len(cfg.SignerKeys) == 0 {
		return nil, fmt.Errorf("evm: network %s: at least one signer key is required", n.id)
	}
	for _, k := range cfg.SignerKeys {
		if k == nil {
			return nil, fmt.Errorf("evm: network %s: nil signer key", n.id)
		}
		n.signers = append(n.signers, &signer{key: k, addr: crypto.PubkeyToAddress(k.PublicKey)})
	}

	n.backend = cfg.Backend
	if n.backend == nil {
		if cfg.RPC == "" {
			return nil, fmt.Errorf("evm: network %s: an RPC URL is required", n.id)
		}
		dctx, cancel := context.WithTimeout(ctx, n.timeout)
		rc, err := rpc.DialOptions(dctx, cfg.RPC, rpc.WithHTTPClient(rpcHTTPClient()))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("evm: network %s: dial RPC: %w", n.id, redact(err, cfg.RPC))
		}
		c := ethclient.NewClient(rc)
		n.backend, n.closeRPC = c, c.Close
	}
	n.backend = meteredBackend{b: n.backend, network: n.id}
	n.known = known
	if err := n.join(ctx); err != nil {
		if !errors.Is(err, errUnreachable) {
			n.closeBackend()
			return nil, err
		}
		n.health.Store(&health{reason: unreachableReason})
		n.log.Warn("network RPC not answering; the network starts withdrawn and joins when it answers",
			"network", n.id, "err", err)
	} else {
		n.checkHealth(ctx)
	}
	go n.healthLoop(interval)
	return n, nil
}

// unreachableReason is Available's reason while the RPC has never answered.
const unreachableReason = "the RPC is not answering; the network joins when it answers"

// errUnreachable marks a failure to reach the RPC (as opposed to an RPC
// that answers for the wrong chain or token).
var errUnreachable = errors.New("RPC unreachable")

// join reads the chain's facts (chain id, genesis, token) and makes the
// network usable. It fails with errUnreachable while the RPC does not
// answer.
func (n *Network) join(ctx context.Context) error {
	if n.joined.Load() {
		return nil
	}
	if err := n.readChain(ctx, n.rpcURL); err != nil {
		return err
	}
	if k := n.known; k != nil && (k.Name != n.name || k.Version != n.version) {
		n.log.Warn("token EIP-712 domain differs from the known one; using the contract's",
			"network", n.id, "name", n.name, "version", n.version, "known_name", k.Name, "known_version", k.Version)
	}
	n.joined.Store(true)
	n.log.Info("network open", "network", n.id, "v1", n.v1, "asset", n.asset.Hex(),
		"token_name", n.name, "token_version", n.version, "decimals", n.decimals, "genesis", n.genesis, "signers", n.SignerAddresses())
	return nil
}

func resolve(name string) (*KnownNetwork, *big.Int, error) {
	for i := range KnownNetworks {
		k := &KnownNetworks[i]
		if name == k.V1Name || name == k.ID {
			return k, big.NewInt(k.ChainID), nil
		}
	}
	if id, ok := ChainIDOf(name); ok && strings.HasPrefix(name, "eip155:") {
		return nil, id, nil
	}
	return nil, nil, fmt.Errorf("evm: unknown network %q; use base, base-sepolia or eip155:<chainId>", name)
}

// readChain checks the chain id and reads the token's immutable facts once.
func (n *Network) readChain(ctx context.Context, rpcURL string) error {
	cctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	got, err := n.backend.ChainID(cctx)
	if err != nil {
		return fmt.Errorf("evm: network %s: read chain id: %w: %w", n.id, errUnreachable, redact(err, rpcURL))
	}
	if got.Cmp(n.chainID) != 0 {
		return fmt.Errorf("evm: network %s: the RPC serves chain %s", n.id, got)
	}
	genesis, err := n.backend.HeaderByNumber(cctx, big.NewInt(0))
	if err != nil {
		return fmt.Errorf("evm: network %s: read genesis block: %w: %w", n.id, errUnreachable, redact(err, rpcURL))
	}
	n.genesis = genesis.Hash().Hex()
	code, err := n.backend.CodeAt(cctx, n.asset, nil)
	if err != nil {
		return fmt.Errorf("evm: network %s: read asset code: %w: %w", n.id, errUnreachable, redact(err, rpcURL))
	}
	if len(code) == 0 {
		return fmt.Errorf("evm: network %s: no contract at asset %s", n.id, n.asset.Hex())
	}
	if n.name, err = n.callString(cctx, methodName); err != nil {
		return fmt.Errorf("evm: network %s: token name(): %w: %w", n.id, errUnreachable, redact(err, rpcURL))
	}
	if n.version, err = n.callString(cctx, methodVersion); err != nil {
		return fmt.Errorf("evm: network %s: token version(): %w", n.id, redact(err, rpcURL))
	}
	out, err := n.call(cctx, common.Address{}, methodDecimals)
	if err != nil {
		return fmt.Errorf("evm: network %s: token decimals(): %w", n.id, redact(err, rpcURL))
	}
	d, ok := out[0].(uint8)
	if !ok {
		return fmt.Errorf("evm: network %s: token decimals() returned %T", n.id, out[0])
	}
	n.decimals = d
	return nil
}

// Close stops the background health check and closes an RPC connection
// Open dialled.
func (n *Network) Close() error {
	n.once.Do(func() {
		close(n.stop)
		<-n.done
		n.closeBackend()
	})
	return nil
}

func (n *Network) closeBackend() {
	if n.closeRPC != nil {
		n.closeRPC()
	}
}

// ID returns the CAIP-2 id, e.g. "eip155:84532".
func (n *Network) ID() string { return n.id }

// V1Name returns the x402 v1 short name, "" if the network has none.
func (n *Network) V1Name() string { return n.v1 }

// ChainID returns the chain id.
func (n *Network) ChainID() *big.Int { return new(big.Int).Set(n.chainID) }

// Asset returns the token contract address, checksummed.
func (n *Network) Asset() string { return n.asset.Hex() }

// TokenName returns the token's EIP-712 domain name, read from the chain
// ("" until the network has joined).
func (n *Network) TokenName() string {
	if !n.joined.Load() {
		return ""
	}
	return n.name
}

// TokenVersion returns the token's EIP-712 domain version ("" until the
// network has joined).
func (n *Network) TokenVersion() string {
	if !n.joined.Load() {
		return ""
	}
	return n.version
}

// Decimals returns the token's decimals (0 until the network has joined).
func (n *Network) Decimals() uint8 {
	if !n.joined.Load() {
		return 0
	}
	return n.decimals
}

// Genesis returns the chain's genesis block hash ("" until the network has
// joined).
func (n *Network) Genesis() string {
	if !n.joined.Load() {
		return ""
	}
	return n.genesis
}

// Testnet reports whether the network is a known testnet.
func (n *Network) Testnet() bool { return n.testnet }

// Domain returns the token's EIP-712 domain on this network.
func (n *Network) Domain() Domain {
	return Domain{Name: n.TokenName(), Version: n.TokenVersion(), ChainID: n.ChainID(), VerifyingContract: n.asset}
}

// SignerAddresses returns the gas-paying signers' addresses, checksummed.
func (n *Network) SignerAddresses() []string {
	out := make([]string, len(n.signers))
	for i, s := range n.signers {
		out[i] = s.addr.Hex()
	}
	return out
}

// RequirementsV2 returns the v2 payment requirements a merchant advertises
// to be paid amount (smallest unit) at payTo on this network.
func (n *Network) RequirementsV2(payTo string, amount *big.Int, maxTimeoutSeconds int) x402.PaymentRequirementsV2 {
	return x402.PaymentRequirementsV2{
		Scheme: x402.SchemeExact, Network: n.id, Amount: x402.Decimal(amount.String()),
		Asset: n.asset.Hex(), PayTo: payTo, MaxTimeoutSeconds: x402.Int(maxTimeoutSeconds),
		Extra: &x402.Extra{Name: n.TokenName(), Version: n.TokenVersion()},
	}
}

// RequirementsV1 is RequirementsV2 for v1 (the v1 name as network, the
// resource in the requirements). It needs a network with a v1 name.
func (n *Network) RequirementsV1(payTo string, amount *big.Int, maxTimeoutSeconds int, resource, description string) x402.PaymentRequirementsV1 {
	return x402.PaymentRequirementsV1{
		Scheme: x402.SchemeExact, Network: n.v1, MaxAmountRequired: x402.Decimal(amount.String()),
		Resource: resource, Description: description, PayTo: payTo,
		MaxTimeoutSeconds: x402.Int(maxTimeoutSeconds), Asset: n.asset.Hex(),
		Extra: &x402.Extra{Name: n.TokenName(), Version: n.TokenVersion()},
	}
}

// Available reports whether the network can settle now: the RPC answered
// and every signer holds at least the minimum gas balance at the last
// background check. It never calls the chain.
func (n *Network) Available() (bool, string) {
	h := n.health.Load()
	if h == nil {
		return false, "not checked yet"
	}
	return h.ok, h.reason
}

func (n *Network) healthLoop(interval time.Duration) {
	defer close(n.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
			if err := n.join(ctx); err != nil {
				// Still withdrawn: unreachable, or now answering for
				// another chain or token (an operator's mistake to see).
				reason := unreachableReason
				if !errors.Is(err, errUnreachable) {
					reason = "the RPC does not serve this network: " + err.Error()
				}
				n.health.Store(&health{reason: reason})
				n.log.Debug("network not joined yet", "network", n.id, "err", err)
			} else {
				n.checkHealth(ctx)
			}
			cancel()
		}
	}
}

// checkHealth refreshes Available's answer and logs its transitions.
func (n *Network) checkHealth(ctx context.Context) {
	h := &health{ok: true}
	if _, err := n.backend.ChainID(ctx); err != nil {
		h = &health{reason: "the RPC is not answering"}
		n.log.Warn("network RPC failing", "network", n.id, "err", redact(err, n.rpcURL))
	} else {
		for _, s := range n.signers {
			bal, err := n.backend.BalanceAt(ctx, s.addr, nil)
			if err != nil {
				h = &health{reason: "the RPC is not answering"}
				n.log.Warn("network RPC failing", "network", n.id, "err", redact(err, n.rpcURL))
				break
			}
			if bal.Cmp(n.minBalance) < 0 {
				h = &health{reason: fmt.Sprintf("signer %s holds %s wei of gas, below the %s wei minimum", s.addr.Hex(), bal, n.minBalance)}
				break
			}
		}
	}
	if old := n.health.Swap(h); old == nil || old.ok != h.ok {
		if h.ok {
			n.log.Info("network available", "network", n.id)
		} else {
			n.log.Warn("network unavailable", "network", n.id, "reason", h.reason)
		}
	}
}

// call packs and eth_calls a method on the asset and unpacks its outputs.
func (n *Network) call(ctx context.Context, from common.Address, m abi.Method, args ...any) ([]any, error) {
	return n.callAt(ctx, n.asset, from, m, args...)
}

func (n *Network) callAt(ctx context.Context, to, from common.Address, m abi.Method, args ...any) ([]any, error) {
	in, err := m.Inputs.Pack(args...)
	if err != nil {
		return nil, err
	}
	data := append(append([]byte{}, m.ID...), in...)
	out, err := n.backend.CallContract(ctx, ethereum.CallMsg{From: from, To: &to, Data: data}, nil)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errNoReturn
	}
	return m.Outputs.Unpack(out)
}

var errNoReturn = errors.New("the call returned nothing (no contract, or no such method)")

func (n *Network) callString(ctx context.Context, m abi.Method) (string, error) {
	out, err := n.call(ctx, common.Address{}, m)
	if err != nil {
		return "", err
	}
	s, ok := out[0].(string)
	if !ok {
		return "", fmt.Errorf("%s() returned %T", m.Name, out[0])
	}
	return s, nil
}

// redact removes the RPC URL (which often embeds an API key) from an error.
func redact(err error, rpcURL string) error {
	if err == nil || rpcURL == "" || !strings.Contains(err.Error(), rpcURL) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), rpcURL, "<rpc>"))
}

// rpcHTTPClient is the HTTP client of one network's JSON-RPC connection:
// the default transport, keeping up to 64 idle connections to the node
// instead of 2. Settlements call the node concurrently (simulations, sends,
// the receipt watcher); with 2 kept, every call beyond them opened a new
// TCP connection and left one in TIME_WAIT (about a hundred a second at 70
// settlements a second on geth --dev).
func rpcHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 64, 64
	return &http.Client{Transport: t}
}
