package evm

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/rawdb"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/params"
)

// DevChain is an in-process chain (go-ethereum's simulated backend, chain id
// 1337) that mines a block on every transaction, with the test USDC
// deployed (EIP-712 name "USDC", version "2", 6 decimals), a gas-funded
// signer, a payer holding 1,000 test USDC and a merchant. Its keys are
// fixed test keys derived from public strings: they guard nothing.
type DevChain struct {
	// Network is the dev chain as a settlement network (eip155:1337, v1 "dev").
	Network *Network
	// Client talks to the chain; an accepted transaction is mined at once
	// (within a second during bursts, see autoMiner).
	Client Backend
	// Asset is the test USDC.
	Asset   common.Address
	ChainID *big.Int

	SignerKey, PayerKey, MerchantKey, DeployerKey *ecdsa.PrivateKey
	Signer, Payer, Merchant, Deployer             common.Address

	sim    *simulated.Backend
	client *autoMiner
}

// DevPayerFunds is what NewDevChain mints to the payer: 1,000 USDC.
var DevPayerFunds = big.NewInt(1_000_000_000)

// DevKey derives the dev chain's fixed test key for a role ("signer",
// "payer", "merchant", "deployer", or any other name a test wants).
func DevKey(role string) *ecdsa.PrivateKey {
	k, err := crypto.ToECDSA(crypto.Keccak256([]byte("ardx dev chain test key: " + role)))
	if err != nil {
		panic(err) // a keccak output is a valid key with overwhelming probability
	}
	return k
}

// NewDevChain starts a dev chain in memory and deploys and funds everything.
func NewDevChain(ctx context.Context, logger *slog.Logger) (*DevChain, error) {
	return OpenDevChain(ctx, logger, "")
}

// devHeadFile names, in the dev chain's directory, the file holding the
// hash of the last block sealed.
const devHeadFile = "HEAD"

// OpenDevChain starts the dev chain with its state in dir ("" keeps it in
// memory): blocks, balances, nonces and the token survive a restart, also
// after a kill, so a transaction recorded before a crash is found on the
// chain that runs after it. The first start deploys the token and funds
// the payer; later starts find them.
//
// The chain database is LevelDB, which hands every write to the OS as it
// is made, in archive mode with the hash state scheme, so every block's
// state is on disk once sealed (Pebble buffers its log, and the path scheme
// keeps recent state in memory: both lose the last blocks to a kill). The
// simulated backend rewinds its head to genesis when it opens, so the head
// sealed last is recorded in dir/HEAD and restored.
func OpenDevChain(ctx context.Context, logger *slog.Logger, dir string) (_ *DevChain, err error) {
	d := &DevChain{
		SignerKey: DevKey("signer"), PayerKey: DevKey("payer"),
		MerchantKey: DevKey("merchant"), DeployerKey: DevKey("deployer"),
		ChainID: big.NewInt(DevChainID),
	}
	d.Signer = crypto.PubkeyToAddress(d.SignerKey.PublicKey)
	d.Payer = crypto.PubkeyToAddress(d.PayerKey.PublicKey)
	d.Merchant = crypto.PubkeyToAddress(d.MerchantKey.PublicKey)
	d.Deployer = crypto.PubkeyToAddress(d.DeployerKey.PublicKey)
	eth := new(big.Int).Mul(big.NewInt(params.Ether), big.NewInt(1000))
	opts := []func(*node.Config, *ethconfig.Config){simulated.WithBlockGasLimit(60_000_000)}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("devchain: %w", err)
		}
		opts = append(opts, func(nc *node.Config, ec *ethconfig.Config) {
			// A fixed instance name: by default it is the binary's, and a
			// test binary opening the same dir would find another chain.
			nc.DataDir, nc.Name, nc.DBEngine = dir, "chain", "leveldb"
			ec.StateScheme, ec.NoPruning, ec.SnapshotCache = rawdb.HashScheme, true, 0
			// A small chain: small caches keep opening and memory cheap.
			ec.DatabaseCache, ec.TrieCleanCache, ec.TrieDirtyCache = 16, 16, 16
		})
	}
	if d.sim, err = newSimulated(types.GenesisAlloc{
		d.Signer:   {Balance: eth},
		d.Deployer: {Balance: eth},
		d.Payer:    {Balance: big.NewInt(params.Ether)},
		d.Merchant: {Balance: big.NewInt(params.Ether)},
	}, opts...); err != nil {
		return nil, err
	}
	if dir != "" {
		if err := restoreHead(d.sim, filepath.Join(dir, devHeadFile), logger); err != nil {
			d.sim.Close()
			return nil, err
		}
	}
	d.client = newAutoMiner(ctx, d.sim, dir)
	d.Client = d.client

	// The deployer's first transaction deploys the token, its second mints
	// the payer's funds; a restarted chain has done what its nonce says.
	done, err := d.Client.NonceAt(ctx, d.Deployer, nil)
	if err != nil {
		d.close()
		return nil, err
	}
	d.Asset = crypto.CreateAddress(d.Deployer, 0)
	if done == 0 {
		if d.Asset, err = d.DeployToken(ctx, "USDC", "2"); err != nil {
			d.close()
			return nil, err
		}
	}
	if done <= 1 {
		if err := d.Mint(ctx, d.Payer, DevPayerFunds); err != nil {
			d.close()
			return nil, err
		}
	}
	d.Network, err = Open(ctx, NetworkConfig{
		Name: "eip155:1337", V1Name: DevV1Name, Backend: d.Client, Asset: d.Asset.Hex(),
		SignerKeys: []*ecdsa.PrivateKey{d.SignerKey}, Logger: logger,
	})
	if err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// newSimulated starts the simulated backend, which panics where it could
// return an error (a data dir another process holds, a corrupt database).
func newSimulated(alloc types.GenesisAlloc, opts ...func(*node.Config, *ethconfig.Config)) (sim *simulated.Backend, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("devchain: start: %v", r)
		}
	}()
	return simulated.NewBackend(alloc, opts...), nil
}

// restoreHead makes the block recorded in file the head again (the
// simulated backend rewinds to genesis when it opens).
func restoreHead(sim *simulated.Backend, file string, logger *slog.Logger) error {
	// The rewind put the transactions of the blocks it dropped back in the
	// pool; they are in those blocks, which become the chain again.
	sim.Rollback()
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("devchain: %w", err)
	}
	head := common.HexToHash(strings.TrimSpace(string(b)))
	if err := sim.Fork(head); err != nil {
		// The block never reached the disk: the chain restarts from the
		// last one that did, and reconciliation sends what it lost again.
		if logger != nil {
			logger.Warn("dev chain: recorded head block not found; continuing from the last stored block", "head", head.Hex(), "err", err)
		}
		return nil
	}
	return nil
}

// Close stops the network and the chain.
func (d *DevChain) Close() error {
	if d.Network != nil {
		d.Network.Close()
	}
	return d.close()
}

func (d *DevChain) close() error {
	d.client.close()
	return d.sim.Close()
}

// OpenNetwork opens another Network on this chain (another asset, other
// signers); Name, Backend and V1Name are filled in when empty.
func (d *DevChain) OpenNetwork(ctx context.Context, cfg NetworkConfig) (*Network, error) {
	if cfg.Name == "" {
		cfg.Name = "eip155:1337"
	}
	if cfg.V1Name == "" {
		cfg.V1Name = DevV1Name
	}
	cfg.Backend = d.Client
	return Open(ctx, cfg)
}

// Transact sends a transaction from key (to == nil deploys data), mines it
// and returns the receipt; a reverted transaction is an error.
func (d *DevChain) Transact(ctx context.Context, key *ecdsa.PrivateKey, to *common.Address, value *big.Int, data []byte) (*types.Receipt, error) {
	from := crypto.PubkeyToAddress(key.PublicKey)
	nonce, err := d.Client.PendingNonceAt(ctx, from)
	if err != nil {
		return nil, err
	}
	gas, err := d.Client.EstimateGas(ctx, ethereum.CallMsg{From: from, To: to, Value: value, Data: data})
	if err != nil {
		return nil, fmt.Errorf("devchain: estimate gas: %w", err)
	}
	head, err := d.Client.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	tip := big.NewInt(params.GWei)
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(d.ChainID), &types.DynamicFeeTx{
		ChainID: d.ChainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2))),
		Gas: gas * 2, To: to, Value: value, Data: data,
	})
	if err != nil {
		return nil, err
	}
	if err := d.Client.SendTransaction(ctx, tx); err != nil {
		return nil, err
	}
	r, err := d.WaitMined(ctx, tx.Hash())
	if err != nil {
		return nil, err
	}
	if r.Status != types.ReceiptStatusSuccessful {
		return r, errors.New("devchain: transaction reverted")
	}
	return r, nil
}

// WaitMined polls for a transaction's receipt (at once in the normal case;
// up to a second when a burst has pushed the chain's clock ahead).
func (d *DevChain) WaitMined(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		r, err := d.Client.TransactionReceipt(ctx, hash)
		if err == nil {
			return r, nil
		}
		if !receiptNotYet(err) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("devchain: %s not mined: %w", hash.Hex(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// DeployToken deploys another test USDC with the given EIP-712 name and version.
func (d *DevChain) DeployToken(ctx context.Context, name, version string) (common.Address, error) {
	args, err := tokenABI.Pack("", name, version)
	if err != nil {
		return common.Address{}, err
	}
	r, err := d.Transact(ctx, d.DeployerKey, nil, nil, append(common.FromHex(testUSDCBin), args...))
	if err != nil {
		return common.Address{}, fmt.Errorf("devchain: deploy token: %w", err)
	}
	return r.ContractAddress, nil
}

// DeployWallet1271 deploys an ERC-1271 test wallet that accepts owner's signatures.
func (d *DevChain) DeployWallet1271(ctx context.Context, owner common.Address) (common.Address, error) {
	args, err := walletABI.Pack("", owner)
	if err != nil {
		return common.Address{}, err
	}
	r, err := d.Transact(ctx, d.DeployerKey, nil, nil, append(common.FromHex(testWalletBin), args...))
	if err != nil {
		return common.Address{}, fmt.Errorf("devchain: deploy wallet: %w", err)
	}
	return r.ContractAddress, nil
}

// Mint mints amount of the test USDC to to.
func (d *DevChain) Mint(ctx context.Context, to common.Address, amount *big.Int) error {
	return d.MintOn(ctx, d.Asset, to, amount)
}

// MintOn mints amount of a test token deployed by this dev chain.
func (d *DevChain) MintOn(ctx context.Context, token, to common.Address, amount *big.Int) error {
	data, err := tokenABI.Pack(methodMint.Name, to, amount)
	if err != nil {
		return err
	}
	_, err = d.Transact(ctx, d.DeployerKey, &token, nil, data)
	return err
}

// TransferToken moves amount of the test USDC from key's address to to
// (a payer emptying its wallet, in tests).
func (d *DevChain) TransferToken(ctx context.Context, key *ecdsa.PrivateKey, to common.Address, amount *big.Int) error {
	data, err := tokenABI.Pack(methodTransfer.Name, to, amount)
	if err != nil {
		return err
	}
	_, err = d.Transact(ctx, key, &d.Asset, nil, data)
	return err
}

// CancelAuthorization cancels an authorization nonce of key's address on-chain.
func (d *DevChain) CancelAuthorization(ctx context.Context, key *ecdsa.PrivateKey, nonce [32]byte) error {
	from := crypto.PubkeyToAddress(key.PublicKey)
	sig, err := SignCancel(key, d.Network.Domain(), from, nonce)
	if err != nil {
		return err
	}
	data, err := tokenABI.Pack(methodCancelVRS.Name, from, nonce, sig[64], [32]byte(sig[:32]), [32]byte(sig[32:64]))
	if err != nil {
		return err
	}
	_, err = d.Transact(ctx, d.DeployerKey, &d.Asset, nil, data)
	return err
}

// FundETH sends wei of gas money from the deployer to to.
func (d *DevChain) FundETH(ctx context.Context, to common.Address, wei *big.Int) error {
	_, err := d.Transact(ctx, d.DeployerKey, &to, wei, nil)
	return err
}

// BalanceOf returns who's test USDC balance.
func (d *DevChain) BalanceOf(ctx context.Context, who common.Address) (*big.Int, error) {
	return d.BalanceOn(ctx, d.Asset, who)
}

// BalanceOn returns who's balance of token.
func (d *DevChain) BalanceOn(ctx context.Context, token, who common.Address) (*big.Int, error) {
	data, err := tokenABI.Pack(methodBalanceOf.Name, who)
	if err != nil {
		return nil, err
	}
	out, err := d.Client.CallContract(ctx, ethereum.CallMsg{To: &token, Data: data}, nil)
	if err != nil {
		return nil, err
	}
	vals, err := methodBalanceOf.Outputs.Unpack(out)
	if err != nil {
		return nil, err
	}
	return vals[0].(*big.Int), nil
}

// ETHBalance returns who's ETH balance in wei.
func (d *DevChain) ETHBalance(ctx context.Context, who common.Address) (*big.Int, error) {
	return d.Client.BalanceAt(ctx, who, nil)
}

// TransferEvent is one ERC-20 Transfer log.
type TransferEvent struct {
	From, To common.Address
	Value    *big.Int
	TxHash   common.Hash
}

// Transfers returns the test USDC's Transfer events from block fromBlock on.
func (d *DevChain) Transfers(ctx context.Context, fromBlock uint64) ([]TransferEvent, error) {
	logs, err := d.sim.Client().FilterLogs(ctx, ethereum.FilterQuery{
		FromBlock: new(big.Int).SetUint64(fromBlock),
		Addresses: []common.Address{d.Asset},
		Topics:    [][]common.Hash{{eventTransfer.ID}},
	})
	if err != nil {
		return nil, err
	}
	out := make([]TransferEvent, 0, len(logs))
	for _, l := range logs {
		if len(l.Topics) != 3 {
			continue
		}
		out = append(out, TransferEvent{
			From: common.BytesToAddress(l.Topics[1][:]), To: common.BytesToAddress(l.Topics[2][:]),
			Value: new(big.Int).SetBytes(l.Data), TxHash: l.TxHash,
		})
	}
	return out, nil
}

// BlockNumber returns the head block number.
func (d *DevChain) BlockNumber(ctx context.Context) (uint64, error) {
	return d.sim.Client().BlockNumber(ctx)
}

// autoMiner mines a block after every accepted transaction, so the dev
// chain behaves like `geth --dev` with period 0 and a receipt is available
// as soon as SendTransaction returns. Every block is at least one second
// after its parent, so a burst of transactions pushes the chain's clock
// ahead of the wall clock, and authorizations valid for a minute would
// expire on-chain while still fresh. Once the head is maxDrift ahead,
// transactions wait in the pool and a background loop mines them together,
// one block per second, until the chain is back in step.
type autoMiner struct {
	simulated.Client
	sim *simulated.Backend

	mu      sync.Mutex // one commit at a time
	head    int64      // timestamp of the last block we sealed
	pending bool       // transactions wait in the pool

	last     atomic.Int64 // wall time of the last commit, for freshen
	headFile string       // where the last sealed block's hash goes; "" in memory
	stop     chan struct{}
	done     chan struct{}
}

const (
	// maxDrift is how far ahead of the wall clock the chain may run.
	maxDrift = 5
	// staleAfter is how old the head may get before a call first seals an
	// empty block: eth_call runs at the head's timestamp, and an idle chain
	// would judge fresh authorizations (validAfter = now - 600) as not yet
	// valid.
	staleAfter = 30
)

func newAutoMiner(ctx context.Context, sim *simulated.Backend, dir string) *autoMiner {
	m := &autoMiner{Client: sim.Client(), sim: sim, stop: make(chan struct{}), done: make(chan struct{})}
	if dir != "" {
		m.headFile = filepath.Join(dir, devHeadFile)
	}
	m.head = time.Now().Unix()
	if h, err := sim.Client().HeaderByNumber(ctx, nil); err == nil && int64(h.Time) > m.head {
		m.head = int64(h.Time) // a restarted chain may run ahead of the clock
	}
	m.last.Store(time.Now().Unix())
	go m.loop()
	return m
}

// commit seals a block; m.mu must be held.
func (m *autoMiner) commit() {
	hash := m.sim.Commit()
	if m.headFile != "" {
		// Written aside and renamed, so a kill never leaves it empty. No
		// fsync: the block itself is only as durable as the OS's buffers.
		tmp := m.headFile + ".tmp"
		if os.WriteFile(tmp, []byte(hash.Hex()), 0o600) == nil {
			_ = os.Rename(tmp, m.headFile)
		}
	}
	now := time.Now().Unix()
	m.head = max(m.head+1, now)
	m.pending = false
	m.last.Store(now)
}

func (m *autoMiner) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.Client.SendTransaction(ctx, tx); err != nil {
		return err
	}
	if m.head-time.Now().Unix() < maxDrift {
		m.commit()
	} else {
		m.pending = true
	}
	return nil
}

func (m *autoMiner) loop() {
	defer close(m.done)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.mu.Lock()
			if m.pending && m.head-time.Now().Unix() < maxDrift {
				m.commit()
			}
			m.mu.Unlock()
		}
	}
}

func (m *autoMiner) close() {
	close(m.stop)
	<-m.done
}

func (m *autoMiner) freshen() {
	if time.Now().Unix()-m.last.Load() < staleAfter {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Now().Unix()-m.last.Load() >= staleAfter {
		m.commit()
	}
}

func (m *autoMiner) CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error) {
	m.freshen()
	return m.Client.CallContract(ctx, msg, block)
}

func (m *autoMiner) EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error) {
	m.freshen()
	return m.Client.EstimateGas(ctx, msg)
}
