package evm_test

import (
	"context"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ardx-dev/ardx/facilitator/evm"
)

// devChainChildDir, when set, makes TestDevChainKeepsStateAcrossKill the
// "previous process": it moves test USDC on the dev chain in that dir and
// exits without closing anything, as kill -9 would leave it.
const devChainChildDir = "ARDX_TEST_DEVCHAIN_CHILD_DIR"

func TestDevChainKeepsStateAcrossKill(t *testing.T) {
	ctx := context.Background()
	if dir := os.Getenv(devChainChildDir); dir != "" {
		d, err := evm.OpenDevChain(ctx, nil, dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.TransferToken(ctx, d.PayerKey, d.Merchant, big.NewInt(250_000)); err != nil {
			t.Fatal(err)
		}
		os.Exit(0) // no Close: the chain database is left as a kill leaves it
	}
	dir := filepath.Join(t.TempDir(), "devchain")
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestDevChainKeepsStateAcrossKill$")
		cmd.Env = append(os.Environ(), devChainChildDir+"="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
	}
	d, err := evm.OpenDevChain(ctx, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	merchant, err := d.BalanceOf(ctx, d.Merchant)
	if err != nil {
		t.Fatal(err)
	}
	payer, err := d.BalanceOf(ctx, d.Payer)
	if err != nil {
		t.Fatal(err)
	}
	// Two processes each moved 0.25 USDC, on one token minted once.
	if merchant.Int64() != 500_000 || payer.Cmp(new(big.Int).Sub(evm.DevPayerFunds, big.NewInt(500_000))) != 0 {
		t.Fatalf("after two killed runs: merchant %s, payer %s", merchant, payer)
	}
	evs, err := d.Transfers(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 { // the mint and two transfers
		t.Fatalf("transfer events = %d, want 3", len(evs))
	}
	if d.Network.Genesis() == "" {
		t.Fatal("no genesis hash")
	}
}
