package evm_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

var _ settle.Chain = (*evm.Network)(nil)

func TestSettleMovesExactlyTheAmountOnce(t *testing.T) {
	for _, v := range []int{1, 2} {
		t.Run("v"+string(rune('0'+v)), func(t *testing.T) {
			ctx := context.Background()
			d := mustDevChain(t)
			req := decode(t, signedBody(t, d, v, evm.PayOptions{}))
			payerBefore, _ := d.BalanceOf(ctx, d.Payer)
			merchantBefore, _ := d.BalanceOf(ctx, d.Merchant)
			head, _ := d.BlockNumber(ctx)

			if used, err := d.Network.AuthorizationUsed(ctx, req); err != nil || used {
				t.Fatalf("AuthorizationUsed before = %v, %v", used, err)
			}
			tx, fail, err := prepare(ctx, d.Network, req)
			if err != nil || fail != nil {
				t.Fatalf("Prepare: %v %+v", err, fail)
			}
			if !strings.EqualFold(tx.Signer, d.Signer.Hex()) || len(tx.Raw) == 0 || len(tx.Hash) != 66 {
				t.Fatalf("tx = %+v", tx)
			}
			if found, _, err := d.Network.Receipt(ctx, tx.Hash); err != nil || found {
				t.Fatalf("receipt before broadcast: found=%v err=%v", found, err)
			}
			if err := d.Network.Broadcast(ctx, tx); err != nil {
				t.Fatalf("Broadcast: %v", err)
			}
			// A second broadcast of the same transaction is not an error.
			if err := d.Network.Broadcast(ctx, tx); err != nil {
				t.Fatalf("second Broadcast: %v", err)
			}
			found, ok, err := d.Network.Receipt(ctx, tx.Hash)
			if err != nil || !found || !ok {
				t.Fatalf("Receipt = %v %v %v", found, ok, err)
			}
			// The watcher's view: the head moved past the transaction's
			// block, and one batch tells a mined hash from an unknown one.
			if now, err := d.Network.Head(ctx); err != nil || now <= head {
				t.Fatalf("Head = %d, %v; want past %d", now, err, head)
			}
			unknown := "0x" + strings.Repeat("ab", 32)
			rs, err := d.Network.Receipts(ctx, []string{unknown, tx.Hash})
			if err != nil || len(rs) != 2 || rs[0] != (settle.ReceiptStatus{}) || !rs[1].Found || !rs[1].Success || rs[1].Err != nil {
				t.Fatalf("Receipts = %+v, %v", rs, err)
			}
			if _, err := d.Network.Receipts(ctx, []string{tx.Hash, "0x12"}); err == nil {
				t.Fatal("Receipts took a malformed hash")
			}
			payerAfter, _ := d.BalanceOf(ctx, d.Payer)
			merchantAfter, _ := d.BalanceOf(ctx, d.Merchant)
			if diff := new(big.Int).Sub(payerBefore, payerAfter); diff.Int64() != testAmount {
				t.Errorf("payer paid %s, want %d", diff, testAmount)
			}
			if diff := new(big.Int).Sub(merchantAfter, merchantBefore); diff.Int64() != testAmount {
				t.Errorf("merchant got %s, want %d", diff, testAmount)
			}
			events, err := d.Transfers(ctx, head+1)
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != 1 || events[0].From != d.Payer || events[0].To != d.Merchant || events[0].Value.Int64() != testAmount {
				t.Fatalf("transfers = %+v", events)
			}
			if used, err := d.Network.AuthorizationUsed(ctx, req); err != nil || !used {
				t.Fatalf("AuthorizationUsed after = %v, %v", used, err)
			}
			// The same authorization again fails before any gas is spent.
			tx2, fail, err := prepare(ctx, d.Network, req)
			if err != nil || tx2 != nil || fail == nil || fail.ErrorReason != x402.ReasonNonceAlreadyUsed {
				t.Fatalf("second Prepare = %+v %+v %v", tx2, fail, err)
			}
		})
	}
}

func TestSimulateFailsCleanlyWhenPayerEmptiedAfterVerify(t *testing.T) {
	ctx := context.Background()
	d := mustDevChain(t)
	req := decode(t, signedBody(t, d, 2, evm.PayOptions{}))
	if v := d.Network.Verify(ctx, req); !v.IsValid {
		t.Fatalf("verify: %+v", v)
	}
	bal, _ := d.BalanceOf(ctx, d.Payer)
	if err := d.TransferToken(ctx, d.PayerKey, d.Merchant, bal); err != nil {
		t.Fatal(err)
	}
	gasBefore, _ := d.ETHBalance(ctx, d.Signer)
	tx, fail, err := prepare(ctx, d.Network, req)
	if err != nil || tx != nil || fail == nil {
		t.Fatalf("Prepare = %+v %+v %v", tx, fail, err)
	}
	want := x402.SettleResponse{Success: false, ErrorReason: x402.ReasonInsufficientBalance, Payer: req.Payer(), Network: "eip155:1337"}
	if fail.ErrorReason != want.ErrorReason || fail.Payer != want.Payer || fail.Network != want.Network || fail.Transaction != "" || fail.Success {
		t.Fatalf("fail = %+v", fail)
	}
	gasAfter, _ := d.ETHBalance(ctx, d.Signer)
	if gasBefore.Cmp(gasAfter) != 0 {
		t.Fatalf("signer gas changed: %s -> %s", gasBefore, gasAfter)
	}
}

func TestNonceResyncAfterUnbroadcastTransaction(t *testing.T) {
	ctx := context.Background()
	d := mustDevChain(t)
	// Prepared but never broadcast (a failed send): the local nonce ran ahead.
	lost, fail, err := prepare(ctx, d.Network, decode(t, signedBody(t, d, 2, evm.PayOptions{})))
	if err != nil || fail != nil {
		t.Fatal(err, fail)
	}
	tx, _, err := prepare(ctx, d.Network, decode(t, signedBody(t, d, 2, evm.PayOptions{})))
	if err != nil || tx.Nonce != lost.Nonce+1 {
		t.Fatalf("second nonce %d after %d (%v)", tx.Nonce, lost.Nonce, err)
	}
	// The node refuses the gapped transaction or leaves it unmined.
	if err := d.Network.Broadcast(ctx, tx); err == nil {
		if found, _, _ := d.Network.Receipt(ctx, tx.Hash); found {
			t.Fatal("a transaction with a nonce gap was mined")
		}
	}
	if err := d.Network.ResyncNonce(ctx, strings.ToLower(tx.Signer)); err != nil {
		t.Fatal(err)
	}
	again, _, err := prepare(ctx, d.Network, decode(t, signedBody(t, d, 2, evm.PayOptions{})))
	if err != nil || again.Nonce != lost.Nonce {
		t.Fatalf("after resync nonce = %d, want %d (%v)", again.Nonce, lost.Nonce, err)
	}
	if err := d.Network.Broadcast(ctx, again); err != nil {
		t.Fatal(err)
	}
	if found, ok, err := d.Network.Receipt(ctx, again.Hash); !found || !ok || err != nil {
		t.Fatalf("receipt %v %v %v", found, ok, err)
	}
	if err := d.Network.ResyncNonce(ctx, "0x0000000000000000000000000000000000000001"); err == nil {
		t.Fatal("resync of a stranger succeeded")
	}
}

func TestSignersRotateAndAvailability(t *testing.T) {
	ctx := context.Background()
	d := mustDevChain(t)
	keys := []*ecdsa.PrivateKey{evm.DevKey("s1"), evm.DevKey("s2")}
	for _, k := range keys {
		if err := d.FundETH(ctx, crypto.PubkeyToAddress(k.PublicKey), big.NewInt(1e18)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := d.OpenNetwork(ctx, evm.NetworkConfig{Asset: d.Asset.Hex(), SignerKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if ok, reason := n.Available(); !ok {
		t.Fatalf("unavailable: %s", reason)
	}
	seen := map[string]bool{}
	for range 4 {
		tx, fail, err := prepare(ctx, n, decode(t, signedBody(t, d, 2, evm.PayOptions{})))
		if err != nil || fail != nil {
			t.Fatal(err, fail)
		}
		seen[tx.Signer] = true
		if err := n.Broadcast(ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("signers used: %v", seen)
	}

	poor, err := d.OpenNetwork(ctx, evm.NetworkConfig{Asset: d.Asset.Hex(), SignerKeys: []*ecdsa.PrivateKey{evm.DevKey("no gas")}})
	if err != nil {
		t.Fatal(err)
	}
	defer poor.Close()
	if ok, reason := poor.Available(); ok || !strings.Contains(reason, "below") {
		t.Fatalf("Available = %v %q", ok, reason)
	}
}

func TestAuthorizationID(t *testing.T) {
	d := mustDevChain(t)
	req := decode(t, signedBody(t, d, 1, evm.PayOptions{}))
	id := d.Network.AuthorizationID(req)
	want := strings.ToLower("1337:" + d.Asset.Hex() + ":" + d.Payer.Hex() + ":" + req.Authorization.Nonce)
	if id != want {
		t.Fatalf("id = %s, want %s", id, want)
	}
	// The same authorization in a v2 body has the same id.
	req2 := decode(t, signedBody(t, d, 2, evm.PayOptions{Nonce: (*[32]byte)(mustNonce(t, req.Authorization.Nonce))}))
	if got := d.Network.AuthorizationID(req2); got != id {
		t.Fatalf("v2 id = %s, want %s", got, id)
	}
}

func TestOpenRefusesWrongChainAndTokenFacts(t *testing.T) {
	ctx := context.Background()
	d := mustDevChain(t)
	if _, err := d.OpenNetwork(ctx, evm.NetworkConfig{Name: "base-sepolia", SignerKeys: []*ecdsa.PrivateKey{d.SignerKey}}); err == nil ||
		!strings.Contains(err.Error(), "serves chain 1337") {
		t.Fatalf("wrong chain: %v", err)
	}
	if _, err := d.OpenNetwork(ctx, evm.NetworkConfig{Asset: d.Merchant.Hex(), SignerKeys: []*ecdsa.PrivateKey{d.SignerKey}}); err == nil {
		t.Fatal("opened with an asset that has no code")
	}
	coin, err := d.DeployToken(ctx, "USD Coin", "2")
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.OpenNetwork(ctx, evm.NetworkConfig{Asset: coin.Hex(), SignerKeys: []*ecdsa.PrivateKey{d.SignerKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.TokenName() != "USD Coin" || n.TokenVersion() != "2" || n.Decimals() != 6 || n.ID() != "eip155:1337" || n.V1Name() != "dev" {
		t.Fatalf("facts: %q %q %d %s %s", n.TokenName(), n.TokenVersion(), n.Decimals(), n.ID(), n.V1Name())
	}
	if _, err := evm.Open(ctx, evm.NetworkConfig{Name: "mars", Backend: d.Client, SignerKeys: []*ecdsa.PrivateKey{d.SignerKey}}); err == nil {
		t.Fatal("opened an unknown network name")
	}
}

func mustNonce(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hexDecode(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("nonce %q: %v", s, err)
	}
	return b
}
