package access_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/registry/access/x402pay"
	"github.com/ardx-dev/ardx/registry/access/x402pay/x402paytest"
)

const (
	testPayTo = x402paytest.PayTo
	testPayer = x402paytest.Payer
)

// paymentHeader builds a v2 PAYMENT-SIGNATURE value for the offer, as a
// client would after signing (the fake facilitator does not check the
// signature bytes).
func paymentHeader(t *testing.T, o x402pay.Offer, nonce byte, sig string) string {
	t.Helper()
	p := x402pay.PayloadV2{
		X402Version: 2, Resource: &o.Resource, Accepted: o.V2,
		Payload: x402pay.ExactPayload{Signature: sig, Authorization: &x402pay.Authorization{
			From: testPayer, To: o.V2.PayTo, Value: o.V2.Amount, ValidAfter: "0", ValidBefore: "4102444800",
			Nonce: "0x" + strings.Repeat("0", 62) + hex.EncodeToString([]byte{nonce}),
		}},
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

var goodSig = "0x" + strings.Repeat("ab", 65)

func decode(t *testing.T, o x402pay.Offer, header string) x402pay.Payment {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/credits", nil)
	r.Header.Set(x402pay.HeaderPaymentSignature, header)
	p, err := x402pay.DecodePayment(r, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCreditsBuyOnce: a payment buys its credits once; sending it again
// (a retry, a replay) credits nothing more and calls the facilitator no
// more than settle's own replay; an invalid payment credits nothing.
func TestCreditsBuyOnce(t *testing.T) {
	db := kvtest.Open(t)
	fac := x402paytest.New(t)
	c := &access.Credits{DB: db, Merchant: &x402pay.Merchant{FacilitatorURL: fac.URL, Network: "eip155:1337", PayTo: testPayTo}}
	ctx := context.Background()
	o, err := c.Offer(ctx, "http://registry.test/credits", 19000)
	if err != nil {
		t.Fatal(err)
	}
	if o.V2.Amount != "19000000" || o.V2.Asset != x402paytest.Asset || o.V2.Extra.Name != "USDC" || o.V1 != nil {
		t.Fatalf("offer: %+v", o)
	}
	pay := decode(t, o, paymentHeader(t, o, 1, goodSig))
	out, err := c.Buy(ctx, "acct", 19000, pay)
	if err != nil || out.Refused != "" || out.Replayed || !out.Settlement.Success || out.Entry.Balance != 19000 {
		t.Fatalf("buy: %+v %v", out, err)
	}
	for range 3 {
		again, err := c.Buy(ctx, "acct", 19000, pay)
		if err != nil || !again.Replayed || again.Settlement.Transaction != out.Settlement.Transaction {
			t.Fatalf("replay: %+v %v", again, err)
		}
	}
	if bal, _ := db.CreditBalance("acct"); bal != 19000 {
		t.Fatalf("balance %d after replays", bal)
	}
	if verifies, transfers := fac.Counts(); transfers != 1 || verifies != 1 {
		t.Fatalf("transfers %d verifies %d", transfers, verifies)
	}
	// The same payment sent by another account buys it nothing.
	if other, err := c.Buy(ctx, "thief", 19000, pay); err != nil || other.Refused == "" {
		t.Fatalf("another account's replay: %+v %v", other, err)
	}
	if bal, _ := db.CreditBalance("thief"); bal != 0 {
		t.Fatalf("thief balance %d", bal)
	}
	// An invalid payment: refused, nothing credited, nothing settled.
	badPay := decode(t, o, paymentHeader(t, o, 3, goodSig))
	badPay.Body = []byte(strings.Replace(string(badPay.Body), goodSig+`"`, goodSig+`bad"`, 1))
	if out, err := c.Buy(ctx, "acct", 19000, badPay); err != nil || out.Refused == "" {
		t.Fatalf("invalid payment: %+v %v", out, err)
	}
	if bal, _ := db.CreditBalance("acct"); bal != 19000 {
		t.Fatalf("balance %d after an invalid payment", bal)
	}
}

// TestCreditsRetryAfterLostAnswer: a payment whose settlement went through
// but whose credit was never written (a crash between the two) is credited
// by its retry, once, through /settle's replay and without /verify (which
// would call the spent authorization invalid).
func TestCreditsRetryAfterLostAnswer(t *testing.T) {
	db := kvtest.Open(t)
	fac := x402paytest.New(t)
	m := &x402pay.Merchant{FacilitatorURL: fac.URL, Network: "eip155:1337", PayTo: testPayTo}
	c := &access.Credits{DB: db, Merchant: m}
	ctx := context.Background()
	o, _ := c.Offer(ctx, "http://registry.test/credits", 1000)
	pay := decode(t, o, paymentHeader(t, o, 7, goodSig))
	// The first attempt: intent recorded, verified, settled, then "crash".
	if _, _, err := db.BindCreditIntent(pay.Ref, kvIntent("acct", pay)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Settle(ctx, pay); err != nil {
		t.Fatal(err)
	}
	out, err := c.Buy(ctx, "acct", 1000, pay)
	if err != nil || !out.Settlement.Success || out.Entry.Balance != 1000 {
		t.Fatalf("retry: %+v %v", out, err)
	}
	if verifies, transfers := fac.Counts(); verifies != 0 || transfers != 1 {
		t.Fatalf("verifies %d transfers %d", verifies, transfers)
	}
}

func TestCreditsPrice(t *testing.T) {
	c := &access.Credits{PerDollar: 1000}
	for _, tc := range []struct {
		n    int64
		want int64
		ok   bool
	}{{19000, 19_000_000, true}, {1, 1000, true}, {0, 0, false}, {-5, 0, false}, {10_000_001, 0, false}} {
		got, err := c.Price(tc.n)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Price(%d) = %d, %v", tc.n, got, err)
		}
	}
	c.PerDollar = 3
	if _, err := c.Price(1); err == nil {
		t.Error("a price of a third of a micro-dollar accepted")
	}
}

// TestCreditsBuyConcurrentOnce: the same payment sent many times at once
// credits once and moves money once.
func TestCreditsBuyConcurrentOnce(t *testing.T) {
	db := kvtest.Open(t)
	fac := x402paytest.New(t)
	c := &access.Credits{DB: db, Merchant: &x402pay.Merchant{FacilitatorURL: fac.URL, Network: x402paytest.Network, PayTo: testPayTo}}
	ctx := context.Background()
	o, err := c.Offer(ctx, "http://registry.test/credits", 5000)
	if err != nil {
		t.Fatal(err)
	}
	pay := decode(t, o, paymentHeader(t, o, 9, goodSig))
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			out, err := c.Buy(ctx, "acct", 5000, pay)
			if err == nil && (out.Refused != "" || !out.Settlement.Success) {
				err = fmt.Errorf("outcome %+v", out)
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if bal, _ := db.CreditBalance("acct"); bal != 5000 {
		t.Fatalf("balance %d after 16 concurrent sends of one payment", bal)
	}
	if _, transfers := fac.Counts(); transfers != 1 {
		t.Fatalf("transfers %d", transfers)
	}
}

// TestCreditsSettledLaterAreCredited: a purchase the facilitator answers
// settlement_pending is credited by Reconcile once it is final, across a
// restart of the registry, even if the buyer never sends it again; once
// only, and a later retry by the buyer is a replay.
func TestCreditsSettledLaterAreCredited(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fac := x402paytest.New(t)
	fac.Pending = 1
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	credits := func(db *kv.DB) *access.Credits {
		return &access.Credits{DB: db, Now: func() time.Time { return now },
			Merchant: &x402pay.Merchant{FacilitatorURL: fac.URL, Network: x402paytest.Network, PayTo: testPayTo}}
	}
	c := credits(db)
	ctx := context.Background()
	o, err := c.Offer(ctx, "http://registry.test/credits", 2000)
	if err != nil {
		t.Fatal(err)
	}
	pay := decode(t, o, paymentHeader(t, o, 11, goodSig))
	out, err := c.Buy(ctx, "acct", 2000, pay)
	if err != nil || out.Refused == "" || out.Settlement.Success {
		t.Fatalf("a pending settlement: %+v %v", out, err)
	}
	// The registry stops and starts again: what it owes lives in kv.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = kv.Open(dir, kv.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c = credits(db)
	balance := func() int64 {
		b, err := db.CreditBalance("acct")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got, err := c.Reconcile(ctx); err != nil || len(got) != 0 || balance() != 0 {
		t.Fatalf("reconciled a purchase younger than the buyer's own request: %v %v balance %d", got, err, balance())
	}
	now = now.Add(time.Minute)
	if got, err := c.Reconcile(ctx); err != nil || len(got) != 1 || got[0] != "acct" || balance() != 2000 {
		t.Fatalf("reconcile: %v %v balance %d", got, err, balance())
	}
	if got, err := c.Reconcile(ctx); err != nil || len(got) != 0 || balance() != 2000 {
		t.Fatalf("second reconcile: %v %v balance %d", got, err, balance())
	}
	again, err := c.Buy(ctx, "acct", 2000, pay)
	if err != nil || !again.Replayed || balance() != 2000 {
		t.Fatalf("the buyer's retry: %+v %v balance %d", again, err, balance())
	}
	if _, transfers := fac.Counts(); transfers != 1 {
		t.Fatalf("%d transfers, want 1", transfers)
	}
}

// TestCreditsReconcileDropsRefused: a payment the facilitator refuses for
// good is not sent again by Reconcile.
func TestCreditsReconcileDropsRefused(t *testing.T) {
	db := kvtest.Open(t)
	fac := x402paytest.New(t)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	c := &access.Credits{DB: db, Now: func() time.Time { return now },
		Merchant: &x402pay.Merchant{FacilitatorURL: fac.URL, Network: x402paytest.Network, PayTo: testPayTo}}
	ctx := context.Background()
	o, _ := c.Offer(ctx, "http://registry.test/credits", 1000)
	pay := decode(t, o, paymentHeader(t, o, 12, goodSig))
	pay.Body = []byte(strings.Replace(string(pay.Body), goodSig+`"`, goodSig+`bad"`, 1))
	if out, err := c.Buy(ctx, "acct", 1000, pay); err != nil || out.Refused == "" {
		t.Fatalf("a bad payment: %+v %v", out, err)
	}
	now = now.Add(time.Hour)
	pending, err := db.PendingCreditIntents(now, 10)
	if err != nil || len(pending) != 0 {
		t.Fatalf("a refused payment is still pending: %+v %v", pending, err)
	}
}
