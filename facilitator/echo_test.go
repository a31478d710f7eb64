package facilitator_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ardx-dev/ardx/facilitator"
	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/settle"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// echoEnv is a facilitator with the echo merchant and the catalogue on the
// shared dev chain.
type echoEnv struct {
	URL    string
	DC     *evm.DevChain
	DB     *kv.DB
	Wallet common.Address
	Cat    *facilitator.Catalogue
}

type echoOptions struct {
	capPerAddress, capPerDay int64
	noWallet                 bool
	noGas                    bool
}

func newEchoEnv(tb testing.TB, o echoOptions) *echoEnv {
	tb.Helper()
	ctx := context.Background()
	dc := mustDevChain(tb)
	db, err := kv.Open(tb.TempDir(), kv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	cat, err := facilitator.NewCatalogue(db, logger)
	if err != nil {
		tb.Fatal(err)
	}
	echo := &facilitator.EchoConfig{Network: dc.Network.ID(), Chain: dc.Network, DB: db,
		CapPerAddress: o.capPerAddress, CapPerDay: o.capPerDay}
	var wallet common.Address
	if !o.noWallet {
		key := evm.DevKey("echo wallet " + tb.Name())
		wallet = crypto.PubkeyToAddress(key.PublicKey)
		echo.WalletKey = key
		if !o.noGas {
			if err := dc.FundETH(ctx, wallet, big.NewInt(1e18)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	engine, err := settle.NewEngine(db, []settle.Chain{dc.Network}, settle.Options{Logger: logger, OnSettled: cat.OnSettled})
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := facilitator.New(facilitator.Config{
		PublicURL: publicURL, Logger: logger, Networks: []facilitator.NetworkFacts{dc.Network},
		RateLimits: []web.Bucket{
			{Name: facilitator.BucketSettle, Rate: 1e6, Burst: 1e6},
			{Name: facilitator.BucketPaymentsRead, Rate: 1e6, Burst: 1e6},
			{Name: facilitator.BucketDiscovery, Rate: 1e6, Burst: 1e6},
		},
		Echo: echo, Catalogue: cat,
	}, engine)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	tb.Cleanup(func() {
		srv.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = engine.Close(cctx)
		cat.Close()
		db.Close()
	})
	return &echoEnv{URL: srv.URL, DC: dc, DB: db, Wallet: wallet, Cat: cat}
}

// newPayer returns a fresh payer holding 1 test USDC.
func (env *echoEnv) newPayer(tb testing.TB, name string) *ecdsa.PrivateKey {
	tb.Helper()
	key := evm.DevKey("echo payer " + tb.Name() + " " + name)
	if err := env.DC.Mint(context.Background(), crypto.PubkeyToAddress(key.PublicKey), big.NewInt(1_000_000)); err != nil {
		tb.Fatal(err)
	}
	return key
}

// paymentHeader answers /echo's 402 the way the official clients do and
// returns the header name and value to send.
func (env *echoEnv) paymentHeader(tb testing.TB, payer *ecdsa.PrivateKey, version int) (string, string) {
	tb.Helper()
	a := do(tb, "GET", env.URL+"/echo", nil, nil)
	if a.Status != 402 {
		tb.Fatalf("unpaid /echo: status %d body %s", a.Status, a.Body)
	}
	if version == 1 {
		var pr x402.PaymentRequiredV1
		a.decode(tb, &pr)
		req, err := evm.PaymentV1(payer, pr.Accepts[0], evm.PayOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		v, err := x402.EncodeHeader(req.PaymentPayload)
		if err != nil {
			tb.Fatal(err)
		}
		return x402.HeaderXPayment, v
	}
	pr, err := x402.DecodePaymentRequired(a.Header.Get(x402.HeaderPaymentRequired))
	if err != nil {
		tb.Fatal(err)
	}
	req, err := evm.PaymentV2(payer, pr.Resource, pr.Accepts[0], evm.PayOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	req.PaymentPayload.Extensions = pr.Extensions // the client echoes them
	v, err := x402.EncodeHeader(req.PaymentPayload)
	if err != nil {
		tb.Fatal(err)
	}
	return x402.HeaderPaymentSignature, v
}

func (env *echoEnv) balance(tb testing.TB, who common.Address) *big.Int {
	tb.Helper()
	b, err := env.DC.BalanceOf(context.Background(), who)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestEchoPaymentRequired(t *testing.T) {
	env := newEchoEnv(t, echoOptions{})
	a := do(t, "GET", env.URL+"/echo", nil, nil)
	if a.Status != 402 {
		t.Fatalf("status %d, want 402; body %s", a.Status, a.Body)
	}
	pr, err := x402.DecodePaymentRequired(a.Header.Get(x402.HeaderPaymentRequired))
	if err != nil {
		t.Fatalf("PAYMENT-REQUIRED: %v", err)
	}
	if pr.X402Version != 2 || len(pr.Accepts) != 1 || pr.Resource == nil || pr.Resource.URL != publicURL+"/echo" {
		t.Fatalf("v2 terms %+v", pr)
	}
	v2 := pr.Accepts[0]
	if v2.Network != env.DC.Network.ID() || v2.Amount != "1000" || !x402.EqualAddress(v2.PayTo, env.Wallet.Hex()) ||
		!x402.EqualAddress(v2.Asset, env.DC.Asset.Hex()) || v2.Extra == nil || v2.Extra.Name != "USDC" {
		t.Errorf("v2 requirements %+v", v2)
	}
	if _, ok := pr.Extensions["bazaar"]; !ok {
		t.Errorf("v2 terms declare no bazaar extension: %v", pr.Extensions)
	}
	var v1 x402.PaymentRequiredV1
	a.decode(t, &v1)
	if v1.X402Version != 1 || v1.Error == "" || len(v1.Accepts) != 1 {
		t.Fatalf("v1 body %s", a.Body)
	}
	if r := v1.Accepts[0]; r.Network != "dev" || r.MaxAmountRequired != "1000" || r.Resource != publicURL+"/echo" || len(r.OutputSchema) == 0 {
		t.Errorf("v1 requirements %+v", r)
	}

	bad := []struct{ name, header, value string }{
		{"v2 not base64", x402.HeaderPaymentSignature, "!!!"},
		{"v1 not base64", x402.HeaderXPayment, "%%%"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, "GET", env.URL+"/echo", nil, map[string]string{tc.header: tc.value})
			var body x402.PaymentRequiredV1
			a.decode(t, &body)
			if a.Status != 402 || !strings.Contains(body.Error, "invalid") {
				t.Fatalf("status %d error %q", a.Status, body.Error)
			}
		})
	}
	t.Run("terms of another merchant", func(t *testing.T) {
		req, err := evm.PaymentV2(env.newPayer(t, "x"), pr.Resource, env.DC.Network.RequirementsV2(env.DC.Merchant.Hex(), big.NewInt(1000), 60), evm.PayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := x402.EncodeHeader(req.PaymentPayload)
		a := do(t, "GET", env.URL+"/echo", nil, map[string]string{x402.HeaderPaymentSignature: v})
		var body x402.PaymentRequiredV1
		a.decode(t, &body)
		if a.Status != 402 || !strings.Contains(body.Error, "terms") {
			t.Fatalf("status %d error %q", a.Status, body.Error)
		}
	})
}

func TestEchoPaidAndRefunded(t *testing.T) {
	env := newEchoEnv(t, echoOptions{})
	ctx := context.Background()
	for _, version := range []int{2, 1} {
		t.Run("v"+strconv.Itoa(version), func(t *testing.T) {
			payer := env.newPayer(t, "p")
			payerAddr := crypto.PubkeyToAddress(payer.PublicKey)
			payerBefore, walletBefore := env.balance(t, payerAddr), env.balance(t, env.Wallet)
			block, err := env.DC.BlockNumber(ctx)
			if err != nil {
				t.Fatal(err)
			}
			name, value := env.paymentHeader(t, payer, version)
			a := do(t, "GET", env.URL+"/echo?x=1", nil, map[string]string{name: value})
			if a.Status != 200 {
				t.Fatalf("status %d body %s", a.Status, a.Body)
			}
			respHeader := x402.HeaderPaymentResponse
			if version == 1 {
				respHeader = x402.HeaderXPaymentResponse
			}
			sr, err := x402.DecodePaymentResponse(a.Header.Get(respHeader))
			if err != nil || !sr.Success || sr.Transaction == "" || !x402.EqualAddress(sr.Payer, payerAddr.Hex()) {
				t.Fatalf("%s: %+v, %v", respHeader, sr, err)
			}
			var body facilitator.EchoResponse
			a.decode(t, &body)
			if body.Echo.Query != "x=1" || body.Echo.X402Version != version || !body.Paid.Success ||
				body.Paid.Refund.Status != kv.EchoRefunded || body.Paid.Refund.Transaction == "" || body.Paid.Amount != "1000" {
				t.Fatalf("body %s", a.Body)
			}
			if got := env.balance(t, payerAddr); got.Cmp(payerBefore) != 0 {
				t.Errorf("payer balance %s, want unchanged %s", got, payerBefore)
			}
			if got := env.balance(t, env.Wallet); got.Cmp(walletBefore) != 0 {
				t.Errorf("wallet balance %s, want unchanged %s", got, walletBefore)
			}
			transfers, err := env.DC.Transfers(ctx, block+1)
			if err != nil {
				t.Fatal(err)
			}
			var paid, refunded bool
			for _, tr := range transfers {
				if tr.From == payerAddr && tr.To == env.Wallet && tr.Value.Int64() == 1000 && strings.EqualFold(tr.TxHash.Hex(), sr.Transaction) {
					paid = true
				}
				if tr.From == env.Wallet && tr.To == payerAddr && tr.Value.Int64() == 1000 && strings.EqualFold(tr.TxHash.Hex(), body.Paid.Refund.Transaction) {
					refunded = true
				}
			}
			if !paid || !refunded {
				t.Fatalf("transfers %+v: paid %v refunded %v", transfers, paid, refunded)
			}

			// The same payment again: the recorded result, no second refund.
			again := do(t, "GET", env.URL+"/echo", nil, map[string]string{name: value})
			var body2 facilitator.EchoResponse
			again.decode(t, &body2)
			if again.Status != 200 || !body2.Paid.Replayed || body2.Paid.Refund.Transaction != body.Paid.Refund.Transaction {
				t.Fatalf("replay: status %d body %s", again.Status, again.Body)
			}
			if got := env.balance(t, payerAddr); got.Cmp(payerBefore) != 0 {
				t.Errorf("after replay payer balance %s, want %s", got, payerBefore)
			}
		})
	}
}

func TestEchoCaps(t *testing.T) {
	env := newEchoEnv(t, echoOptions{capPerAddress: 1, capPerDay: 2})
	pay := func(payer *ecdsa.PrivateKey) answer {
		name, value := env.paymentHeader(t, payer, 2)
		return do(t, "GET", env.URL+"/echo", nil, map[string]string{name: value})
	}
	alice, bob, carol := env.newPayer(t, "alice"), env.newPayer(t, "bob"), env.newPayer(t, "carol")
	if a := pay(alice); a.Status != 200 {
		t.Fatalf("first payment: %d %s", a.Status, a.Body)
	}
	p := wantProblem(t, pay(alice), 429, web.SlugTooManyRequests)
	if !strings.Contains(p.Detail, "address") {
		t.Errorf("detail %q does not name the per-address cap", p.Detail)
	}
	if a := pay(bob); a.Status != 200 {
		t.Fatalf("second payer: %d %s", a.Status, a.Body)
	}
	carolBefore := env.balance(t, crypto.PubkeyToAddress(carol.PublicKey))
	a := pay(carol)
	p = wantProblem(t, a, 429, web.SlugTooManyRequests)
	if !strings.Contains(p.Detail, "day") {
		t.Errorf("detail %q does not name the daily cap", p.Detail)
	}
	if ra, err := strconv.Atoi(a.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 86400 {
		t.Errorf("Retry-After %q", a.Header.Get("Retry-After"))
	}
	// Refused payments moved nothing.
	if got := env.balance(t, crypto.PubkeyToAddress(carol.PublicKey)); got.Cmp(carolBefore) != 0 {
		t.Errorf("carol's balance %s, want unchanged %s", got, carolBefore)
	}
	var st facilitator.EchoStatus
	do(t, "GET", env.URL+"/echo/status", nil, nil).decode(t, &st)
	if st.Caps.UsedToday != 2 || st.Caps.PerDay != 2 || st.Caps.PerAddressPerDay != 1 {
		t.Errorf("caps %+v", st.Caps)
	}
}

func TestEchoStatus(t *testing.T) {
	tests := []struct {
		name        string
		opts        echoOptions
		wantServing bool
		wantReason  string
	}{
		{"serving", echoOptions{}, true, ""},
		{"no wallet", echoOptions{noWallet: true}, false, "--echo-wallet-key-file"},
		{"wallet without gas", echoOptions{noGas: true}, false, "gas"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newEchoEnv(t, tc.opts)
			a := do(t, "GET", env.URL+"/echo/status", nil, nil)
			var st facilitator.EchoStatus
			a.decode(t, &st)
			if a.Status != 200 || st.Serving != tc.wantServing || !strings.Contains(st.Reason, tc.wantReason) || st.Network != env.DC.Network.ID() {
				t.Fatalf("status %d %+v", a.Status, st)
			}
			echo := do(t, "GET", env.URL+"/echo", nil, nil)
			if tc.wantServing {
				if echo.Status != 402 {
					t.Fatalf("/echo %d", echo.Status)
				}
				return
			}
			p := wantProblem(t, echo, 503, web.SlugServiceUnavailable)
			if !strings.Contains(p.Detail, tc.wantReason) {
				t.Errorf("detail %q", p.Detail)
			}
		})
	}
}

// waitCatalogue polls until the catalogue holds n entries (it records
// settled payments on its own goroutine).
func waitCatalogue(tb testing.TB, cat *facilitator.Catalogue, n int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for cat.Len() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("catalogue holds %d entries, want %d", cat.Len(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bazaarSettle builds a /settle body paying the dev merchant for resource
// with the given bazaar declaration echoed in the payload.
func bazaarSettle(tb testing.TB, dc *evm.DevChain, payer *ecdsa.PrivateKey, resource, bazaar string) []byte {
	tb.Helper()
	req, err := evm.PaymentV2(payer, &x402.ResourceInfo{URL: resource, Description: "a paid thing"},
		dc.Network.RequirementsV2(dc.Merchant.Hex(), big.NewInt(10), 60), evm.PayOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	if bazaar != "" {
		req.PaymentPayload.Extensions = map[string]json.RawMessage{"bazaar": json.RawMessage(bazaar)}
	}
	b, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

type discoveryPage struct {
	X402Version int                         `json:"x402Version"`
	Items       []facilitator.CatalogueItem `json:"items"`
	Pagination  struct{ Limit, Offset, Total int }
}

func TestCatalogue(t *testing.T) {
	env := newEchoEnv(t, echoOptions{})
	payer := env.newPayer(t, "cat")
	const schema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["input"],"properties":{"input":{"type":"object","required":["type"]}}}`
	settles := []struct {
		name, resource, bazaar string
	}{
		{"http GET with route template", "https://api.example.test/weather/paris?units=c",
			`{"info":{"input":{"type":"http","method":"GET","queryParams":{"units":"c"}},"output":{"type":"json"}},"schema":` + schema + `,"routeTemplate":"/weather/:city"}`},
		{"mcp tool", "https://tools.example.test/mcp",
			`{"info":{"input":{"type":"mcp","toolName":"forecast","inputSchema":{"type":"object"}}},"schema":` + schema + `}`},
		{"info failing its schema", "https://bad.example.test/x", `{"info":{"output":{}},"schema":` + schema + `}`},
		{"unsafe route template", "https://bad.example.test/y", `{"info":{"input":{"type":"http","method":"GET"}},"routeTemplate":"/a/../../etc"}`},
		{"no bazaar", "https://plain.example.test/z", ""},
	}
	for _, s := range settles {
		a := do(t, "POST", env.URL+"/settle", bazaarSettle(t, env.DC, payer, s.resource, s.bazaar), nil)
		var sr x402.SettleResponse
		a.decode(t, &sr)
		if !sr.Success {
			t.Fatalf("%s: settle %s", s.name, a.Body)
		}
	}
	// A v1 payment to /echo (outputSchema) is catalogued too.
	name, value := env.paymentHeader(t, payer, 1)
	if a := do(t, "GET", env.URL+"/echo", nil, map[string]string{name: value}); a.Status != 200 {
		t.Fatalf("echo v1: %d %s", a.Status, a.Body)
	}
	waitCatalogue(t, env.Cat, 3)
	time.Sleep(100 * time.Millisecond) // let any wrongly accepted entry land too
	if n := env.Cat.Len(); n != 3 {
		t.Fatalf("catalogue holds %d entries, want 3", n)
	}

	var all discoveryPage
	do(t, "GET", env.URL+"/discovery/resources", nil, nil).decode(t, &all)
	if all.X402Version != 2 || all.Pagination.Total != 3 || all.Pagination.Limit != 20 || len(all.Items) != 3 {
		t.Fatalf("listing %+v", all)
	}
	byResource := map[string]facilitator.CatalogueItem{}
	for _, it := range all.Items {
		byResource[it.Resource] = it
		if _, err := time.Parse(time.RFC3339, it.LastUpdated); err != nil {
			t.Errorf("lastUpdated %q is not ISO 8601: %v", it.LastUpdated, err)
		}
	}
	if it := byResource["https://api.example.test/weather/:city"]; it.Type != "http" || it.Method != "GET" || it.X402Version != 2 || it.RouteTemplate != "/weather/:city" {
		t.Errorf("route-template item %+v", it)
	}
	if it := byResource["https://tools.example.test/mcp"]; it.Type != "mcp" || it.ToolName != "forecast" {
		t.Errorf("mcp item %+v", it)
	}
	if it := byResource[publicURL+"/echo"]; it.X402Version != 1 || it.Method != "GET" || it.Metadata.Network != "dev" {
		t.Errorf("echo item %+v", it)
	}

	filters := []struct {
		query     string
		wantTotal int
		wantItems int
	}{
		{"type=mcp", 1, 1},
		{"type=http", 2, 2},
		{"network=eip155:1337", 3, 3}, // v1 "dev" is the same chain
		{"network=dev", 3, 3},
		{"network=eip155:8453", 0, 0},
		{"limit=1&offset=1", 3, 1},
		{"limit=2&offset=2", 3, 1},
		{"offset=5", 3, 0},
	}
	for _, tc := range filters {
		t.Run(tc.query, func(t *testing.T) {
			var page discoveryPage
			a := do(t, "GET", env.URL+"/discovery/resources?"+tc.query, nil, nil)
			a.decode(t, &page)
			if a.Status != 200 || page.Pagination.Total != tc.wantTotal || len(page.Items) != tc.wantItems {
				t.Fatalf("status %d page %+v", a.Status, page)
			}
		})
	}
	invalid := []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=101", "limit"}, {"limit=ten", "limit"}, {"offset=-1", "offset"},
		{"offset=x", "offset"}, {"type=grpc", "type"}, {"network=", "network"},
	}
	for _, tc := range invalid {
		t.Run("invalid "+tc.query, func(t *testing.T) {
			p := wantProblem(t, do(t, "GET", env.URL+"/discovery/resources?"+tc.query, nil, nil), 422, web.SlugUnprocessable)
			if len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
				t.Fatalf("errors %+v, want field %s", p.Errors, tc.field)
			}
		})
	}

	if got := env.Cat.Search("forecast", "", 5); len(got) != 1 || got[0].ToolName != "forecast" {
		t.Errorf("Search(forecast) = %+v", got)
	}
	if got := env.Cat.Search("weather", "eip155:8453", 5); len(got) != 0 {
		t.Errorf("Search on another network = %+v", got)
	}

	var stats facilitator.DiscoveryStats
	do(t, "GET", env.URL+"/discovery/stats", nil, nil).decode(t, &stats)
	if stats.Catalogue.Size != 3 || stats.Catalogue.ByType["mcp"] != 1 || stats.Settlements.Succeeded < 6 {
		t.Errorf("stats %+v", stats)
	}

	// The catalogue is durable: a new one over the same store lists the same.
	again, err := facilitator.NewCatalogue(env.DB, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Len() != 3 {
		t.Errorf("reloaded catalogue holds %d", again.Len())
	}
}
