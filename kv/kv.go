// Package kv owns ardx's durable state: one bbolt file under the data dir,
// with typed buckets for each kind of record (registry entries, change
// events, the demand log, counters, settlement intents and outcomes,
// idempotency keys). It holds no HTTP and no business rules: callers hand it
// values and it stores them, committing (fsync) before it returns.
//
// Bucket names and key encodings are unexported constants of this package;
// callers never see bbolt types.
package kv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("kv: not found")

// appendFillPercent is the page fill for buckets whose keys only grow (the
// demand log, change events). bbolt splits at half a page by default, which
// suits random inserts and leaves append-only buckets half empty.
const appendFillPercent = 0.95

// FileName is the name of the bbolt file inside the data dir.
const FileName = "ardx.db"

// DB is the bbolt-backed store. It is safe for concurrent use.
type DB struct {
	bolt   *bolt.DB
	path   string
	writes groupCommit // settlement writes share fsyncs
}

// ErrLocked is Open's error when another process holds the store's file
// lock: only one process may open a data dir.
var ErrLocked = errors.New("another ardx process (a running server?) holds the data dir")

// Options tune Open.
type Options struct {
	// Timeout bounds the wait for the file lock held by another process.
	// Zero means 2 seconds; bbolt's own default (wait forever) is never used.
	Timeout time.Duration
}

// Open opens (creating if needed) the store in dir/ardx.db and makes sure every
// bucket exists.
func Open(dir string, opts Options) (*DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("kv: create data dir: %w", err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	path := filepath.Join(dir, FileName)
	// A 64 MiB initial map saves bbolt re-mapping (and copying) the file
	// repeatedly while a first large ingest grows it; it reserves address
	// space, not memory.
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.Timeout, InitialMmapSize: 64 << 20})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("kv: open %s: %w", path, err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("kv: %w", err)
	}
	return &DB{bolt: b, path: path}, nil
}

// Path returns the file path of the store.
func (db *DB) Path() string { return db.path }

// Close closes the file. Pending writes have been committed already.
func (db *DB) Close() error { return db.bolt.Close() }

// allBuckets lists every top-level bucket; each record kind registers its
// bucket names here from its own file's init-free var block.
var allBuckets [][]byte

// bucket declares a top-level bucket and returns its name.
func bucket(name string) []byte {
	b := []byte(name)
	allBuckets = append(allBuckets, b)
	return b
}

// WriteBackup writes a consistent copy of the whole store to w, taken in
// one read transaction while writers go on (bbolt's Tx.WriteTo), and
// returns its size. The copy is a bbolt file that Open accepts.
func (db *DB) WriteBackup(w io.Writer) (int64, error) {
	var n int64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("kv: backup: %w", err)
	}
	return n, nil
}
