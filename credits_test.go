package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/x402"
)

// TestServeSellsCreditsThroughItsFacilitator: under `ardx serve` the
// registry sells credits as an x402 merchant of its own built-in
// facilitator on the dev chain: a keyless caller gets a key from
// monitoring start, POST /credits answers 402 with terms, a payment signed
// for them buys the credits once (a resent payment credits nothing more),
// and the balance survives a restart.
func TestServeSellsCreditsThroughItsFacilitator(t *testing.T) {
	data := t.TempDir()
	args := []string{"serve", "--data", data, "--registry-addr", "127.0.0.1:0", "--facilitator-addr", "127.0.0.1:0", "--no-default-corpus"}
	p := startSelf(t, []string{"registry", "facilitator"}, args...)
	reg := p.url("registry")
	merchant := devMerchant(t, p)

	var terms struct {
		Available bool
		PayTo     string
		Network   string
	}
	// The registry learns its facilitator's address just after both listen.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if getJSON(t, reg+"/x402", &terms); terms.Available {
			break
		}
	}
	if !terms.Available || !strings.EqualFold(terms.PayTo, merchant) {
		t.Fatalf("GET /x402: %+v (merchant %s)", terms, merchant)
	}

	var started struct {
		Key            struct{ Key string }
		CreditsBalance int64
	}
	status, _ := call(t, http.MethodPost, reg+"/monitoring/start", "", `{"domain":"example.com"}`, nil, &started)
	if status != 200 || !strings.HasPrefix(started.Key.Key, "ardx_") {
		t.Fatalf("monitoring start: %d %+v", status, started)
	}
	key := started.Key.Key

	status, hdr := call(t, http.MethodPost, reg+"/credits", key, `{"credits":19000}`, nil, nil)
	if status != http.StatusPaymentRequired {
		t.Fatalf("unpaid POST /credits: %d", status)
	}
	pr, err := x402.DecodePaymentRequired(hdr.Get("PAYMENT-REQUIRED"))
	if err != nil || len(pr.Accepts) != 1 || pr.Accepts[0].Amount != "19000000" {
		t.Fatalf("PAYMENT-REQUIRED: %+v %v", pr, err)
	}
	raw, err := os.ReadFile(filepath.Join(data, "dev-payer.key"))
	if err != nil {
		t.Fatal(err)
	}
	payer, err := crypto.HexToECDSA(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := evm.PaymentV2(payer, pr.Resource, pr.Accepts[0], evm.PayOptions{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	payment, err := x402.EncodeHeader(signed.PaymentPayload)
	if err != nil {
		t.Fatal(err)
	}
	var bought struct {
		Balance     int64
		Replayed    bool
		Transaction string
	}
	status, hdr = call(t, http.MethodPost, reg+"/credits", key, `{"credits":19000}`, http.Header{"PAYMENT-SIGNATURE": {payment}}, &bought)
	if status != 200 || bought.Balance != 19000 || bought.Replayed || bought.Transaction == "" {
		t.Fatalf("paid POST /credits: %d %+v", status, bought)
	}
	var settled x402.SettleResponse
	if err := x402.DecodeHeader(hdr.Get("PAYMENT-RESPONSE"), &settled); err != nil || !settled.Success || settled.Transaction != bought.Transaction {
		t.Fatalf("PAYMENT-RESPONSE: %+v %v", settled, err)
	}
	// The same payment again: the recorded purchase, no new credits.
	status, _ = call(t, http.MethodPost, reg+"/credits", key, `{"credits":19000}`, http.Header{"PAYMENT-SIGNATURE": {payment}}, &bought)
	if status != 200 || bought.Balance != 19000 || !bought.Replayed {
		t.Fatalf("resent payment: %d %+v", status, bought)
	}

	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	p = startSelf(t, []string{"registry", "facilitator"}, args...)
	reg = p.url("registry")
	started.Key.Key, started.CreditsBalance = "", 0
	status, _ = call(t, http.MethodPost, reg+"/monitoring/start", key, `{"domain":"example.com"}`, nil, &started)
	if status != 200 || started.Key.Key != "" || started.CreditsBalance != 19000 {
		t.Fatalf("after restart: %d %+v", status, started)
	}
	p.stop(t, syscall.SIGTERM)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if status, _ := call(t, http.MethodGet, url, "", "", nil, v); status != 200 {
		t.Fatalf("GET %s: %d", url, status)
	}
}

// call sends a request with an optional key, body and headers, decodes a
// JSON answer into v (when not nil) and returns the status and headers.
func call(t *testing.T, method, url, key, body string, hdr http.Header, v any) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusPaymentRequired {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode, resp.Header
}
