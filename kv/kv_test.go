package kv_test

import (
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

func TestCountersSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Incr("x", 2); err != nil {
		t.Fatal(err)
	}
	if v, _ := db.Incr("x", 3); v != 5 {
		t.Fatalf("got %d, want 5", v)
	}
	db.Close()
	db, err = kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.Counter("x"); v != 5 {
		t.Fatalf("after reopen got %d, want 5", v)
	}
	if v, _ := db.Counter("missing"); v != 0 {
		t.Fatalf("missing counter = %d", v)
	}
}

func TestOpenLockedTimesOut(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	if _, err := kv.Open(dir, kv.Options{Timeout: 100 * time.Millisecond}); err == nil {
		t.Fatal("second open of a locked file succeeded")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("second open did not honour the timeout")
	}
}
