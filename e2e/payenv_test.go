//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// devNetwork is the CAIP-2 id of geth --dev (chain id 1337).
const devNetwork = "eip155:1337"

// The test token's EIP-712 domain. The name is deliberately neither Base's
// nor Base Sepolia's, so a facilitator that did not read it from the
// contract would verify nothing.
const (
	tokenName    = "USD Coin (ardx e2e)"
	tokenVersion = "2"
)

// payEnv is a geth --dev chain with the test USDC deployed, a gas-paying
// signer funded with ether, a payer holding USDC and a merchant address,
// plus the facilitator flags that serve it.
type payEnv struct {
	chain *devChain
	token *testToken

	signer        common.Address
	signerKeyFile string

	payerKey     *ecdsa.PrivateKey
	payer        common.Address
	payerKeyFile string

	merchant common.Address
	dataDir  string
}

// newPayEnv starts geth, deploys the token, funds a signer with 10 ETH and
// mints a million USDC to a payer.
func newPayEnv(t *testing.T) *payEnv {
	t.Helper()
	start := time.Now()
	e := &payEnv{chain: startGeth(t), dataDir: t.TempDir()}
	e.token = e.chain.deployToken(t, tokenName, tokenVersion)

	signerKey, signer := newKey(t)
	e.signer, e.signerKeyFile = signer, writeKeyFile(t, signerKey)
	e.chain.fundETH(t, signer, ether(10))

	e.payerKey, e.payer = newKey(t)
	e.payerKeyFile = writeKeyFile(t, e.payerKey)
	e.token.mint(t, e.payer, big.NewInt(1_000_000_000_000)) // 1,000,000 USDC at 6 decimals

	_, e.merchant = newKey(t)
	t.Logf("chain ready in %v: token %s, signer %s, payer %s, merchant %s",
		time.Since(start).Round(time.Millisecond), e.token.addr.Hex(), e.signer.Hex(), e.payer.Hex(), e.merchant.Hex())
	return e
}

// facilitatorArgs are the `ardx facilitator` arguments for this chain.
func (e *payEnv) facilitatorArgs() []string {
	return []string{"facilitator",
		"--data", e.dataDir,
		"--facilitator-addr", "127.0.0.1:0",
		"--network", devNetwork,
		"--rpc", devNetwork + "=" + e.chain.rpcURL,
		"--asset", devNetwork + "=" + e.token.addr.Hex(),
		"--signer-key-file", e.signerKeyFile,
		// The tier sends bursts well above the spec's per-client rates; it
		// tests settlement, not the limiter.
		"--rate-limit", "off",
	}
}

// startFacilitator runs `ardx facilitator` on the env's data dir and returns
// the process and its base URL.
func (e *payEnv) startFacilitator(t *testing.T) (*proc, string) {
	t.Helper()
	p := startArdx(t, []string{"facilitator"}, e.facilitatorArgs()...)
	return p, p.url("facilitator")
}

// killArdx ends the facilitator with SIGKILL, as a crash would, and reaps it.
func killArdx(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill ardx: %v", err)
	}
	_ = p.cmd.Wait() // "signal: killed" is the expected outcome
}

func (e *payEnv) domain() evm.Domain {
	return evm.Domain{Name: tokenName, Version: tokenVersion, ChainID: e.chain.chainID, VerifyingContract: e.token.addr}
}

// randomNonce returns a fresh EIP-3009 nonce.
func randomNonce(t *testing.T) [32]byte {
	t.Helper()
	var n [32]byte
	if _, err := rand.Read(n[:]); err != nil {
		t.Fatal(err)
	}
	return n
}

// payment describes one signed payment: its body and what it must move.
type payment struct {
	body  []byte
	nonce common.Hash
	value *big.Int
}

// signPayment builds the /verify and /settle body a merchant sends for a
// payment of value from the payer to the merchant, signed with our own EIP-712
// code the way a wallet signs it. network is the CAIP-2 id for v2 and the
// short name for v1.
func (e *payEnv) signPayment(t *testing.T, version int, network string, value *big.Int, nonce [32]byte) payment {
	t.Helper()
	return e.signPaymentAs(t, e.payerKey, e.merchant, version, network, value, nonce)
}

// signPaymentAs is signPayment for another payer key and merchant.
func (e *payEnv) signPaymentAs(t *testing.T, key *ecdsa.PrivateKey, merchant common.Address, version int, network string, value *big.Int, nonce [32]byte) payment {
	t.Helper()
	now := time.Now().Unix()
	auth := x402.Authorization{
		From:        crypto.PubkeyToAddress(key.PublicKey).Hex(),
		To:          merchant.Hex(),
		Value:       x402.Decimal(value.String()),
		ValidAfter:  x402.Decimal(strconv.FormatInt(now-600, 10)),
		ValidBefore: x402.Decimal(strconv.FormatInt(now+3600, 10)),
		Nonce:       "0x" + hex.EncodeToString(nonce[:]),
	}
	sig, err := evm.SignAuthorization(key, e.domain(), auth)
	if err != nil {
		t.Fatalf("sign authorization: %v", err)
	}
	extra := &x402.Extra{Name: tokenName, Version: tokenVersion}
	var body any
	switch version {
	case x402.Version1:
		req := x402.PaymentRequirementsV1{
			Scheme: x402.SchemeExact, Network: network, MaxAmountRequired: auth.Value,
			Resource: "http://127.0.0.1/e2e/resource", Description: "e2e resource",
			PayTo: auth.To, MaxTimeoutSeconds: 300, Asset: e.token.addr.Hex(), Extra: extra,
		}
		body = x402.NewRequestV1(x402.NewPayloadV1(req, auth, sig), req)
	case x402.Version2:
		req := x402.PaymentRequirementsV2{
			Scheme: x402.SchemeExact, Network: network, Amount: auth.Value, Asset: e.token.addr.Hex(),
			PayTo: auth.To, MaxTimeoutSeconds: 300, Extra: extra,
		}
		res := &x402.ResourceInfo{URL: "http://127.0.0.1/e2e/resource", Description: "e2e resource"}
		body = x402.NewRequestV2(x402.NewPayloadV2(res, req, auth, sig, nil), req)
	default:
		t.Fatalf("x402 version %d", version)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return payment{body: raw, nonce: common.Hash(nonce), value: new(big.Int).Set(value)}
}

// settleAnswer is one answer of POST /settle.
type settleAnswer struct {
	status   int
	replayed bool
	ctype    string
	raw      []byte
	resp     x402.SettleResponse
}

// final reports whether the answer is a recorded outcome rather than
// "pending" or a transient server failure to retry.
func (a settleAnswer) final() bool {
	return a.status == http.StatusOK && a.resp.ErrorReason != x402.ReasonSettlementPending
}

// postSettle sends body to base/settle. It returns an error instead of
// failing the test so crash-test goroutines can retry across kills.
func postSettle(ctx context.Context, c *http.Client, base string, body []byte, idemKey string) (settleAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/settle", bytes.NewReader(body))
	if err != nil {
		return settleAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.Do(req)
	if err != nil {
		return settleAnswer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return settleAnswer{}, err
	}
	a := settleAnswer{status: resp.StatusCode, raw: raw, ctype: resp.Header.Get("Content-Type"),
		replayed: resp.Header.Get("Idempotency-Replayed") == "true"}
	if !strings.Contains(a.ctype, "problem+json") {
		if err := json.Unmarshal(raw, &a.resp); err != nil {
			return a, fmt.Errorf("settle answered %d with %q: %w", resp.StatusCode, raw, err)
		}
	}
	return a, nil
}

// mustSettle is postSettle for the test goroutine.
func mustSettle(t *testing.T, base string, body []byte, idemKey string) settleAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := postSettle(ctx, http.DefaultClient, base, body, idemKey)
	if err != nil {
		t.Fatalf("POST /settle: %v", err)
	}
	return a
}

// mustVerify posts body to base/verify and decodes the answer.
func mustVerify(t *testing.T, base string, body []byte) x402.VerifyResponse {
	t.Helper()
	status, raw := postJSON(t, base+"/verify", string(body))
	var vr x402.VerifyResponse
	if err := json.Unmarshal(raw, &vr); err != nil {
		t.Fatalf("/verify answered %d %s: %v", status, raw, err)
	}
	if status != http.StatusOK {
		t.Fatalf("/verify answered %d %s", status, raw)
	}
	return vr
}

// supportedDoc is the part of GET /supported the tier checks, decoded with
// the tier's own types so a change of the wire shape fails here.
type supportedDoc struct {
	Kinds []struct {
		X402Version int    `json:"x402Version"`
		Scheme      string `json:"scheme"`
		Network     string `json:"network"`
	} `json:"kinds"`
	Signers  map[string][]string `json:"signers"`
	Networks map[string]struct {
		Available bool   `json:"available"`
		Reason    string `json:"reason"`
		V1Network string `json:"v1Network"`
		Asset     string `json:"asset"`
		EIP712    struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"eip712"`
		Decimals int      `json:"decimals"`
		Signers  []string `json:"signers"`
	} `json:"networks"`
}

func (d supportedDoc) hasKind(version int, network string) bool {
	return slices.ContainsFunc(d.Kinds, func(k struct {
		X402Version int    `json:"x402Version"`
		Scheme      string `json:"scheme"`
		Network     string `json:"network"`
	}) bool {
		return k.X402Version == version && k.Scheme == x402.SchemeExact && k.Network == network
	})
}

// waitSupported polls GET /supported until the dev network is available
// (the facilitator checks signer gas in the background) or 20 s pass.
func waitSupported(t *testing.T, base string) supportedDoc {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/supported")
		if err != nil {
			t.Fatalf("GET /supported: %v", err)
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		var doc supportedDoc
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &doc) != nil {
			t.Fatalf("GET /supported answered %d %s", resp.StatusCode, raw)
		}
		if doc.Networks[devNetwork].Available {
			return doc
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not available in /supported after 20 s: %s", devNetwork, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// percentile returns the p-th percentile (0-100) of sorted durations,
// nearest-rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
