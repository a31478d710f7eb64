package index_test

import (
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// mustOpenMemory opens an in-memory index closed at the end of the test.
func mustOpenMemory(tb testing.TB) *index.Index {
	tb.Helper()
	ix, err := index.OpenMemory()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ix.Close() })
	return ix
}

func mustPut(tb testing.TB, ix *index.Index, docs []index.Doc) {
	tb.Helper()
	if err := ix.Put(docs); err != nil {
		tb.Fatal(err)
	}
}
