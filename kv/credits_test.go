package kv_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// TestApplyCreditOnce: a reference moves credits once, a debit never takes
// the balance below zero, and balance and history survive a reopen.
func TestApplyCreditOnce(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	buy := kv.CreditEntry{Time: t0, Delta: 20000, Kind: "purchase", Ref: "pay-1"}
	if e, applied, err := db.ApplyCredit("acct-a", buy); err != nil || !applied || e.Balance != 20000 {
		t.Fatalf("first purchase: %+v %v %v", e, applied, err)
	}
	if e, applied, err := db.ApplyCredit("acct-a", buy); err != nil || applied || e.Balance != 20000 {
		t.Fatalf("replayed purchase: %+v applied=%v %v", e, applied, err)
	}
	// Another account sending the same reference gets the recorded entry,
	// not credits of its own.
	if _, applied, _ := db.ApplyCredit("acct-b", buy); applied {
		t.Fatal("a reference moved credits for a second account")
	}
	if owner, e, err := db.CreditByRef("pay-1"); err != nil || owner != "acct-a" || e.Delta != 20000 {
		t.Fatalf("CreditByRef: %q %+v %v", owner, e, err)
	}
	charge := kv.CreditEntry{Time: t0, Delta: -19000, Kind: "monitoring", Ref: "m-1"}
	if e, _, err := db.ApplyCredit("acct-a", charge); err != nil || e.Balance != 1000 {
		t.Fatalf("charge: %+v %v", e, err)
	}
	over := kv.CreditEntry{Time: t0, Delta: -19000, Kind: "monitoring", Ref: "m-2"}
	if _, _, err := db.ApplyCredit("acct-a", over); !errors.Is(err, kv.ErrInsufficientCredits) {
		t.Fatalf("overdraft: %v", err)
	}
	if _, _, err := db.CreditByRef("m-2"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("a refused debit left a reference: %v", err)
	}
	db.Close()
	if db, err = kv.Open(dir, kv.Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if bal, err := db.CreditBalance("acct-a"); err != nil || bal != 1000 {
		t.Fatalf("balance after reopen: %d %v", bal, err)
	}
	if bal, _ := db.CreditBalance("acct-b"); bal != 0 {
		t.Fatalf("acct-b balance %d", bal)
	}
	hist, err := db.CreditHistory("acct-a", 10)
	if err != nil || len(hist) != 2 || hist[0].Ref != "m-1" || hist[1].Ref != "pay-1" {
		t.Fatalf("history (newest first): %+v %v", hist, err)
	}
	if hist, _ := db.CreditHistory("acct-a", 1); len(hist) != 1 || hist[0].Ref != "m-1" {
		t.Fatalf("limited history: %+v", hist)
	}
	// An account whose id is a prefix of another's sees only its own.
	if _, _, err := db.ApplyCredit("acct", kv.CreditEntry{Delta: 5, Kind: "purchase", Ref: "p-short"}); err != nil {
		t.Fatal(err)
	}
	if hist, _ := db.CreditHistory("acct", 10); len(hist) != 1 || hist[0].Ref != "p-short" {
		t.Fatalf("prefix account history: %+v", hist)
	}
	if hist, _ := db.CreditHistory("acct-b", 10); len(hist) != 0 {
		t.Fatalf("acct-b history: %+v", hist)
	}
}
