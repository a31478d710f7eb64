package facilitator_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
	"github.com/ardx-dev/ardx/internal/golden"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// publicURL is the facilitator's public URL in tests; problem types hang
// off it.
const publicURL = "https://pay.example.test"

// testEnv is one facilitator served by httptest on the in-process dev chain.
type testEnv struct {
	URL    string
	Svc    *facilitator.Service
	Engine *settle.Engine
	Net    *evm.Network
	Payer  *ecdsa.PrivateKey
	PayTo  common.Address
}

type envOption func(*facilitator.Config, *[]settle.Chain)

// withBuckets replaces the rate-limit buckets.
func withBuckets(spec string) envOption {
	return func(c *facilitator.Config, _ *[]settle.Chain) {
		b, off, err := facilitator.ParseRateLimits(spec)
		if err != nil {
			panic(err)
		}
		c.RateLimits, c.RateLimitsOff = b, off
	}
}

// withNetwork adds a further network to both the engine and /supported.
func withNetwork(n chainFacts) envOption {
	return func(c *facilitator.Config, chains *[]settle.Chain) {
		c.Networks = append(c.Networks, n)
		*chains = append(*chains, n)
	}
}

// chainFacts is what a test network must be for both the engine and the
// service.
type chainFacts interface {
	settle.Chain
	facilitator.NetworkFacts
}

// unavailable is a network that reports it cannot settle, as the evm
// package's health check does when its RPC fails.
type unavailable struct {
	chainFacts
	id, v1 string
}

func (u unavailable) ID() string                { return u.id }
func (u unavailable) V1Name() string            { return u.v1 }
func (u unavailable) Available() (bool, string) { return false, "rpc unreachable" }

// devChain is shared by the tests of this package: starting the simulated
// chain and deploying the token is the slow part.
var devChain *evm.DevChain

func mustDevChain(tb testing.TB) *evm.DevChain {
	tb.Helper()
	if devChain == nil {
		dc, err := evm.NewDevChain(context.Background(), slog.New(slog.DiscardHandler))
		if err != nil {
			tb.Fatalf("dev chain: %v", err)
		}
		devChain = dc
	}
	return devChain
}

func newTestEnv(tb testing.TB, opts ...envOption) *testEnv {
	tb.Helper()
	dc := mustDevChain(tb)
	db, err := kv.Open(tb.TempDir(), kv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })

	cfg := facilitator.Config{
		PublicURL: publicURL,
		Logger:    slog.New(slog.DiscardHandler),
		Networks:  []facilitator.NetworkFacts{dc.Network},
		// Generous limits so only the rate-limit tests meet them.
		RateLimits: []web.Bucket{
			{Name: facilitator.BucketSettle, Rate: 1e6, Burst: 1e6},
			{Name: facilitator.BucketPaymentsRead, Rate: 1e6, Burst: 1e6},
			{Name: facilitator.BucketDiscovery, Rate: 1e6, Burst: 1e6},
		},
	}
	chains := []settle.Chain{dc.Network}
	for _, o := range opts {
		o(&cfg, &chains)
	}
	engine, err := settle.NewEngine(db, chains, settle.Options{Logger: cfg.Logger})
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := facilitator.New(cfg, engine)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	tb.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = svc.Close(ctx)
		_ = engine.Close(ctx)
	})
	return &testEnv{URL: srv.URL, Svc: svc, Engine: engine, Net: dc.Network, Payer: dc.PayerKey, PayTo: dc.Merchant}
}

// payment builds a signed request body of the given version paying amount
// (smallest unit) to env.PayTo, with the same signing code `ardx pay` uses.
func (env *testEnv) payment(tb testing.TB, version int, amount int64) []byte {
	tb.Helper()
	var body any
	var err error
	if version == 1 {
		req := env.Net.RequirementsV1(env.PayTo.Hex(), big.NewInt(amount), 60, "https://shop.example.test/item", "an item")
		body, err = evm.PaymentV1(env.Payer, req, evm.PayOptions{})
	} else {
		req := env.Net.RequirementsV2(env.PayTo.Hex(), big.NewInt(amount), 60)
		body, err = evm.PaymentV2(env.Payer, &x402.ResourceInfo{URL: "https://shop.example.test/item"}, req, evm.PayOptions{})
	}
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

func (a answer) decode(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(a.Body, v); err != nil {
		tb.Fatalf("status %d body %q: %v", a.Status, a.Body, err)
	}
}

func do(tb testing.TB, method, url string, body []byte, hdr map[string]string) answer {
	tb.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

func TestVerify(t *testing.T) {
	env := newTestEnv(t)
	payer := crypto.PubkeyToAddress(env.Payer.PublicKey).Hex()
	// A JSON object exactly one byte over the limit.
	prefix := `{"x402Version":2,"pad":"`
	tooLarge := []byte(prefix + strings.Repeat("a", facilitator.MaxBodyBytes+1-len(prefix)-2) + `"}`)
	if len(tooLarge) != 65537 {
		t.Fatalf("test body is %d bytes", len(tooLarge))
	}

	tests := []struct {
		name       string
		body       []byte
		wantStatus int
		wantValid  bool
		wantReason string
		wantPayer  string
	}{
		{name: "valid v2", body: env.payment(t, 2, 10_000), wantStatus: 200, wantValid: true, wantPayer: payer},
		{name: "valid v1", body: env.payment(t, 1, 10_000), wantStatus: 200, wantValid: true, wantPayer: payer},
		{name: "invalid payment is 200", body: tamper(t, env.payment(t, 2, 10_000), "paymentRequirements", "amount", "20000"),
			wantStatus: 200, wantReason: x402.ReasonAuthorizationValueMismatch, wantPayer: payer},
		{name: "not JSON", body: []byte("isValid? yes"), wantStatus: 400, wantReason: x402.ReasonInvalidPayload},
		{name: "empty body", body: []byte{}, wantStatus: 400, wantReason: x402.ReasonInvalidPayload},
		{name: "JSON but not x402", body: []byte(`{"hello":"world"}`), wantStatus: 400, wantReason: x402.ReasonInvalidPayload},
		{name: "65537 bytes", body: tooLarge, wantStatus: 413, wantReason: x402.ReasonInvalidPayload},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, "POST", env.URL+"/verify", tc.body, nil)
			if a.Status != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %s", a.Status, tc.wantStatus, a.Body)
			}
			if ct := a.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json (payment shape, not a problem)", ct)
			}
			var vr x402.VerifyResponse
			a.decode(t, &vr)
			if vr.IsValid != tc.wantValid || vr.InvalidReason != tc.wantReason {
				t.Fatalf("got isValid %v reason %q (%s), want %v %q", vr.IsValid, vr.InvalidReason, vr.InvalidMessage, tc.wantValid, tc.wantReason)
			}
			if !tc.wantValid && vr.InvalidMessage == "" {
				t.Errorf("invalid answer without invalidMessage")
			}
			if tc.wantPayer != "" && !strings.EqualFold(vr.Payer, tc.wantPayer) {
				t.Errorf("payer %q, want %q", vr.Payer, tc.wantPayer)
			}
		})
	}
}

// tamper sets one member of a top-level object of a JSON body.
func tamper(tb testing.TB, body []byte, object, member string, value any) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		tb.Fatal(err)
	}
	m[object].(map[string]any)[member] = value
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestSettle(t *testing.T) {
	env := newTestEnv(t)
	body := env.payment(t, 2, 12_345)

	first := do(t, "POST", env.URL+"/settle", body, map[string]string{"Idempotency-Key": "order-1"})
	if first.Status != 200 {
		t.Fatalf("settle: status %d body %s", first.Status, first.Body)
	}
	var sr x402.SettleResponse
	first.decode(t, &sr)
	if !sr.Success || sr.Amount != "12345" || sr.Network != env.Net.ID() || len(sr.Transaction) != 66 {
		t.Fatalf("settle answer %+v, want success with amount 12345, network %s and a tx hash", sr, env.Net.ID())
	}
	if !strings.EqualFold(sr.Payer, crypto.PubkeyToAddress(env.Payer.PublicKey).Hex()) {
		t.Errorf("payer %q", sr.Payer)
	}
	if got := first.Header.Get("Idempotency-Replayed"); got != "" {
		t.Errorf("first settlement has Idempotency-Replayed %q", got)
	}

	t.Run("replay of the identical body", func(t *testing.T) {
		again := do(t, "POST", env.URL+"/settle", body, nil)
		if again.Status != 200 || again.Header.Get("Idempotency-Replayed") != "true" {
			t.Fatalf("status %d, Idempotency-Replayed %q; want 200 and true", again.Status, again.Header.Get("Idempotency-Replayed"))
		}
		var rr x402.SettleResponse
		again.decode(t, &rr)
		if rr != sr {
			t.Fatalf("replay %+v differs from the recorded outcome %+v", rr, sr)
		}
	})

	t.Run("same key, different body is a 422 problem in the settle shape", func(t *testing.T) {
		other := env.payment(t, 2, 1)
		a := do(t, "POST", env.URL+"/settle", other, map[string]string{"Idempotency-Key": "order-1"})
		p := wantProblem(t, a, http.StatusUnprocessableEntity, web.SlugUnprocessable)
		if p.Detail == "" {
			t.Errorf("problem without detail")
		}
		var fr x402.SettleResponse
		a.decode(t, &fr)
		var m map[string]any
		a.decode(t, &m)
		if fr.Success || fr.ErrorReason != "idempotency_key_conflict" || fr.ErrorMessage != p.Detail ||
			fr.Network != env.Net.ID() || !strings.EqualFold(fr.Payer, sr.Payer) || m["success"] != false || m["transaction"] != "" {
			t.Fatalf("422 body %s is not also a failed settle response", a.Body)
		}
	})

	t.Run("invalid payment is 200 with success false", func(t *testing.T) {
		bad := tamper(t, env.payment(t, 2, 10), "paymentRequirements", "payTo", "0x000000000000000000000000000000000000dEaD")
		a := do(t, "POST", env.URL+"/settle", bad, nil)
		var fr x402.SettleResponse
		a.decode(t, &fr)
		if a.Status != 200 || fr.Success || fr.ErrorReason == "" || fr.Transaction != "" || fr.Network != env.Net.ID() {
			t.Fatalf("status %d answer %+v; want 200, success false, a reason, no transaction, network echoed", a.Status, fr)
		}
	})

	t.Run("not JSON is 400 invalid_payload in the settle shape", func(t *testing.T) {
		a := do(t, "POST", env.URL+"/settle", []byte("{"), nil)
		if a.Status != 400 {
			t.Fatalf("status %d", a.Status)
		}
		var m map[string]any
		a.decode(t, &m)
		if m["success"] != false || m["errorReason"] != x402.ReasonInvalidPayload || m["transaction"] != "" || m["network"] != "" {
			t.Fatalf("body %s is not the failed settle shape", a.Body)
		}
	})

	t.Run("65537 bytes is 413 in the settle shape", func(t *testing.T) {
		big := bytes.Repeat([]byte(" "), facilitator.MaxBodyBytes+1)
		a := do(t, "POST", env.URL+"/settle", big, nil)
		var fr x402.SettleResponse
		a.decode(t, &fr)
		if a.Status != 413 || fr.Success || fr.ErrorReason != x402.ReasonInvalidPayload {
			t.Fatalf("status %d answer %s", a.Status, a.Body)
		}
	})
}

// wantProblem checks an RFC 9457 answer and returns it.
func wantProblem(tb testing.TB, a answer, status int, slug string) web.Problem {
	tb.Helper()
	if a.Status != status {
		tb.Fatalf("status %d, want %d; body %s", a.Status, status, a.Body)
	}
	if ct := a.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p web.Problem
	a.decode(tb, &p)
	if want := publicURL + "/developers#" + slug; p.Type != want || p.Status != status || p.Title == "" {
		tb.Fatalf("problem %+v, want type %s status %d", p, want, status)
	}
	return p
}

func TestProblems(t *testing.T) {
	env := newTestEnv(t)
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantSlug   string
	}{
		{"unknown path", "GET", "/nope", 404, web.SlugNotFound},
		{"no v1 prefix", "POST", "/v1/verify", 404, web.SlugNotFound},
		{"no v1 prefix on GET", "GET", "/v1/supported", 404, web.SlugNotFound},
		{"trailing slash is not redirected", "POST", "/verify/", 404, web.SlugNotFound},
		{"wrong method", "DELETE", "/verify", 405, web.SlugMethodNotAllowed},
		{"post to supported", "POST", "/supported", 405, web.SlugMethodNotAllowed},
	}
	golden := map[string]json.RawMessage{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, tc.method, env.URL+tc.path, []byte("{}"), nil)
			wantProblem(t, a, tc.wantStatus, tc.wantSlug)
			if strings.Contains(string(a.Body), "goroutine") || strings.Contains(string(a.Body), ".go:") {
				t.Fatalf("problem leaks internals: %s", a.Body)
			}
			golden[tc.method+" "+tc.path] = json.RawMessage(bytes.TrimSpace(a.Body))
		})
	}
	checkGolden(t, "problems.golden.json", golden)
}

func TestHints(t *testing.T) {
	env := newTestEnv(t)
	for _, path := range []string{"/verify", "/settle"} {
		t.Run(path, func(t *testing.T) {
			a := do(t, "GET", env.URL+path, nil, nil)
			if a.Status != 200 {
				t.Fatalf("status %d body %s", a.Status, a.Body)
			}
			var h facilitator.Hint
			a.decode(t, &h)
			if h.Method != "POST" || h.Path != path || h.MaxBodyBytes != facilitator.MaxBodyBytes || h.Body["paymentPayload"] == "" {
				t.Fatalf("hint %+v does not name the expected body", h)
			}
			if path == "/settle" && h.Headers["Idempotency-Key"] == "" {
				t.Errorf("settle hint does not mention Idempotency-Key")
			}
			req, err := x402.DecodeRequest(h.Example)
			if err != nil {
				t.Fatalf("example does not decode: %v", err)
			}
			if req.X402Version != 2 {
				t.Fatalf("example is v%d, want v2", req.X402Version)
			}
			// The example is signed for real: its signature recovers to its payer.
			ta, err := evm.ParseAuthorization(req.Authorization)
			if err != nil {
				t.Fatal(err)
			}
			chainID, _ := evm.ChainIDOf(req.Requirements.Network)
			d := evm.Domain{Name: req.Requirements.Name, Version: req.Requirements.Version, ChainID: chainID,
				VerifyingContract: common.HexToAddress(req.Requirements.Asset)}
			sig, err := hex.DecodeString(strings.TrimPrefix(req.Signature, "0x"))
			if err != nil {
				t.Fatal(err)
			}
			who, err := evm.Recover(evm.Digest(d, ta), sig)
			if err != nil || who != ta.From {
				t.Fatalf("example signature recovers to %s (%v), want %s", who.Hex(), err, ta.From.Hex())
			}
		})
	}
}

func TestSupported(t *testing.T) {
	down := unavailable{id: "eip155:84532", v1: "base-sepolia"}
	env := newTestEnv(t, func(c *facilitator.Config, chains *[]settle.Chain) {
		down.chainFacts = mustDevChain(t).Network
		withNetwork(down)(c, chains)
	})
	a := do(t, "GET", env.URL+"/supported", nil, nil)
	if a.Status != 200 {
		t.Fatalf("status %d body %s", a.Status, a.Body)
	}
	var sup facilitator.SupportedResponse
	a.decode(t, &sup)

	wantKinds := []facilitator.SupportedKind{
		{X402Version: 2, Scheme: "exact", Network: env.Net.ID()},
		{X402Version: 1, Scheme: "exact", Network: env.Net.V1Name()},
	}
	if len(sup.Kinds) != len(wantKinds) {
		t.Fatalf("kinds %+v, want %+v (the unavailable network must leave kinds)", sup.Kinds, wantKinds)
	}
	for i := range wantKinds {
		if sup.Kinds[i] != wantKinds[i] {
			t.Fatalf("kinds %+v, want %+v", sup.Kinds, wantKinds)
		}
	}
	dev, ok := sup.Networks[env.Net.ID()]
	if !ok || !dev.Available || dev.Asset != env.Net.Asset() || dev.EIP712.Name != env.Net.TokenName() ||
		dev.EIP712.Version != env.Net.TokenVersion() || dev.Decimals != env.Net.Decimals() {
		t.Fatalf("dev network entry %+v", dev)
	}
	gone, ok := sup.Networks["eip155:84532"]
	if !ok || gone.Available || gone.Reason == "" {
		t.Fatalf("unavailable network entry %+v, want available false with a reason", gone)
	}
	if got := sup.Signers["eip155:*"]; len(got) == 0 || !strings.EqualFold(got[0], env.Net.SignerAddresses()[0]) {
		t.Fatalf("signers %v", sup.Signers)
	}
	if sup.Extensions == nil {
		t.Errorf("extensions must be an array, not null")
	}
	checkGolden(t, "supported.golden.json", json.RawMessage(a.Body))

	t.Run("verify and settle for the unavailable network answer service_unavailable", func(t *testing.T) {
		body := tamper(t, env.payment(t, 2, 10), "paymentRequirements", "network", "eip155:84532")
		body = tamperPayloadNetwork(t, body, "eip155:84532")
		var vr x402.VerifyResponse
		do(t, "POST", env.URL+"/verify", body, nil).decode(t, &vr)
		if vr.IsValid || vr.InvalidReason != x402.ReasonServiceUnavailable {
			t.Fatalf("verify %+v", vr)
		}
		var sr x402.SettleResponse
		do(t, "POST", env.URL+"/settle", body, nil).decode(t, &sr)
		if sr.Success || sr.ErrorReason != x402.ReasonServiceUnavailable || sr.Transaction != "" {
			t.Fatalf("settle %+v", sr)
		}
	})
}

func tamperPayloadNetwork(tb testing.TB, body []byte, network string) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		tb.Fatal(err)
	}
	m["paymentPayload"].(map[string]any)["accepted"].(map[string]any)["network"] = network
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestHealth(t *testing.T) {
	env := newTestEnv(t)
	a := do(t, "GET", env.URL+"/health", nil, nil)
	var h map[string]string
	a.decode(t, &h)
	if a.Status != 200 || h["status"] != "ok" {
		t.Fatalf("health %d %s", a.Status, a.Body)
	}
	if err := env.Svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, do(t, "GET", env.URL+"/health", nil, nil), 503, web.SlugServiceUnavailable)
}

func TestRateLimitHeaders(t *testing.T) {
	env := newTestEnv(t)
	paths := []struct{ method, path, bucket string }{
		{"GET", "/health", facilitator.BucketPaymentsRead},
		{"GET", "/supported", facilitator.BucketPaymentsRead},
		{"GET", "/verify", facilitator.BucketPaymentsRead},
		{"POST", "/verify", facilitator.BucketPaymentsRead},
		{"POST", "/settle", facilitator.BucketSettle},
		{"GET", "/settle", facilitator.BucketDiscovery},
		{"GET", "/nope", facilitator.BucketDiscovery},
		{"PUT", "/verify", facilitator.BucketPaymentsRead},
	}
	for _, p := range paths {
		t.Run(p.method+" "+p.path, func(t *testing.T) {
			a := do(t, p.method, env.URL+p.path, []byte("x"), nil)
			policy := a.Header.Get("RateLimit-Policy")
			if !strings.Contains(policy, p.bucket) || a.Header.Get("RateLimit") == "" {
				t.Fatalf("RateLimit-Policy %q, RateLimit %q; want the %s bucket named", policy, a.Header.Get("RateLimit"), p.bucket)
			}
		})
	}
}

func TestRateLimitRefusal(t *testing.T) {
	env := newTestEnv(t, withBuckets("settle=1:1,payments-read=1:1,discovery=1:1"))

	t.Run("verify keeps the payment shape", func(t *testing.T) {
		body := env.payment(t, 2, 10)
		if a := do(t, "POST", env.URL+"/verify", body, nil); a.Status != 200 {
			t.Fatalf("first verify: %d %s", a.Status, a.Body)
		}
		a := do(t, "POST", env.URL+"/verify", body, nil)
		if a.Status != 429 || a.Header.Get("Retry-After") == "" {
			t.Fatalf("second verify: status %d Retry-After %q", a.Status, a.Header.Get("Retry-After"))
		}
		var vr x402.VerifyResponse
		a.decode(t, &vr)
		if vr.IsValid || vr.InvalidReason == "" || a.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("429 body %s is not the verify shape", a.Body)
		}
	})

	t.Run("settle keeps the payment shape", func(t *testing.T) {
		do(t, "POST", env.URL+"/settle", []byte("{"), nil)
		a := do(t, "POST", env.URL+"/settle", []byte("{"), nil)
		var m map[string]any
		a.decode(t, &m)
		if a.Status != 429 || m["success"] != false || m["transaction"] != "" || a.Header.Get("Retry-After") == "" {
			t.Fatalf("status %d body %s", a.Status, a.Body)
		}
	})

	t.Run("discovery paths answer a problem", func(t *testing.T) {
		do(t, "GET", env.URL+"/pricing", nil, nil)
		a := do(t, "GET", env.URL+"/pricing", nil, nil)
		wantProblem(t, a, 429, web.SlugTooManyRequests)
		if ra, err := strconv.Atoi(a.Header.Get("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("Retry-After %q", a.Header.Get("Retry-After"))
		}
	})
}

func TestRateLimitOff(t *testing.T) {
	env := newTestEnv(t, withBuckets("off"))
	for i := 0; i < 5; i++ {
		if a := do(t, "GET", env.URL+"/nope", nil, nil); a.Status != 404 {
			t.Fatalf("request %d: status %d with limits off", i, a.Status)
		}
	}
}

// checkGolden compares v, as indented JSON, with testdata/name; -update
// rewrites the file.
func checkGolden(tb testing.TB, name string, v any) {
	tb.Helper()
	golden.JSON(tb, filepath.Join("testdata", name), v)
}

func TestSettleAfterEngineClosed(t *testing.T) {
	env := newTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := env.Engine.Close(ctx); err != nil {
		t.Fatal(err)
	}
	a := do(t, "POST", env.URL+"/settle", env.payment(t, 2, 10), nil)
	var sr x402.SettleResponse
	a.decode(t, &sr)
	if a.Status != 503 || sr.Success || sr.ErrorReason != x402.ReasonServiceUnavailable || a.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d Retry-After %q body %s", a.Status, a.Header.Get("Retry-After"), a.Body)
	}
}
