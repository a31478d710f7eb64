// Package kvtest opens throwaway kv stores for tests.
package kvtest

import (
	"testing"

	"github.com/ardx-dev/ardx/kv"
)

// Open opens a store in a fresh temporary directory, closed when tb ends.
func Open(tb testing.TB) *kv.DB {
	tb.Helper()
	db, err := kv.Open(tb.TempDir(), kv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
