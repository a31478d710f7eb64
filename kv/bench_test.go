package kv_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// TestBenchRuns: reports come back newest first, limited, and only the
// last 32 are kept.
func TestBenchRuns(t *testing.T) {
	db, err := kv.Open(t.TempDir(), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if runs, err := db.BenchRuns(0); err != nil || len(runs) != 0 {
		t.Fatalf("empty: %d %v", len(runs), err)
	}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 {
		if err := db.PutBenchRun(t0.Add(time.Duration(i)*time.Hour), []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := db.BenchRuns(0)
	if err != nil || len(runs) != 32 || string(runs[0]) != `{"n":39}` || string(runs[31]) != `{"n":8}` {
		t.Fatalf("kept %d: first %s last %s, %v", len(runs), runs[0], runs[len(runs)-1], err)
	}
	if runs, _ := db.BenchRuns(2); len(runs) != 2 || string(runs[1]) != `{"n":38}` {
		t.Fatalf("limit 2: %q", runs)
	}
}
