package kv_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func pendingSettlement(body, auth string, nonce uint64) kv.Settlement {
	return kv.Settlement{
		BodyKey:   body,
		Network:   "eip155:84532",
		Body:      []byte(`{"x402Version":2}`),
		CreatedAt: t0,
		Intent: &kv.SettlementIntent{
			AuthorizationID: auth,
			Signer:          "0xsigner",
			Nonce:           nonce,
			TxHash:          fmt.Sprintf("0xhash%d", nonce),
			RawTx:           []byte{0x02, byte(nonce)},
			RecordedAt:      t0,
		},
	}
}

func finished(s kv.Settlement, state kv.SettlementState, outcome string) kv.Settlement {
	s.State = state
	s.Outcome = outcome
	s.Response = json.RawMessage(fmt.Sprintf(`{"success":%t}`, state == kv.SettlementSucceeded))
	s.FinishedAt = t0.Add(time.Second)
	return s
}

func TestSettlementLifecycleSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := pendingSettlement("body-a", "84532:usdc:payer:n1", 7)
	if err := db.RecordSettlementIntent(a); err != nil {
		t.Fatal(err)
	}
	db.Close()

	// The intent must be durable: a crash right after recording it is the
	// case reconciliation exists for.
	db, err = kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pending, err := db.PendingSettlements()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].BodyKey != "body-a" || pending[0].State != kv.SettlementPending {
		t.Fatalf("pending after reopen = %+v", pending)
	}
	got := pending[0].Intent
	if got == nil || got.TxHash != "0xhash7" || got.Nonce != 7 || string(got.RawTx) != "\x02\x07" || got.Signer != "0xsigner" {
		t.Fatalf("intent after reopen = %+v", got)
	}
	if owner, err := db.AuthorizationOwner("84532:usdc:payer:n1"); err != nil || owner != "body-a" {
		t.Fatalf("owner = %q, %v", owner, err)
	}

	done, err := db.FinishSettlement(finished(a, kv.SettlementSucceeded, "succeeded"), false)
	if err != nil {
		t.Fatal(err)
	}
	if done.Intent == nil || done.Intent.TxHash != "0xhash7" || string(done.Body) != `{"x402Version":2}` {
		t.Fatalf("finish lost the intent or body: %+v", done)
	}
	if p, _ := db.PendingSettlements(); len(p) != 0 {
		t.Fatalf("still pending after finish: %+v", p)
	}
	rec, err := db.Settlement("body-a")
	if err != nil || rec.State != kv.SettlementSucceeded || string(rec.Response) != `{"success":true}` {
		t.Fatalf("record = %+v, %v", rec, err)
	}
	// A succeeded settlement keeps its authorization claimed forever.
	if owner, _ := db.AuthorizationOwner("84532:usdc:payer:n1"); owner != "body-a" {
		t.Fatalf("authorization released after success: %q", owner)
	}
}

func TestSettlementFinalIsImmutableAndCountedOnce(t *testing.T) {
	db := kvtest.Open(t)
	a := pendingSettlement("body-a", "auth-1", 1)
	if err := db.RecordSettlementIntent(a); err != nil {
		t.Fatal(err)
	}
	first := finished(a, kv.SettlementSucceeded, "succeeded")
	if _, err := db.FinishSettlement(first, false); err != nil {
		t.Fatal(err)
	}
	second := finished(a, kv.SettlementFailed, "transaction_failed")
	stored, err := db.FinishSettlement(second, true)
	if !errors.Is(err, kv.ErrSettlementFinal) {
		t.Fatalf("second finish err = %v, want ErrSettlementFinal", err)
	}
	if stored.State != kv.SettlementSucceeded {
		t.Fatalf("second finish changed the outcome: %+v", stored)
	}
	if err := db.RecordSettlementIntent(a); !errors.Is(err, kv.ErrSettlementFinal) {
		t.Fatalf("intent over a final record: err = %v", err)
	}
	if owner, _ := db.AuthorizationOwner("auth-1"); owner != "body-a" {
		t.Fatalf("failed second finish released the authorization: %q", owner)
	}
	counts, err := db.SettlementCounts()
	if err != nil {
		t.Fatal(err)
	}
	want := []kv.SettlementCount{{Network: "eip155:84532", Outcome: "succeeded", Count: 1}}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("counts = %v, want %v", counts, want)
	}
}

func TestSettlementAuthorizationClaims(t *testing.T) {
	tests := []struct {
		name      string
		finishA   kv.SettlementState // "" leaves A pending
		release   bool
		wantOwner string // who owns the authorization after B tries
		wantErr   bool
	}{
		{name: "pending owner refuses another body", wantOwner: "body-a", wantErr: true},
		{name: "succeeded owner refuses another body", finishA: kv.SettlementSucceeded, wantOwner: "body-a", wantErr: true},
		{name: "failed owner that kept the claim refuses", finishA: kv.SettlementFailed, wantOwner: "body-a", wantErr: true},
		{name: "failed owner that released lets another body claim", finishA: kv.SettlementFailed, release: true, wantOwner: "body-b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := kvtest.Open(t)
			a := pendingSettlement("body-a", "auth-1", 1)
			if err := db.RecordSettlementIntent(a); err != nil {
				t.Fatal(err)
			}
			if tc.finishA != "" {
				if _, err := db.FinishSettlement(finished(a, tc.finishA, "x"), tc.release); err != nil {
					t.Fatal(err)
				}
			}
			err := db.RecordSettlementIntent(pendingSettlement("body-b", "auth-1", 2))
			var claimed *kv.AuthorizationClaimedError
			if tc.wantErr != errors.As(err, &claimed) {
				t.Fatalf("err = %v, want claimed error: %t", err, tc.wantErr)
			}
			if claimed != nil && claimed.Owner != "body-a" {
				t.Fatalf("claimed owner = %q", claimed.Owner)
			}
			if owner, _ := db.AuthorizationOwner("auth-1"); owner != tc.wantOwner {
				t.Fatalf("owner = %q, want %q", owner, tc.wantOwner)
			}
			if _, err := db.Settlement("body-b"); tc.wantErr && !errors.Is(err, kv.ErrNotFound) {
				t.Fatalf("refused intent left a record: %v", err)
			}
		})
	}
}

func TestSettlementReplacedIntentMovesClaim(t *testing.T) {
	db := kvtest.Open(t)
	if err := db.RecordSettlementIntent(pendingSettlement("body-a", "auth-1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordSettlementIntent(pendingSettlement("body-a", "auth-2", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AuthorizationOwner("auth-1"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("old claim kept: %v", err)
	}
	rec, _ := db.Settlement("body-a")
	if rec.Intent.Nonce != 2 {
		t.Fatalf("intent not replaced: %+v", rec.Intent)
	}
}

func TestSettlementFailedWithoutIntent(t *testing.T) {
	db := kvtest.Open(t)
	s := finished(kv.Settlement{BodyKey: "body-x", Network: "unknown"}, kv.SettlementFailed, "sanctioned_address")
	stored, err := db.FinishSettlement(s, true)
	if err != nil {
		t.Fatal(err)
	}
	if stored.CreatedAt.IsZero() {
		t.Fatal("created time not set")
	}
	if _, err := db.FinishSettlement(kv.Settlement{BodyKey: "b", Network: "n", State: kv.SettlementPending, Outcome: "o"}, false); err == nil {
		t.Fatal("finishing with a pending state succeeded")
	}
	if _, err := db.FinishSettlement(kv.Settlement{BodyKey: "b", State: kv.SettlementFailed}, false); err == nil {
		t.Fatal("finishing without network and outcome succeeded")
	}
	if err := db.RecordSettlementIntent(kv.Settlement{BodyKey: "b"}); err == nil {
		t.Fatal("intent without authorization succeeded")
	}
	if _, err := db.Settlement("missing"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("missing record err = %v", err)
	}
}

func TestPendingSettlementsInNonceOrder(t *testing.T) {
	db := kvtest.Open(t)
	for _, n := range []uint64{5, 3, 9, 4} {
		if err := db.RecordSettlementIntent(pendingSettlement(fmt.Sprintf("body-%d", 10-n), fmt.Sprintf("auth-%d", n), n)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := db.PendingSettlements()
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, s := range p {
		got = append(got, s.Intent.Nonce)
	}
	if fmt.Sprint(got) != "[3 4 5 9]" {
		t.Fatalf("nonce order = %v", got)
	}
}

func TestBindIdempotencyKey(t *testing.T) {
	tests := []struct {
		name      string
		second    string
		after     time.Duration
		ttl       time.Duration
		wantBound string
	}{
		{name: "same body", second: "body-a", after: time.Minute, ttl: time.Hour, wantBound: "body-a"},
		{name: "other body refused", second: "body-b", after: time.Minute, ttl: time.Hour, wantBound: "body-a"},
		{name: "other body after expiry", second: "body-b", after: 2 * time.Hour, ttl: time.Hour, wantBound: "body-b"},
		{name: "no ttl never expires", second: "body-b", after: 1000 * time.Hour, wantBound: "body-a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := kvtest.Open(t)
			if got, err := db.BindIdempotencyKey("key-1", "body-a", t0, tc.ttl); err != nil || got != "body-a" {
				t.Fatalf("first bind = %q, %v", got, err)
			}
			got, err := db.BindIdempotencyKey("key-1", tc.second, t0.Add(tc.after), tc.ttl)
			if err != nil || got != tc.wantBound {
				t.Fatalf("second bind = %q, %v; want %q", got, err, tc.wantBound)
			}
		})
	}
}

func TestBindIdempotencyKeyConcurrentFirstWins(t *testing.T) {
	db := kvtest.Open(t)
	var wg sync.WaitGroup
	results := make([]string, 16)
	for i := range results {
		wg.Go(func() {
			got, err := db.BindIdempotencyKey("k", fmt.Sprintf("body-%d", i), t0, 0)
			if err != nil {
				t.Error(err)
			}
			results[i] = got
		})
	}
	wg.Wait()
	for _, r := range results {
		if r != results[0] {
			t.Fatalf("concurrent binds disagree: %v", results)
		}
	}
}

func TestFinishSettlementConcurrentCountsOnce(t *testing.T) {
	db := kvtest.Open(t)
	a := pendingSettlement("body-a", "auth-1", 1)
	if err := db.RecordSettlementIntent(a); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Go(func() {
			_, err := db.FinishSettlement(finished(a, kv.SettlementSucceeded, "succeeded"), false)
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, kv.ErrSettlementFinal) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	counts, _ := db.SettlementCounts()
	if wins != 1 || len(counts) != 1 || counts[0].Count != 1 {
		t.Fatalf("wins = %d, counts = %v", wins, counts)
	}
}

func TestRecordSettlementIntentsAllOrNone(t *testing.T) {
	db := kvtest.Open(t)
	if err := db.RecordSettlementIntent(pendingSettlement("owner", "auth-taken", 1)); err != nil {
		t.Fatal(err)
	}
	run := []kv.Settlement{
		pendingSettlement("body-a", "auth-a", 2),
		pendingSettlement("body-b", "auth-taken", 3), // claimed by "owner"
	}
	var claimed *kv.AuthorizationClaimedError
	if err := db.RecordSettlementIntents(run); !errors.As(err, &claimed) || claimed.Owner != "owner" {
		t.Fatalf("RecordSettlementIntents = %v, want the claim by owner", err)
	}
	if _, err := db.Settlement("body-a"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("body-a recorded although its run failed: %v", err)
	}
	if _, err := db.AuthorizationOwner("auth-a"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("auth-a claimed although its run failed: %v", err)
	}

	run[1] = pendingSettlement("body-b", "auth-b", 3)
	if err := db.RecordSettlementIntents(run); err != nil {
		t.Fatal(err)
	}
	pending, err := db.PendingSettlements()
	if err != nil || len(pending) != 3 {
		t.Fatalf("pending = %d, %v; want owner, body-a and body-b", len(pending), err)
	}
}

// Concurrent writers share commits; a writer whose function fails must get
// its own error without taking the others' writes down with it.
func TestGroupedWritesKeepTheirOwnOutcomes(t *testing.T) {
	db := kvtest.Open(t)
	if err := db.RecordSettlementIntent(pendingSettlement("owner", "auth-taken", 0)); err != nil {
		t.Fatal(err)
	}
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			auth := fmt.Sprintf("auth-%d", i)
			if i%8 == 0 {
				auth = "auth-taken"
			}
			s := pendingSettlement(fmt.Sprintf("body-%d", i), auth, uint64(i+1))
			if errs[i] = db.RecordSettlementIntent(s); errs[i] == nil {
				_, errs[i] = db.FinishSettlement(finished(s, kv.SettlementSucceeded, "succeeded"), false)
			}
		})
	}
	wg.Wait()
	succeeded := 0
	for i, err := range errs {
		var claimed *kv.AuthorizationClaimedError
		switch {
		case i%8 == 0 && !errors.As(err, &claimed):
			t.Errorf("writer %d: err = %v, want the authorization claimed", i, err)
		case i%8 != 0 && err != nil:
			t.Errorf("writer %d: %v", i, err)
		case err == nil:
			succeeded++
		}
	}
	counts, err := db.SettlementCounts()
	if err != nil || len(counts) != 1 || counts[0].Count != int64(succeeded) || succeeded != n-n/8 {
		t.Fatalf("counts = %v (%v), succeeded = %d", counts, err, succeeded)
	}
}
