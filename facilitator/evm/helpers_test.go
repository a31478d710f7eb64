package evm_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// mustDevChain starts a dev chain for one test.
func mustDevChain(tb testing.TB) *evm.DevChain {
	tb.Helper()
	d, err := evm.NewDevChain(context.Background(), nil)
	if err != nil {
		tb.Fatalf("NewDevChain: %v", err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

const testAmount = 10_000 // 0.01 USDC

// signedBody signs a payment of testAmount to the merchant on the dev chain
// in x402 version v and returns the /verify body.
func signedBody(tb testing.TB, d *evm.DevChain, v int, opt evm.PayOptions) []byte {
	tb.Helper()
	return signedBodyWith(tb, d, v, d.PayerKey, opt)
}

// signedBodyWith is signedBody signed with key.
func signedBodyWith(tb testing.TB, d *evm.DevChain, v int, key *ecdsa.PrivateKey, opt evm.PayOptions) []byte {
	tb.Helper()
	var body any
	var err error
	switch v {
	case 1:
		req := d.Network.RequirementsV1(d.Merchant.Hex(), big.NewInt(testAmount), 60, "https://merchant.test/r", "a test resource")
		body, err = evm.PaymentV1(key, req, opt)
	default:
		req := d.Network.RequirementsV2(d.Merchant.Hex(), big.NewInt(testAmount), 60)
		body, err = evm.PaymentV2(key, &x402.ResourceInfo{URL: "https://merchant.test/r"}, req, opt)
	}
	if err != nil {
		tb.Fatalf("sign: %v", err)
	}
	b, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// edit applies f to body decoded as a generic JSON object.
func edit(tb testing.TB, body []byte, f func(m map[string]any)) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		tb.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// set sets a dotted path in a generic JSON object.
func set(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	m[parts[len(parts)-1]] = v
}

func get(m map[string]any, path string) any {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	return m[parts[len(parts)-1]]
}

// payloadNetworkPath is where the payload names its network in version v.
func payloadNetworkPath(v int) string {
	if v == 1 {
		return "paymentPayload.network"
	}
	return "paymentPayload.accepted.network"
}

// otherNetwork names Base in the version's form: a network the dev chain is not.
func otherNetwork(v int) string {
	if v == 1 {
		return "base"
	}
	return "eip155:8453"
}

// setRequirements sets a requirements member in both places v2 carries it.
func setRequirements(m map[string]any, v int, key string, val any) {
	set(m, "paymentRequirements."+key, val)
	if v == 2 {
		set(m, "paymentPayload.accepted."+key, val)
	}
}

func decode(tb testing.TB, body []byte) *x402.PaymentRequest {
	tb.Helper()
	req, err := x402.DecodeRequest(body)
	if err != nil {
		tb.Fatalf("DecodeRequest: %v\n%s", err, body)
	}
	return req
}

func bigp(n int64) *big.Int { return big.NewInt(n) }

func now() int64 { return time.Now().Unix() }

func hexDecode(s string) ([]byte, error) { return hexutil.Decode(s) }

// prepare simulates and signs as the settlement worker does.
func prepare(ctx context.Context, n *evm.Network, req *x402.PaymentRequest) (*settle.Tx, *x402.SettleResponse, error) {
	t, fail, err := n.Simulate(ctx, req)
	if err != nil || fail != nil {
		return nil, fail, err
	}
	tx, err := n.Sign(ctx, t)
	return tx, nil, err
}
