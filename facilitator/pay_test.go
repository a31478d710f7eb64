package facilitator_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator"
	"github.com/ardx-dev/ardx/facilitator/evm"
)

// writeKey writes the payer's key as `ardx pay` expects it and returns the
// file's path.
func writeKey(tb testing.TB, env *testEnv) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "payer.key")
	if err := os.WriteFile(path, []byte("0x"+hex.EncodeToString(crypto.FromECDSA(env.Payer))+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func TestPay(t *testing.T) {
	env := newTestEnv(t)
	dc := mustDevChain(t)
	keyFile := writeKey(t, env)
	recipient := crypto.PubkeyToAddress(evm.DevKey("pay test recipient").PublicKey)

	tests := []struct {
		name    string
		network string
		version int
		amount  string
		want    int64 // smallest units received
	}{
		{"v2 by CAIP-2 id", env.Net.ID(), 2, "0.01", 10_000},
		{"v1 by short name", env.Net.V1Name(), 1, "0.000123", 123},
		{"v2 by short name", env.Net.V1Name(), 2, "1", 1_000_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, err := dc.BalanceOf(context.Background(), recipient)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err = facilitator.Pay(context.Background(), facilitator.PayOptions{
				FacilitatorURL: env.URL, Network: tc.network, To: recipient.Hex(), Amount: tc.amount,
				KeyFile: keyFile, X402Version: tc.version, Stdout: &out,
			})
			if err != nil {
				t.Fatalf("Pay: %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), `verify: {"isValid":true`) || !strings.Contains(out.String(), `settle: {"success":true`) {
				t.Fatalf("output does not show both answers:\n%s", out.String())
			}
			after, err := dc.BalanceOf(context.Background(), recipient)
			if err != nil {
				t.Fatal(err)
			}
			if got := new(big.Int).Sub(after, before); got.Int64() != tc.want {
				t.Fatalf("recipient received %s, want %d", got, tc.want)
			}
		})
	}
}

func TestPayRefuses(t *testing.T) {
	env := newTestEnv(t)
	keyFile := writeKey(t, env)
	badKey := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(badKey, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	to := env.PayTo.Hex()
	tests := []struct {
		name    string
		opts    facilitator.PayOptions
		wantErr string
	}{
		{"too many decimals", facilitator.PayOptions{Network: env.Net.ID(), To: to, Amount: "0.0000001", KeyFile: keyFile}, "decimal places"},
		{"unknown network", facilitator.PayOptions{Network: "eip155:1", To: to, Amount: "1", KeyFile: keyFile}, "does not serve"},
		{"bad recipient", facilitator.PayOptions{Network: env.Net.ID(), To: "bob", Amount: "1", KeyFile: keyFile}, "not an address"},
		{"bad key file", facilitator.PayOptions{Network: env.Net.ID(), To: to, Amount: "1", KeyFile: badKey}, "private key"},
		{"missing key file", facilitator.PayOptions{Network: env.Net.ID(), To: to, Amount: "1", KeyFile: badKey + ".none"}, "key file"},
		{"version 3", facilitator.PayOptions{Network: env.Net.ID(), To: to, Amount: "1", KeyFile: keyFile, X402Version: 3}, "1 or 2"},
		{"more than the payer holds", facilitator.PayOptions{Network: env.Net.ID(), To: to, Amount: "1000000", KeyFile: keyFile}, "invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.FacilitatorURL = env.URL
			err := facilitator.Pay(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Pay error %v, want one mentioning %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), hex.EncodeToString(crypto.FromECDSA(env.Payer))) {
				t.Fatalf("error leaks the private key")
			}
		})
	}
}
