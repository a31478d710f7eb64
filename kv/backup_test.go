package kv_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// TestWriteBackupIsConsistentUnderWrites copies the store while a writer
// keeps committing: the copy opens and holds a state the store went
// through.
func TestWriteBackupIsConsistentUnderWrites(t *testing.T) {
	db, err := kv.Open(t.TempDir(), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.Incr("a", 1); err != nil {
				t.Error(err)
				return
			}
		}
	})
	time.Sleep(20 * time.Millisecond)
	copyDir := t.TempDir()
	f, err := os.Create(filepath.Join(copyDir, kv.FileName))
	if err != nil {
		t.Fatal(err)
	}
	n, err := db.WriteBackup(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if fi, _ := os.Stat(f.Name()); fi.Size() != n {
		t.Fatalf("WriteBackup reported %d bytes, file has %d", n, fi.Size())
	}
	cp, err := kv.Open(copyDir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	a, _ := cp.Counter("a")
	final, _ := db.Counter("a")
	if a == 0 || a > final {
		t.Fatalf("copy has a=%d, store ended at %d", a, final)
	}
}

func TestOpenReportsALockedStore(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = kv.Open(dir, kv.Options{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, kv.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}
