package facilitator

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// PayOptions configure Pay, the logic behind `ardx pay`.
type PayOptions struct {
	// FacilitatorURL is the facilitator's base URL.
	FacilitatorURL string
	// Network is a CAIP-2 id ("eip155:84532") or a v1 name ("base-sepolia").
	Network string
	// To is the recipient address.
	To string
	// Amount is a decimal amount of the asset ("0.01"), converted with the
	// asset's decimals from /supported; more fractional digits than the
	// asset has is an error, never a silent rounding.
	Amount string
	// KeyFile holds the payer's private key as hex (0x optional).
	KeyFile string
	// X402Version is 1 or 2; zero means 2.
	X402Version int
	// MaxTimeoutSeconds sets validBefore = now + MaxTimeoutSeconds; zero
	// means 60.
	MaxTimeoutSeconds int
	// Stdout receives the /verify and /settle answers.
	Stdout io.Writer
	// HTTPClient is used for the three calls; nil means a client with a
	// 60 s timeout (settlement answers within about 25 s).
	HTTPClient *http.Client
	// Now is the clock for the authorization window; nil means time.Now.
	Now func() time.Time
}

// maxFacilitatorAnswer bounds what Pay reads of one facilitator answer.
const maxFacilitatorAnswer = 1 << 20

// Pay sends one payment through a facilitator: it reads the network's asset
// and EIP-712 domain from /supported, signs an EIP-3009 authorization the
// way the official x402 client does (validAfter = now - 600, validBefore =
// now + maxTimeoutSeconds, random 32-byte nonce), posts the request to
// /verify and, if valid, to /settle, and prints both answers. It fails when
// the payment is invalid or the settlement does not succeed.
func Pay(ctx context.Context, opts PayOptions) error {
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.X402Version == 0 {
		opts.X402Version = x402.Version2
	}
	if opts.X402Version != x402.Version1 && opts.X402Version != x402.Version2 {
		return fmt.Errorf("pay: x402 version must be 1 or 2, not %d", opts.X402Version)
	}
	if opts.MaxTimeoutSeconds <= 0 {
		opts.MaxTimeoutSeconds = 60
	}
	if !common.IsHexAddress(opts.To) {
		return fmt.Errorf("pay: recipient %q is not an address", opts.To)
	}
	base := strings.TrimRight(opts.FacilitatorURL, "/")
	if base == "" {
		return errors.New("pay: the facilitator URL is required")
	}
	key, err := readKeyFile(opts.KeyFile)
	if err != nil {
		return err
	}

	var sup SupportedResponse
	if _, err := getJSON(ctx, opts.HTTPClient, base+"/supported", &sup); err != nil {
		return fmt.Errorf("pay: read %s/supported: %w", base, err)
	}
	net, ok := sup.Lookup(opts.Network)
	if !ok {
		return fmt.Errorf("pay: the facilitator does not serve network %q", opts.Network)
	}
	if !net.Available {
		return fmt.Errorf("pay: network %s is unavailable: %s", net.Network, net.Reason)
	}
	value, err := ParseAmount(opts.Amount, net.Decimals)
	if err != nil {
		return fmt.Errorf("pay: amount: %w", err)
	}
	// The chain id is checked here so a network the signer cannot name
	// fails before anything is signed.
	if _, ok := evm.ChainIDOf(net.Network); !ok {
		return fmt.Errorf("pay: network %s is not an eip155 chain", net.Network)
	}
	payTo := common.HexToAddress(opts.To).Hex()
	extra := &x402.Extra{Name: net.EIP712.Name, Version: net.EIP712.Version}
	// evm signs what the official client signs: validAfter = now - 600,
	// validBefore = now + maxTimeoutSeconds, a random 32-byte nonce.
	signOpts := evm.PayOptions{Now: opts.Now()}
	var body any
	var nonce string
	switch opts.X402Version {
	case x402.Version1:
		if net.V1Network == "" {
			return fmt.Errorf("pay: network %s has no x402 v1 name; use x402 version 2", net.Network)
		}
		req := x402.PaymentRequirementsV1{
			Scheme: x402.SchemeExact, Network: net.V1Network, MaxAmountRequired: x402.Decimal(value.String()),
			Resource: base + "/pay", Description: "ardx pay", PayTo: payTo,
			MaxTimeoutSeconds: x402.Int(opts.MaxTimeoutSeconds), Asset: net.Asset, Extra: extra,
		}
		r, err := evm.PaymentV1(key, req, signOpts)
		if err != nil {
			return fmt.Errorf("pay: sign: %w", err)
		}
		body, nonce = r, r.PaymentPayload.Payload.Authorization.Nonce
	default:
		req := x402.PaymentRequirementsV2{
			Scheme: x402.SchemeExact, Network: net.Network, Amount: x402.Decimal(value.String()), Asset: net.Asset,
			PayTo: payTo, MaxTimeoutSeconds: x402.Int(opts.MaxTimeoutSeconds), Extra: extra,
		}
		res := &x402.ResourceInfo{URL: base + "/pay", Description: "ardx pay"}
		r, err := evm.PaymentV2(key, res, req, signOpts)
		if err != nil {
			return fmt.Errorf("pay: sign: %w", err)
		}
		body, nonce = r, r.PaymentPayload.Payload.Authorization.Nonce
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("pay: encode request: %w", err)
	}

	var vr x402.VerifyResponse
	vraw, err := postJSON(ctx, opts.HTTPClient, base+"/verify", raw, nil, &vr)
	if err != nil {
		return fmt.Errorf("pay: verify: %w", err)
	}
	fmt.Fprintf(opts.Stdout, "verify: %s\n", bytes.TrimSpace(vraw))
	if !vr.IsValid {
		return fmt.Errorf("pay: the facilitator found the payment invalid: %s %s", vr.InvalidReason, vr.InvalidMessage)
	}

	var sr x402.SettleResponse
	// The nonce is unique per payment, so it doubles as an idempotency key.
	hdr := http.Header{"Idempotency-Key": {nonce}}
	sraw, err := postJSON(ctx, opts.HTTPClient, base+"/settle", raw, hdr, &sr)
	if err != nil {
		return fmt.Errorf("pay: settle: %w", err)
	}
	fmt.Fprintf(opts.Stdout, "settle: %s\n", bytes.TrimSpace(sraw))
	if !sr.Success {
		if sr.ErrorReason == x402.ReasonSettlementPending {
			return fmt.Errorf("pay: settlement pending (transaction %s); post the same body again later to learn the outcome", sr.Transaction)
		}
		return fmt.Errorf("pay: settlement failed: %s %s", sr.ErrorReason, sr.ErrorMessage)
	}
	return nil
}

// ParseAmount converts a decimal amount ("0.01") to the asset's smallest
// unit with the given decimals. It refuses signs, exponents, empty parts,
// zero, and more fractional digits than decimals allows.
func ParseAmount(s string, decimals uint8) (*big.Int, error) {
	s = strings.TrimSpace(s)
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" && frac == "" || hasDot && frac == "" || !allDigits(whole) || !allDigits(frac) {
		return nil, fmt.Errorf("%q is not a decimal amount like 0.01", s)
	}
	if len(frac) > int(decimals) {
		return nil, fmt.Errorf("%q has more than %d decimal places", s, decimals)
	}
	digits := whole + frac + strings.Repeat("0", int(decimals)-len(frac))
	v, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return nil, fmt.Errorf("%q is not a decimal amount", s)
	}
	if v.Sign() == 0 {
		return nil, errors.New("the amount must be greater than zero")
	}
	// uint256 is the token's limit; anything longer cannot be transferred.
	if v.BitLen() > 256 {
		return nil, fmt.Errorf("%q is too large", s)
	}
	return v, nil
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// readKeyFile reads a hex private key; the key never appears in an error.
func readKeyFile(path string) (*ecdsa.PrivateKey, error) {
	if path == "" {
		return nil, errors.New("pay: a key file is required")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pay: read key file: %w", err)
	}
	s := strings.TrimPrefix(strings.TrimSpace(string(b)), "0x")
	key, err := crypto.HexToECDSA(s)
	if err != nil {
		return nil, fmt.Errorf("pay: key file %s does not hold a hex secp256k1 private key", path)
	}
	return key, nil
}

// getJSON fetches url and decodes a 200 JSON answer into v.
func getJSON(ctx context.Context, c *http.Client, url string, v any) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return doJSON(c, req, v)
}

// postJSON posts body to url. Payment answers keep their shape on every
// status, so any status with a decodable body is returned to the caller.
func postJSON(ctx context.Context, c *http.Client, url string, body []byte, hdr http.Header, v any) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	return doJSON(c, req, v)
}

func doJSON(c *http.Client, req *http.Request, v any) ([]byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxFacilitatorAnswer))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return raw, fmt.Errorf("status %d, body is not the expected JSON: %.200s", resp.StatusCode, raw)
	}
	if req.Method == http.MethodGet && resp.StatusCode != http.StatusOK {
		return raw, fmt.Errorf("status %d: %.200s", resp.StatusCode, raw)
	}
	if strings.Contains(resp.Header.Get("Content-Type"), "problem+json") {
		return raw, fmt.Errorf("status %d: %.200s", resp.StatusCode, raw)
	}
	return raw, nil
}
