//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/ardx-dev/ardx/facilitator/x402"
)

// toolDir holds the binaries TestMain builds once per test binary: ardx
// (unless $ARDX_BIN names one) and, on first use, geth.
var toolDir string

// TestMain builds the ardx binary once and exports it as $ARDX_BIN, so every
// startArdx and restart in the tier runs the same build instead of
// rebuilding per call, and logs how long the whole tier took.
func TestMain(m *testing.M) {
	os.Exit(runTier(m))
}

func runTier(m *testing.M) int {
	start := time.Now()
	dir, err := os.MkdirTemp("", "ardx-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	toolDir = dir
	if os.Getenv("ARDX_BIN") == "" {
		bin := filepath.Join(dir, "ardx")
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Dir = moduleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build ardx: %v\n%s", err, out)
			return 1
		}
		os.Setenv("ARDX_BIN", bin)
	}
	code := m.Run()
	fmt.Printf("e2e tier: %v (including builds)\n", time.Since(start).Round(time.Millisecond))
	return code
}

// moduleRoot is the directory holding go.mod, one level above this file.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

var (
	gethOnce  sync.Once
	gethPath  string
	gethError error
	gethBuild time.Duration
)

// gethBinary returns the geth binary of the version go.mod pins as a tool
// (v1.17.8): $GETH_BIN if set, else one built on first use into toolDir. The
// build is the most expensive step of the tier (about 2 minutes with a cold
// cache), so it happens once per test binary, never per test.
func gethBinary(t *testing.T) string {
	t.Helper()
	gethOnce.Do(func() {
		if p := os.Getenv("GETH_BIN"); p != "" {
			gethPath = p
			return
		}
		start := time.Now()
		out := filepath.Join(toolDir, "geth")
		cmd := exec.Command("go", "build", "-o", out, "github.com/ethereum/go-ethereum/cmd/geth")
		cmd.Dir = moduleRoot()
		if b, err := cmd.CombinedOutput(); err != nil {
			gethError = fmt.Errorf("build geth: %v\n%s", err, b)
			return
		}
		gethPath, gethBuild = out, time.Since(start)
	})
	if gethError != nil {
		t.Fatal(gethError)
	}
	if gethBuild > 0 {
		t.Logf("geth built once for this run in %v", gethBuild.Round(time.Millisecond))
		gethBuild = 0
	}
	return gethPath
}

// devKeyHex is the fixed developer key geth --dev imports into an empty
// keystore and prefunds (go-ethereum cmd/utils/flags.go, DeveloperKey). The
// tests sign with it directly instead of relying on an unlocked account.
const devKeyHex = "b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291"

// devChain is a running `geth --dev` process and a client of it. Sends
// from the developer account are serialised through mu, which also guards
// the locally tracked developer nonce.
type devChain struct {
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
	rpcURL  string
	client  *ethclient.Client
	chainID *big.Int
	dev     *ecdsa.PrivateKey
	devAddr common.Address

	mu       sync.Mutex
	devNonce uint64
}

// startGeth runs `geth --dev` on a free loopback port with a temp data dir,
// waits until it answers eth_chainId and registers its stop (SIGINT, then
// SIGKILL) with t.Cleanup. A geth that cannot start fails the test with its
// log; the tier never skips.
func startGeth(t *testing.T) *devChain {
	t.Helper()
	bin := gethBinary(t)
	var lastErr error
	// The free port is found by binding and releasing it, so another process
	// can take it in between; a second attempt on a new port covers that.
	for attempt := 0; attempt < 3; attempt++ {
		c, err := tryStartGeth(t, bin)
		if err == nil {
			return c
		}
		lastErr = err
	}
	t.Fatalf("geth --dev did not start: %v", lastErr)
	return nil
}

func tryStartGeth(t *testing.T, bin string) (*devChain, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	c := &devChain{
		logPath: filepath.Join(dir, "geth.log"),
		rpcURL:  "http://127.0.0.1:" + strconv.Itoa(port),
		done:    make(chan struct{}),
	}
	logf, err := os.Create(c.logPath)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, "--dev", "--dev.period", "0",
		"--datadir", filepath.Join(dir, "data"),
		"--http", "--http.addr", "127.0.0.1", "--http.port", strconv.Itoa(port), "--http.api", "eth,net,web3",
		"--ipcdisable", "--nodiscover", "--maxpeers", "0", "--port", "0", "--authrpc.port", "0",
		"--verbosity", "3")
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	started := time.Now()
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start geth: %w", err)
	}
	go func() {
		c.cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	t.Cleanup(c.stop)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.waitReady(ctx); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w\ngeth log (tail):\n%s", err, c.logTail(4000))
	}
	t.Logf("geth --dev ready at %s in %v (chain %s, developer %s)", c.rpcURL,
		time.Since(started).Round(time.Millisecond), c.chainID, c.devAddr.Hex())
	return c, nil
}

// waitReady polls eth_chainId every 50 ms until geth answers, then checks
// that the developer account is the funded one the tests sign for.
func (c *devChain) waitReady(ctx context.Context) error {
	var err error
	if c.client, err = ethclient.DialContext(ctx, c.rpcURL); err != nil {
		return err
	}
	for {
		select {
		case <-c.done:
			return fmt.Errorf("geth exited during start (%v)", c.cmd.ProcessState)
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		c.chainID, err = c.client.ChainID(cctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no eth_chainId answer: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if c.dev, err = crypto.HexToECDSA(devKeyHex); err != nil {
		return err
	}
	c.devAddr = crypto.PubkeyToAddress(c.dev.PublicKey)
	bal, err := c.client.BalanceAt(ctx, c.devAddr, nil)
	if err != nil {
		return fmt.Errorf("developer balance: %w", err)
	}
	if bal.Sign() == 0 {
		return fmt.Errorf("developer account %s holds no ether; geth --dev no longer funds the fixed developer key", c.devAddr.Hex())
	}
	if c.devNonce, err = c.client.PendingNonceAt(ctx, c.devAddr); err != nil {
		return fmt.Errorf("developer nonce: %w", err)
	}
	return nil
}

// stop ends geth by PID: SIGINT (geth flushes and exits in about 2 s), then
// SIGKILL after 10 s.
func (c *devChain) stop() {
	if c.client != nil {
		c.client.Close()
	}
	stopProcess(c.cmd, c.done, syscall.SIGINT, 10*time.Second)
}

func (c *devChain) logTail(n int) string {
	b, _ := os.ReadFile(c.logPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// sendFromDev signs a dynamic-fee transaction from the developer account,
// sends it and waits for a successful receipt.
func (c *devChain) sendFromDev(t *testing.T, to *common.Address, value *big.Int, data []byte) *types.Receipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := ethereum.CallMsg{From: c.devAddr, To: to, Value: value, Data: data}
	gas, err := c.client.EstimateGas(ctx, msg)
	if err != nil {
		t.Fatalf("estimate gas: %v", err)
	}
	tip, err := c.client.SuggestGasTipCap(ctx)
	if err != nil {
		t.Fatalf("gas tip: %v", err)
	}
	head, err := c.client.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatalf("head: %v", err)
	}
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	tx, err := types.SignNewTx(c.dev, types.LatestSignerForChainID(c.chainID), &types.DynamicFeeTx{
		ChainID: c.chainID, Nonce: c.devNonce, GasTipCap: tip, GasFeeCap: feeCap,
		Gas: gas + gas/5, To: to, Value: value, Data: data,
	})
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	if err := c.client.SendTransaction(ctx, tx); err != nil {
		t.Fatalf("send transaction: %v", err)
	}
	c.devNonce++
	rcpt, err := c.waitReceipt(ctx, tx.Hash())
	if err != nil {
		t.Fatalf("transaction %s: %v\ngeth log (tail):\n%s", tx.Hash().Hex(), err, c.logTail(2000))
	}
	if rcpt.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("transaction %s reverted", tx.Hash().Hex())
	}
	return rcpt
}

// waitReceipt polls for a receipt every 20 ms: geth --dev mines a pending
// transaction within about 200 ms, and bind.WaitMined's 1 s poll would
// dominate the tier's time.
func (c *devChain) waitReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	for {
		rcpt, err := c.client.TransactionReceipt(ctx, hash)
		if err == nil {
			return rcpt, nil
		}
		// geth answers "transaction indexing is in progress" for a while
		// after start (and until the indexer catches up with a new block):
		// that is "not yet", like NotFound.
		if !errors.Is(err, ethereum.NotFound) && !strings.Contains(err.Error(), "indexing is in progress") {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("not mined: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// fundETH sends wei from the developer account to addr.
func (c *devChain) fundETH(t *testing.T, to common.Address, wei *big.Int) {
	t.Helper()
	c.sendFromDev(t, &to, wei, nil)
}

// ether returns n ether in wei.
func ether(n int64) *big.Int {
	return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e18))
}

// newKey returns a fresh secp256k1 key and its address.
func newKey(t *testing.T) (*ecdsa.PrivateKey, common.Address) {
	t.Helper()
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k, crypto.PubkeyToAddress(k.PublicKey)
}

// writeKeyFile writes key as hex to a 0600 file, the format of
// --signer-key-file and `ardx pay --key-file`.
func writeKeyFile(t *testing.T, key *ecdsa.PrivateKey) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key.hex")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(crypto.FromECDSA(key))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testToken is the test USDC (testdata/contracts/TestUSDC.sol) deployed on a
// devChain by the developer account, which is therefore its only minter.
type testToken struct {
	chain   *devChain
	addr    common.Address
	abi     abi.ABI
	name    string
	version string
}

// loadTokenArtifacts reads the compiled test token the facilitator embeds
// (facilitator/evm/contracts, a copy of testdata/contracts).
func loadTokenArtifacts(t *testing.T) (abi.ABI, []byte) {
	t.Helper()
	dir := filepath.Join(moduleRoot(), "facilitator", "evm", "contracts")
	abiJSON, err := os.ReadFile(filepath.Join(dir, "TestUSDC.abi"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := abi.JSON(bytes.NewReader(abiJSON))
	if err != nil {
		t.Fatalf("TestUSDC.abi: %v", err)
	}
	binHex, err := os.ReadFile(filepath.Join(dir, "TestUSDC.bin"))
	if err != nil {
		t.Fatal(err)
	}
	code, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(string(binHex)), "0x"))
	if err != nil {
		t.Fatalf("TestUSDC.bin: %v", err)
	}
	return parsed, code
}

// deployToken deploys the test USDC with the given EIP-712 name and version.
func (c *devChain) deployToken(t *testing.T, name, version string) *testToken {
	t.Helper()
	parsed, code := loadTokenArtifacts(t)
	args, err := parsed.Pack("", name, version)
	if err != nil {
		t.Fatalf("pack constructor: %v", err)
	}
	rcpt := c.sendFromDev(t, nil, nil, append(code, args...))
	if rcpt.ContractAddress == (common.Address{}) {
		t.Fatal("deploy receipt has no contract address")
	}
	return &testToken{chain: c, addr: rcpt.ContractAddress, abi: parsed, name: name, version: version}
}

// mint creates value (smallest unit) for to.
func (tk *testToken) mint(t *testing.T, to common.Address, value *big.Int) {
	t.Helper()
	data, err := tk.abi.Pack("mint", to, value)
	if err != nil {
		t.Fatal(err)
	}
	tk.chain.sendFromDev(t, &tk.addr, nil, data)
}

// balanceOf reads the token balance of who at the latest block.
func (tk *testToken) balanceOf(t *testing.T, who common.Address) *big.Int {
	t.Helper()
	data, err := tk.abi.Pack("balanceOf", who)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := tk.chain.client.CallContract(ctx, ethereum.CallMsg{To: &tk.addr, Data: data}, nil)
	if err != nil {
		t.Fatalf("balanceOf: %v", err)
	}
	vals, err := tk.abi.Unpack("balanceOf", out)
	if err != nil || len(vals) != 1 {
		t.Fatalf("balanceOf answer %x: %v", out, err)
	}
	return vals[0].(*big.Int)
}

// transferLog is one Transfer event of the token.
type transferLog struct {
	From, To common.Address
	Value    *big.Int
	TxHash   common.Hash
}

// transfers returns every Transfer event of the token from `from` to `to`
// since genesis, read from the chain's logs.
func (tk *testToken) transfers(t *testing.T, from, to common.Address) []transferLog {
	t.Helper()
	ev := tk.abi.Events["Transfer"]
	logs := tk.filter(t, ev.ID, common.BytesToHash(from.Bytes()), common.BytesToHash(to.Bytes()))
	out := make([]transferLog, 0, len(logs))
	for _, l := range logs {
		vals, err := ev.Inputs.NonIndexed().Unpack(l.Data)
		if err != nil || len(vals) != 1 {
			t.Fatalf("Transfer data %x: %v", l.Data, err)
		}
		out = append(out, transferLog{From: from, To: to, Value: vals[0].(*big.Int), TxHash: l.TxHash})
	}
	return out
}

// authorizationsUsed counts AuthorizationUsed events per nonce for one
// authorizer: the token emits exactly one per consumed EIP-3009
// authorization, so a count above one would be a double settlement.
func (tk *testToken) authorizationsUsed(t *testing.T, authorizer common.Address) map[common.Hash]int {
	t.Helper()
	logs := tk.filter(t, tk.abi.Events["AuthorizationUsed"].ID, common.BytesToHash(authorizer.Bytes()))
	used := map[common.Hash]int{}
	for _, l := range logs {
		if len(l.Topics) != 3 {
			t.Fatalf("AuthorizationUsed with %d topics", len(l.Topics))
		}
		used[l.Topics[2]]++
	}
	return used
}

// filter reads the token's logs with the event signature and indexed topics.
func (tk *testToken) filter(t *testing.T, sig common.Hash, topics ...common.Hash) []types.Log {
	t.Helper()
	q := ethereum.FilterQuery{FromBlock: big.NewInt(0), Addresses: []common.Address{tk.addr}, Topics: [][]common.Hash{{sig}}}
	for _, tp := range topics {
		q.Topics = append(q.Topics, []common.Hash{tp})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	logs, err := tk.chain.client.FilterLogs(ctx, q)
	if err != nil {
		t.Fatalf("eth_getLogs: %v", err)
	}
	for _, l := range logs {
		if l.Removed {
			t.Fatalf("log in tx %s was removed by a reorg", l.TxHash.Hex())
		}
	}
	return logs
}

// TestGethHarness checks the tier's own chain helpers against geth --dev,
// so a facilitator failure is never a harness failure in disguise: the
// token deploys with its EIP-712 domain, mints, and accepts an EIP-3009
// authorization signed by our signing code when the developer account
// submits it directly; the log readers see exactly those events.
func TestGethHarness(t *testing.T) {
	env := newPayEnv(t)
	tk := env.token
	if got := tk.balanceOf(t, env.payer); got.Cmp(big.NewInt(1_000_000_000_000)) != 0 {
		t.Fatalf("payer holds %s after mint", got)
	}
	if mints := tk.transfers(t, common.Address{}, env.payer); len(mints) != 1 {
		t.Fatalf("%d mint Transfer events, want 1", len(mints))
	}

	value := big.NewInt(4_242)
	pay := env.signPayment(t, 2, devNetwork, value, randomNonce(t))
	var body struct {
		PaymentPayload struct {
			Payload x402.ExactEVMPayload `json:"payload"`
		} `json:"paymentPayload"`
	}
	if err := json.Unmarshal(pay.body, &body); err != nil {
		t.Fatal(err)
	}
	a := body.PaymentPayload.Payload.Authorization
	sig := common.FromHex(body.PaymentPayload.Payload.Signature)
	var method abi.Method
	for _, m := range tk.abi.Methods {
		if m.Sig == "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)" {
			method = m
		}
	}
	validAfter, _ := new(big.Int).SetString(string(a.ValidAfter), 10)
	validBefore, _ := new(big.Int).SetString(string(a.ValidBefore), 10)
	args, err := method.Inputs.Pack(common.HexToAddress(a.From), common.HexToAddress(a.To), value,
		validAfter, validBefore, [32]byte(pay.nonce), sig)
	if err != nil {
		t.Fatal(err)
	}
	rcpt := env.chain.sendFromDev(t, &tk.addr, nil, append(method.ID, args...))

	if got := tk.authorizationsUsed(t, env.payer); len(got) != 1 || got[pay.nonce] != 1 {
		t.Errorf("AuthorizationUsed events %v, want one for %s", got, pay.nonce.Hex())
	}
	trs := tk.transfers(t, env.payer, env.merchant)
	if len(trs) != 1 || trs[0].Value.Cmp(value) != 0 || trs[0].TxHash != rcpt.TxHash {
		t.Errorf("transfers %+v, want one of %s in %s", trs, value, rcpt.TxHash.Hex())
	}
	if got := tk.balanceOf(t, env.merchant); got.Cmp(value) != 0 {
		t.Errorf("merchant holds %s, want %s", got, value)
	}
}
