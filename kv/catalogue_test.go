package kv_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
)

func TestCatalogueEntries(t *testing.T) {
	db := kvtest.Open(t)
	t0 := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	e := kv.CatalogueEntry{Key: "GET https://a.test/x", Resource: "https://a.test/x", Type: "http", Method: "GET",
		Accepts: []byte(`[{"amount":"1"}]`), Amount: "1", LastSeen: t0, Settlements: 1}
	if _, err := db.PutCatalogueEntry(e); err != nil {
		t.Fatal(err)
	}
	e.Amount, e.Accepts, e.LastSeen = "2", []byte(`[{"amount":"2"}]`), t0.Add(time.Hour)
	got, err := db.PutCatalogueEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	if !got.FirstSeen.Equal(t0) || !got.LastSeen.Equal(t0.Add(time.Hour)) || got.Settlements != 2 || got.Amount != "2" {
		t.Fatalf("merged entry %+v", got)
	}
	if _, err := db.PutCatalogueEntry(kv.CatalogueEntry{Key: "mcp https://b.test/mcp#t", Type: "mcp", Accepts: []byte(`[]`), LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutCatalogueEntry(kv.CatalogueEntry{}); err == nil {
		t.Error("an entry without a key was stored")
	}
	all, err := db.CatalogueEntries()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Key != "GET https://a.test/x" || all[0].Settlements != 2 {
		t.Fatalf("entries %+v", all)
	}
}

func TestEchoPaymentCaps(t *testing.T) {
	db := kvtest.Open(t)
	pay := func(id, day, payer string) (kv.EchoPayment, error) {
		return db.ReserveEchoPayment(kv.EchoPayment{ID: id, Day: day, Payer: payer, Amount: "1000"}, 2, 3)
	}
	const day = "2026-04-01"
	steps := []struct {
		id, day, payer string
		wantScope      string
		wantExists     bool
	}{
		{"p1", day, "0xAAAA", "", false},
		{"p2", day, "0xaaaa", "", false}, // the same address in another case
		{"p3", day, "0xAAAA", kv.CapPerAddress, false},
		{"p1", day, "0xAAAA", "", true},
		{"p4", day, "0xBBBB", "", false},
		{"p5", day, "0xCCCC", kv.CapPerDay, false},
		{"p6", "2026-04-02", "0xAAAA", "", false}, // a new day
	}
	for _, s := range steps {
		rec, err := pay(s.id, s.day, s.payer)
		var capErr *kv.EchoCapError
		switch {
		case s.wantScope != "":
			if !errors.As(err, &capErr) || capErr.Scope != s.wantScope {
				t.Fatalf("%s: err %v, want cap %s", s.id, err, s.wantScope)
			}
		case s.wantExists:
			if !errors.Is(err, kv.ErrEchoPaymentExists) || rec.ID != s.id || rec.State != kv.EchoSettling {
				t.Fatalf("%s: %+v %v, want the stored record", s.id, rec, err)
			}
		case err != nil:
			t.Fatalf("%s: %v", s.id, err)
		}
	}
	total, byPayer, err := db.EchoCounts(day, "0xAAAA")
	if err != nil || total != 3 || byPayer != 2 {
		t.Fatalf("counts %d %d %v", total, byPayer, err)
	}
	// A failed settlement gives its place back.
	if err := db.ReleaseEchoPayment("p2"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EchoPaymentByID("p2"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("released payment: %v", err)
	}
	if _, err := pay("p7", day, "0xAAAA"); err != nil {
		t.Fatalf("after release: %v", err)
	}
	rec, err := db.EchoPaymentByID("p7")
	if err != nil {
		t.Fatal(err)
	}
	rec.State, rec.RefundTx = kv.EchoRefunded, "0xabc"
	if err := db.UpdateEchoPayment(rec); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.EchoPaymentByID("p7"); got.State != kv.EchoRefunded || got.RefundTx != "0xabc" || got.Payer != "0xaaaa" {
		t.Fatalf("updated %+v", got)
	}
	if err := db.UpdateEchoPayment(kv.EchoPayment{ID: "nope"}); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("update of unknown: %v", err)
	}
}
