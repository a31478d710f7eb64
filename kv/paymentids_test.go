package kv_test

import (
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// TestBindPaymentID: the first binding stands across a reopen, until it
// expires or the caller replaces the body it names.
func TestBindPaymentID(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := kv.PaymentIDBinding{Fingerprint: "fp", BodyKey: "a", Body: []byte(`{"a":1}`), CreatedAt: t0}
	if got, err := db.BindPaymentID("pay_0123456789abcdef", first, "", time.Hour); err != nil || got.BodyKey != "a" {
		t.Fatalf("first bind: %+v %v", got, err)
	}
	db.Close()
	if db, err = kv.Open(dir, kv.Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	second := kv.PaymentIDBinding{Fingerprint: "fp", BodyKey: "b", Body: []byte(`{"b":1}`), CreatedAt: t0.Add(time.Minute)}
	if got, err := db.BindPaymentID("pay_0123456789abcdef", second, "", time.Hour); err != nil || got.BodyKey != "a" || string(got.Body) != `{"a":1}` {
		t.Fatalf("after reopen: %+v %v, want the first binding", got, err)
	}
	if got, _ := db.BindPaymentID("pay_0123456789abcdef", second, "x", time.Hour); got.BodyKey != "a" {
		t.Fatalf("replacing another body key took the id: %+v", got)
	}
	if got, _ := db.BindPaymentID("pay_0123456789abcdef", second, "a", time.Hour); got.BodyKey != "b" {
		t.Fatalf("replace of the named body key: %+v", got)
	}
	late := kv.PaymentIDBinding{Fingerprint: "other", BodyKey: "c", CreatedAt: t0.Add(2 * time.Hour)}
	if got, _ := db.BindPaymentID("pay_0123456789abcdef", late, "", time.Hour); got.BodyKey != "c" {
		t.Fatalf("an expired binding stood: %+v", got)
	}
}
