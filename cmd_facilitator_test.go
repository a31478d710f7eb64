package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator"
	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
)

// These tests restart the facilitator on a data dir a previous process left
// with settlements pending, on the dev chain kept in that dir: the service
// answers at once and resolves the backlog in the background.

// leftPending is a settlement a previous process recorded and never saw
// final.
type leftPending struct {
	body []byte
	rec  kv.Settlement
}

// previousProcess opens the dev chain and kv of dataDir as the process
// before the restart did, lets prepare record settlements there, and
// closes both.
func previousProcess(t *testing.T, dataDir string, prepare func(d *evm.DevChain, db *kv.DB)) {
	t.Helper()
	ctx := context.Background()
	d, err := evm.OpenDevChain(ctx, nil, filepath.Join(dataDir, "devchain"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := kv.Open(dataDir, kv.Options{})
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	prepare(d, db)
	db.Close()
	d.Close()
}

// recordSettlement signs body's transfer from the dev signer with nonce and
// fees (nil: the chain's current ones) and records it as a pending intent,
// never broadcast.
func recordSettlement(t *testing.T, d *evm.DevChain, db *kv.DB, body []byte, nonce uint64, tip, feeCap *big.Int) leftPending {
	t.Helper()
	ctx := context.Background()
	req, err := x402.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	tr, fail, err := d.Network.Simulate(ctx, req)
	if err != nil || fail != nil {
		t.Fatalf("simulate: %+v %v", fail, err)
	}
	if tip == nil {
		head, err := d.Client.HeaderByNumber(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		tip = big.NewInt(1e9)
		feeCap = new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	}
	tx, err := types.SignNewTx(d.SignerKey, types.LatestSignerForChainID(d.ChainID), &types.DynamicFeeTx{
		ChainID: d.ChainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: tr.Gas, To: &d.Asset, Data: tr.Data,
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tx.MarshalBinary()
	key, _ := settle.BodyKey(body)
	now := time.Now().UTC()
	rec := kv.Settlement{BodyKey: key, Network: d.Network.ID(), Body: body, CreatedAt: now, Intent: &kv.SettlementIntent{
		AuthorizationID: d.Network.AuthorizationID(req), Signer: d.Signer.Hex(), Nonce: nonce,
		TxHash: tx.Hash().Hex(), RawTx: raw, RecordedAt: now, Genesis: d.Network.Genesis(),
	}}
	if err := db.RecordSettlementIntent(rec); err != nil {
		t.Fatal(err)
	}
	return leftPending{body: body, rec: rec}
}

func devBody(t *testing.T, d *evm.DevChain, amount int64, resource string) []byte {
	t.Helper()
	r, err := evm.PaymentV2(d.PayerKey, &x402.ResourceInfo{URL: resource}, d.Network.RequirementsV2(d.Merchant.Hex(), big.NewInt(amount), 60), evm.PayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startDevFacilitator starts the facilitator on the dev chain in dataDir and
// checks that /health answers at once.
func startDevFacilitator(t *testing.T, dataDir string, fc facilitatorConfig) (*runningFacilitator, string) {
	t.Helper()
	c := &cli{getenv: envOf(nil), stdout: io.Discard, stderr: io.Discard}
	c.global.dataDir = dataDir
	fc.addr, fc.echoNetwork, fc.echoCapPerAddress, fc.echoCapPerDay = "127.0.0.1:0", "dev", 1, 1
	fc.probeInterval = time.Hour
	if fc.settleTimeout == 0 {
		fc.settleTimeout = 5 * time.Second
	}
	rf, err := c.startFacilitator(context.Background(), &fc, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + rf.srv.ListenAddr()
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health right after start = %d", resp.StatusCode)
	}
	return rf, base
}

func closeFacilitator(t *testing.T, rf *runningFacilitator) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rf.close(ctx); err != nil {
		t.Error(err)
	}
	return time.Since(start)
}

func postSettle(t *testing.T, base string, body []byte) (x402.SettleResponse, bool) {
	t.Helper()
	resp, err := http.Post(base+"/settle", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sr x402.SettleResponse
	if err := json.NewDecoder(resp.Body).Decode(&sr); err != nil {
		t.Fatal(err)
	}
	return sr, resp.Header.Get("Idempotency-Replayed") == "true"
}

// settleUntilFinal posts body until its outcome is final; every pending
// answer on the way must name one of hashes.
func settleUntilFinal(t *testing.T, base string, body []byte, hashes ...string) (x402.SettleResponse, bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		sr, replayed := postSettle(t, base, body)
		if sr.ErrorReason != x402.ReasonSettlementPending {
			return sr, replayed
		}
		if len(hashes) > 0 && !contains(hashes, sr.Transaction) {
			t.Fatalf("pending answer names transaction %q, want one of %v", sr.Transaction, hashes)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still pending after 60 s: %+v", sr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

func transfersToMerchant(t *testing.T, d *evm.DevChain) int {
	t.Helper()
	evs, err := d.Transfers(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.To == d.Merchant {
			n++
		}
	}
	return n
}

// TestFacilitatorRestartServesFirstFillsGapAndResolvesGoneChain: the data
// dir holds a settlement whose transaction sits behind a nonce gap (the
// nonce before it was taken and never sent) and one signed on a chain that
// is gone. The restarted facilitator answers at once; the gap is filled and
// the first settles exactly once; the second fails, freed, and /status.json
// says why; new settlements follow.
func TestFacilitatorRestartServesFirstFillsGapAndResolvesGoneChain(t *testing.T) {
	dataDir := t.TempDir()
	var gap, gone leftPending
	previousProcess(t, dataDir, func(d *evm.DevChain, db *kv.DB) {
		next, err := d.Client.PendingNonceAt(context.Background(), d.Signer)
		if err != nil {
			t.Fatal(err)
		}
		gap = recordSettlement(t, d, db, devBody(t, d, 1000, "https://merchant.example/gap"), next+1, nil, nil)
		gone = recordSettlement(t, d, db, devBody(t, d, 2000, "https://merchant.example/gone"), next+2, nil, nil)
		rec := gone.rec
		rec.Intent.Genesis = "0x" + strings.Repeat("ab", 32) // another chain's
		if err := db.RecordSettlementIntent(rec); err != nil {
			t.Fatal(err)
		}
	})

	rf, base := startDevFacilitator(t, dataDir, facilitatorConfig{settleTimeout: 100 * time.Millisecond})
	defer closeFacilitator(t, rf)

	sr, replayed := settleUntilFinal(t, base, gap.body, gap.rec.Intent.TxHash)
	if !sr.Success || !strings.EqualFold(sr.Transaction, gap.rec.Intent.TxHash) || !replayed {
		t.Fatalf("settlement behind the gap = %+v replayed=%t, want success with %s, replayed", sr, replayed, gap.rec.Intent.TxHash)
	}
	sr, replayed = settleUntilFinal(t, base, gone.body)
	if sr.Success || sr.ErrorReason != x402.ReasonTransactionFailed || !strings.Contains(sr.ErrorMessage, "gone") || !replayed {
		t.Fatalf("settlement on the gone chain = %+v replayed=%t", sr, replayed)
	}
	var doc facilitator.StatusDocument
	resp, err := http.Get(base + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || doc.Settlements.Reconciliation.ChainGone != 1 || !strings.Contains(doc.Settlements.Reconciliation.LastChainGone, "gone") {
		t.Fatalf("/status.json reconciliation = %+v, %v", doc.Settlements.Reconciliation, err)
	}

	// The chain after the restart is the one before it: new settlements
	// take the nonces after the filled gap, and the freed authorization of
	// the gone chain's body settles under another body.
	fresh := devBody(t, rf.dev, 3000, "https://merchant.example/after")
	if sr, _ := settleUntilFinal(t, base, fresh); !sr.Success {
		t.Fatalf("new settlement after the restart = %+v", sr)
	}
	if n := transfersToMerchant(t, rf.dev); n != 2 {
		t.Fatalf("transfers to the merchant = %d, want 2 (the gap's body and the new one)", n)
	}
}

// TestFacilitatorStopsDuringReconciliationThenUnsticks: a recorded
// transaction whose fee cap is below the base fee never mines. A restart
// re-broadcasts it and waits; a stop during that wait (with a settle
// request waiting on it) takes seconds, and the settlement stays pending.
// The next start, with a short --stuck-after, sends it again, replaces it at
// a higher fee with the same nonce and settles it exactly once, under the
// replacement's hash, with both hashes recorded.
func TestFacilitatorStopsDuringReconciliationThenUnsticks(t *testing.T) {
	dataDir := t.TempDir()
	var stuck leftPending
	previousProcess(t, dataDir, func(d *evm.DevChain, db *kv.DB) {
		next, err := d.Client.PendingNonceAt(context.Background(), d.Signer)
		if err != nil {
			t.Fatal(err)
		}
		stuck = recordSettlement(t, d, db, devBody(t, d, 1000, "https://merchant.example/stuck"), next, big.NewInt(1), big.NewInt(1))
	})

	rf, base := startDevFacilitator(t, dataDir, facilitatorConfig{settleTimeout: 20 * time.Second})
	answered := make(chan x402.SettleResponse, 1)
	go func() {
		sr, _ := postSettle(t, base, stuck.body)
		answered <- sr
	}()
	time.Sleep(300 * time.Millisecond) // the request waits on the reconciliation
	if took := closeFacilitator(t, rf); took > 10*time.Second {
		t.Fatalf("stop during reconciliation took %s", took)
	}
	if sr := <-answered; sr.ErrorReason != x402.ReasonSettlementPending || !strings.EqualFold(sr.Transaction, stuck.rec.Intent.TxHash) {
		t.Fatalf("request waiting through the stop = %+v, want settlement_pending with %s", sr, stuck.rec.Intent.TxHash)
	}

	rf, base = startDevFacilitator(t, dataDir, facilitatorConfig{settleTimeout: 100 * time.Millisecond, stuckAfter: 200 * time.Millisecond})
	defer closeFacilitator(t, rf)
	sr, replayed := settleUntilFinal(t, base, stuck.body)
	if !sr.Success || !replayed {
		t.Fatalf("stuck settlement = %+v replayed=%t", sr, replayed)
	}
	key, _ := settle.BodyKey(stuck.body)
	rec, err := rf.db.Settlement(key)
	if err != nil {
		t.Fatal(err)
	}
	if strings.EqualFold(sr.Transaction, stuck.rec.Intent.TxHash) || !contains(rec.Intent.Replaced, stuck.rec.Intent.TxHash) || !strings.EqualFold(rec.Intent.TxHash, sr.Transaction) {
		t.Fatalf("outcome %s, intent %+v: want the replacement mined and the original recorded as replaced", sr.Transaction, rec.Intent)
	}
	if n := transfersToMerchant(t, rf.dev); n != 1 {
		t.Fatalf("transfers to the merchant = %d, want 1", n)
	}
}

// TestFacilitatorStartsWithOneDeadRPC: base-sepolia's RPC does not answer.
// The facilitator starts at once, serves the dev chain, and lists
// base-sepolia as unavailable and outside kinds.
func TestFacilitatorStartsWithOneDeadRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	c := &cli{getenv: envOf(map[string]string{"ARDX_SIGNER_KEYS": hex.EncodeToString(crypto.FromECDSA(evm.DevKey("other signer")))}), stdout: io.Discard, stderr: io.Discard}
	c.global.dataDir = t.TempDir()
	fc := facilitatorConfig{
		addr: "127.0.0.1:0", networks: []string{"dev", "base-sepolia"}, rpcs: []string{"base-sepolia=" + dead},
		settleTimeout: 5 * time.Second, probeInterval: time.Hour, echoNetwork: "dev", echoCapPerAddress: 1, echoCapPerDay: 1,
	}
	rf, err := c.startFacilitator(context.Background(), &fc, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start with a dead RPC: %v", err)
	}
	defer closeFacilitator(t, rf)
	resp, err := http.Get("http://" + rf.srv.ListenAddr() + "/supported")
	if err != nil {
		t.Fatal(err)
	}
	var sup facilitator.SupportedResponse
	err = json.NewDecoder(resp.Body).Decode(&sup)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range sup.Kinds {
		if k.Network == "eip155:84532" || k.Network == "base-sepolia" {
			t.Errorf("dead network in kinds: %+v", sup.Kinds)
		}
	}
	if st := sup.Networks["eip155:84532"]; st.Available || st.Reason == "" {
		t.Errorf("dead network entry = %+v, want unavailable with a reason", st)
	}
	if st := sup.Networks["eip155:1337"]; !st.Available {
		t.Errorf("dev network entry = %+v, want available", st)
	}
	body := devBody(t, rf.dev, 1000, "https://merchant.example/live")
	if sr, _ := settleUntilFinal(t, "http://"+rf.srv.ListenAddr(), body); !sr.Success {
		t.Fatalf("settle on the live network = %+v", sr)
	}
}
