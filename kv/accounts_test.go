package kv_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

func TestPrivateEntriesAndClaimTransfer(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	for _, id := range []string{"a", "b"} {
		if err := db.CreateAccount(kv.Account{ID: id, CreatedAt: now}, kv.APIKey{ID: "k" + id, AccountID: id, Hash: make([]byte, 32)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateAccount(kv.Account{ID: "a"}, kv.APIKey{ID: "kz", AccountID: "a"}); !errors.Is(err, kv.ErrExists) {
		t.Fatalf("second account a: %v, want ErrExists", err)
	}
	if _, err := db.ReplaceSource("pub", []kv.Entry{{ID: "urn:air:corp.test:public", Body: json.RawMessage(`{"type":"t"}`)}}, now); err != nil {
		t.Fatal(err)
	}
	tag := func(acct string) string { return "corp.test#" + acct }
	if _, err := db.ClaimDomain("corp.test", "a", now, tag, nil); err != nil {
		t.Fatal(err)
	}
	seq, _ := db.LastChangeSeq()
	stored, err := db.PutPrivateEntries(tag("a"), []kv.Entry{{ID: "urn:air:corp.test:secret", Body: json.RawMessage(`{"type":"t", "x":1}`)}}, now)
	if err != nil || len(stored) != 1 || stored[0].Owner != tag("a") || string(stored[0].Body) != `{"type":"t","x":1}` {
		t.Fatalf("PutPrivateEntries = %+v, %v", stored, err)
	}
	if after, _ := db.LastChangeSeq(); after != seq {
		t.Fatal("a private entry appended to the change feed")
	}
	// A public identifier, or another owner's, is never taken over.
	for _, owner := range []string{tag("a"), tag("b")} {
		_, err := db.PutPrivateEntries(owner, []kv.Entry{{ID: "urn:air:corp.test:public", Body: json.RawMessage(`{}`)}}, now)
		if !errors.Is(err, kv.ErrIdentifierTaken) {
			t.Fatalf("%s over a public entry: %v", owner, err)
		}
	}
	if _, err := db.PutPrivateEntries(tag("b"), []kv.Entry{{ID: "urn:air:corp.test:secret", Body: json.RawMessage(`{}`)}}, now); !errors.Is(err, kv.ErrIdentifierTaken) {
		t.Fatalf("b over a's entry: %v", err)
	}
	// Deleting is scoped to the owner.
	if gone, err := db.DeletePrivateEntries(tag("b"), []string{"urn:air:corp.test:secret", "urn:air:corp.test:public"}); err != nil || len(gone) != 0 {
		t.Fatalf("b deleted %+v, %v", gone, err)
	}

	// b proves the domain: a loses it and its entries, in one commit.
	tr, err := db.ClaimDomain("corp.test", "b", now, tag, func(string) *kv.Change { return &kv.Change{Kind: "domain.owner_changed", Publisher: "corp.test"} })
	if err != nil || tr.Previous != "a" || len(tr.Removed) != 1 || tr.Removed[0].ID != "urn:air:corp.test:secret" {
		t.Fatalf("transfer = %+v, %v", tr, err)
	}
	db.Close()
	db, err = kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if owner, err := db.DomainOwner("corp.test"); owner != "b" || err != nil {
		t.Fatalf("owner after reopen: %q, %v", owner, err)
	}
	a, _ := db.GetAccount("a")
	b, _ := db.GetAccount("b")
	if a.Holds("corp.test", kv.HeldByClaim) || !b.Holds("corp.test", kv.HeldByClaim) {
		t.Fatalf("holdings after transfer: a %+v, b %+v", a, b)
	}
	if _, err := db.GetEntry("urn:air:corp.test:secret"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("old holder's entry after transfer: %v", err)
	}
	if es, _ := db.PrivateEntries(tag("a")); len(es) != 0 {
		t.Fatalf("old holder still lists %+v", es)
	}
	if _, err := db.GetEntry("urn:air:corp.test:public"); err != nil {
		t.Fatalf("the public entry went with the transfer: %v", err)
	}
	cs, _ := db.Changes(seq, 0)
	if len(cs) != 1 || cs[0].Kind != "domain.owner_changed" || cs[0].ID != "" {
		t.Fatalf("changes after the transfer: %+v", cs)
	}
}
