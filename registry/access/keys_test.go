package access_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/access"
)

func openStore(tb testing.TB, dir string) (*access.Store, *kv.DB) {
	tb.Helper()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return access.New(db, nil), db
}

func TestKeysAuthenticateRotate(t *testing.T) {
	dir := t.TempDir()
	st, db := openStore(t, dir)
	acct, key, err := st.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "ardx_") {
		t.Fatalf("key %q lacks the ardx_ prefix", key)
	}
	// The store never holds the key itself.
	if raw, _ := db.GetAPIKey(key[5:21]); strings.Contains(string(raw.Hash), key) || len(raw.Hash) != 32 {
		t.Fatalf("stored key record %+v is not a SHA-256", raw)
	}

	c, err := st.Authenticate("Bearer " + key)
	if err != nil || c == nil || c.AccountID != acct.ID {
		t.Fatalf("Authenticate(good) = %+v, %v; want account %s", c, err, acct.ID)
	}
	if c, err := st.Authenticate(""); c != nil || err != nil {
		t.Fatalf("Authenticate(\"\") = %+v, %v; want anonymous", c, err)
	}
	wrong := key[:len(key)-2] + "AA"
	if wrong == key {
		wrong = key[:len(key)-2] + "BB"
	}
	for _, tc := range []struct {
		name, header string
		want         error
	}{
		{"no scheme", key, access.ErrMalformedKey},
		{"basic scheme", "Basic " + key, access.ErrMalformedKey},
		{"bearer without key", "Bearer", access.ErrMalformedKey},
		{"not an ardx key", "Bearer abc", access.ErrMalformedKey},
		{"wrong secret", "Bearer " + wrong, access.ErrUnknownKey},
		{"unknown id", "Bearer ardx_0000000000000000_" + key[22:], access.ErrUnknownKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := st.Authenticate(tc.header)
			if c != nil || !errors.Is(err, tc.want) {
				t.Fatalf("Authenticate(%q) = %+v, %v; want %v", tc.header, c, err, tc.want)
			}
		})
	}
	if c, err := st.Authenticate("bearer  " + key + " "); err != nil || c.AccountID != acct.ID {
		t.Fatalf("scheme is case-insensitive and space is trimmed: %+v, %v", c, err)
	}

	next, err := st.RotateKey(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Authenticate("Bearer " + key); !errors.Is(err, access.ErrRevokedKey) {
		t.Fatalf("old key after rotation: %v, want ErrRevokedKey", err)
	}
	if _, err := st.RotateKey(c); !errors.Is(err, access.ErrRevokedKey) {
		t.Fatalf("rotating a revoked key: %v, want ErrRevokedKey", err)
	}

	// Durable: a fresh store over a reopened file knows the rotated key.
	db.Close()
	st2, _ := openStore(t, dir)
	c2, err := st2.Authenticate("Bearer " + next)
	if err != nil || c2.AccountID != acct.ID {
		t.Fatalf("new key after reopen = %+v, %v; want account %s", c2, err, acct.ID)
	}
	keys, err := st2.Keys(acct.ID)
	if err != nil || len(keys) != 2 || keys[0].RevokedAt.IsZero() || !keys[1].RevokedAt.IsZero() {
		t.Fatalf("Keys = %+v, %v; want the revoked first key and the live second", keys, err)
	}
}

func TestHoldDomain(t *testing.T) {
	st, _ := openStore(t, t.TempDir())
	acct, key, err := st.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // holding twice is one holding
		if _, err := st.HoldDomain(acct.ID, "Watched.Example.", access.ViaMonitoring); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.HoldDomain(acct.ID, "watched.example", access.ViaClaim); err == nil {
		t.Fatal("HoldDomain by claim succeeded; claims must be proved")
	}
	if _, err := st.HoldDomain(acct.ID, "http://x", access.ViaMonitoring); err == nil {
		t.Fatal("HoldDomain accepted a URL")
	}
	if _, err := st.HoldDomain("acct_none", "a.example", access.ViaMonitoring); !errors.Is(err, access.ErrNoAccount) {
		t.Fatalf("HoldDomain(unknown account) = %v, want ErrNoAccount", err)
	}
	hs, err := st.Domains(acct.ID)
	if err != nil || len(hs) != 1 || hs[0].Domain != "watched.example" || hs[0].Via != access.ViaMonitoring {
		t.Fatalf("Domains = %+v, %v", hs, err)
	}
	// Monitoring a domain never lets the caller see its private entries.
	c, _ := st.Authenticate("Bearer " + key)
	if len(c.Viewers()) != 0 {
		t.Fatalf("a monitored domain gave viewers %v", c.Viewers())
	}
	if _, err := st.ReleaseDomain(acct.ID, "watched.example", access.ViaMonitoring); err != nil {
		t.Fatal(err)
	}
	if hs, _ := st.Domains(acct.ID); len(hs) != 0 {
		t.Fatalf("Domains after release = %+v", hs)
	}
	var anon *access.Caller
	if anon.Viewers() != nil || anon.HoldsByClaim("a.example") {
		t.Fatal("an anonymous caller holds something")
	}
}

// BenchmarkAuthenticate is the cost a key adds to every request: a kv read
// of the key and of its account, a SHA-256 and a constant-time compare.
func BenchmarkAuthenticate(b *testing.B) {
	st, _ := openStore(b, b.TempDir())
	acct, key, err := st.CreateAccount()
	if err != nil {
		b.Fatal(err)
	}
	for i := range 20 {
		if _, err := st.HoldDomain(acct.ID, "d"+strings.Repeat("x", i)+".example", access.ViaMonitoring); err != nil {
			b.Fatal(err)
		}
	}
	header := "Bearer " + key
	b.ReportAllocs()
	for b.Loop() {
		if c, err := st.Authenticate(header); err != nil || c == nil {
			b.Fatal(err)
		}
	}
}
