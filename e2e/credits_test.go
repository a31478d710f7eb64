//go:build e2e

package e2e

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// creditsResult is what buy-credits.mjs prints.
type creditsResult struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
	Body   struct {
		Credits     int64  `json:"credits"`
		Balance     int64  `json:"balance"`
		Replayed    bool   `json:"replayed"`
		Transaction string `json:"transaction"`
	} `json:"body"`
	PaymentResponse *struct {
		Success     bool   `json:"success"`
		Transaction string `json:"transaction"`
		Network     string `json:"network"`
	} `json:"paymentResponse"`
	Exchanges []struct {
		Method string          `json:"method"`
		Sent   map[string]bool `json:"sent"`
		Status int             `json:"status"`
	} `json:"exchanges"`
}

// TestOfficialClientBuysRegistryCredits: the registry is an x402 merchant
// of a facilitator it calls over HTTP. The official @x402/fetch client
// buys credits from the built binary on geth --dev: 402, then a paid
// retry, 200 with PAYMENT-RESPONSE. The chain shows exactly one Transfer
// from the payer to the registry's payee, the balance shows in the
// registry's GET /me, and it survives a restart of the registry.
func TestOfficialClientBuysRegistryCredits(t *testing.T) {
	dir := npmDir(t)
	e := newPayEnv(t)
	_, fac := e.startFacilitator(t)
	waitSupported(t, fac)

	regData := t.TempDir()
	regArgs := []string{"registry", "--data", regData, "--registry-addr", "127.0.0.1:0", "--no-default-corpus",
		"--facilitator-url", fac, "--pay-to", e.merchant.Hex(), "--pay-network", devNetwork}
	reg := startArdx(t, []string{"registry"}, regArgs...)
	base := reg.url("registry")

	key := startMonitoring(t, base, "")
	if key == "" {
		t.Fatal("monitoring start minted no key")
	}
	payerHex := hex.EncodeToString(crypto.FromECDSA(e.payerKey))
	const credits = 19000
	var res creditsResult
	took := runNode(t, dir, "buy-credits.mjs", &res, base+"/credits", key, "19000", payerHex,
		e.chain.rpcURL, e.chain.chainID.String(), e.token.addr.Hex(), "20000000")
	if res.Error != "" || res.Status != http.StatusOK || res.Body.Balance != credits || res.Body.Replayed {
		t.Fatalf("buy-credits: %+v", res)
	}
	if len(res.Exchanges) != 2 || res.Exchanges[0].Status != http.StatusPaymentRequired || !res.Exchanges[1].Sent["PAYMENT-SIGNATURE"] {
		t.Fatalf("exchanges: %+v, want a 402 then a paid retry", res.Exchanges)
	}
	if res.PaymentResponse == nil || !res.PaymentResponse.Success || res.PaymentResponse.Transaction != res.Body.Transaction {
		t.Fatalf("PAYMENT-RESPONSE: %+v", res.PaymentResponse)
	}
	t.Logf("the official client bought %d credits in %v (node included)", credits, took.Round(time.Millisecond))
	if got := creditsBalance(t, base, key); got != credits {
		t.Fatalf("GET /me balance: %d, want %d", got, credits)
	}
	trs := e.token.transfers(t, e.payer, e.merchant)
	if len(trs) != 1 || trs[0].Value.Int64() != 19_000_000 || trs[0].TxHash != common.HexToHash(res.Body.Transaction) {
		t.Fatalf("transfers payer->payee: %+v, want one of 19000000 in %s", trs, res.Body.Transaction)
	}

	reg.stop(t)
	reg = startArdx(t, []string{"registry"}, regArgs...)
	base = reg.url("registry")
	if got := creditsBalance(t, base, key); got != credits {
		t.Fatalf("balance after a restart: %d, want %d", got, credits)
	}
	if trs := e.token.transfers(t, e.payer, e.merchant); len(trs) != 1 {
		t.Fatalf("transfers after the restart: %d", len(trs))
	}
}

// startMonitoring starts monitoring example.com with key ("" mints one)
// and returns the key it was given (or key).
func startMonitoring(t *testing.T, base, key string) string {
	t.Helper()
	var a struct {
		Key struct {
			Key string `json:"key"`
		} `json:"key"`
	}
	status, body := authed(t, http.MethodPost, base+"/monitoring/start", key, `{"domain":"example.com"}`)
	if status != http.StatusOK || json.Unmarshal(body, &a) != nil {
		t.Fatalf("monitoring start: %d %s", status, body)
	}
	if a.Key.Key != "" {
		return a.Key.Key
	}
	return key
}

// creditsBalance reads the account's balance from GET /me.
func creditsBalance(t *testing.T, base, key string) int64 {
	t.Helper()
	var me struct {
		Credits struct {
			Balance int64 `json:"balance"`
		} `json:"credits"`
	}
	status, body := authed(t, http.MethodGet, base+"/me", key, "")
	if status != http.StatusOK || json.Unmarshal(body, &me) != nil {
		t.Fatalf("GET /me: %d %s", status, body)
	}
	return me.Credits.Balance
}

func authed(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
