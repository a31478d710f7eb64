package kv

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The reports bucket holds what the publisher reports keep beside the
// demand log: daily rollups per domain and entry, written in the
// transaction that takes the searches they count off the log's list of
// records to count (RollupSearches), and the daily
// snapshots of adoption, usage and web positions. The keys and values are
// registry/report's encoding: this package stores bytes under keys and
// knows nothing of what they count.
var bucketReports = bucket("reports")

// Reports is the reports bucket inside one transaction. Byte slices it
// returns are valid only during that transaction.
type Reports struct {
	b        *bolt.Bucket
	c        *bolt.Cursor // reused by Get: bbolt's Get makes a cursor, and grows its stack, per call
	writable bool
	// staged, in a rollup's first pass (RollupSearches), takes the puts in
	// a read transaction; reads see the bucket as it was before them.
	staged *staging
}

// staging holds the puts of a rollup's first pass, in order, for its
// second pass to write, and what paces the pass.
type staging struct {
	keys, vals [][]byte
	arena      []byte // the keys' bytes: a put's key is the caller's scratch
	pace       func()
}

// Pace lets a long rollup give the processor back: in a rollup's first
// pass it calls the pacer RollupSearches was given (which may sleep); in
// a write transaction it does nothing, so the write lock is never held
// longer. A rollup calls it once per record or so.
func (r Reports) Pace() {
	if r.staged != nil && r.staged.pace != nil {
		r.staged.pace()
	}
}

// Get returns the value stored under key, or nil.
func (r Reports) Get(key []byte) []byte {
	if k, v := r.c.Seek(key); bytes.Equal(k, key) {
		return v
	}
	return nil
}

// GetSorted calls fn with the value stored under each of keys, or nil,
// in turn, until fn returns an error; keys must be in ascending order, and
// fn must not write to the bucket. Keys that lie close together in the
// bucket cost a cursor step each instead of a search from the root: a
// batch of rollups reads thousands of keys, most of them a few keys apart.
func (r Reports) GetSorted(keys []string, fn func(i int, val []byte) error) error {
	// maxSteps is how far the cursor walks before it searches instead: a
	// step costs about 40 ns, a search from the root 1-2 µs
	// (BenchmarkGetSorted), so a lookup costs at most about twice the
	// cheaper of the two.
	const maxSteps = 16
	c := r.b.Cursor()
	var buf, k, v []byte
	for i, key := range keys {
		buf = append(buf[:0], key...)
		steps := 0
		for i > 0 && k != nil && bytes.Compare(k, buf) < 0 && steps < maxSteps {
			k, v = c.Next()
			steps++
		}
		if i == 0 || k != nil && bytes.Compare(k, buf) < 0 {
			k, v = c.Seek(buf)
		}
		// The cursor is at the first key at or after key (nil: none).
		var val []byte
		if bytes.Equal(k, buf) {
			val = v
		}
		if err := fn(i, val); err != nil {
			return err
		}
		if i&63 == 63 {
			r.Pace()
		}
	}
	return nil
}

// Put stores val under key; only in a writable transaction or a rollup's
// first pass. val must not change until the transaction commits (bbolt
// keeps it, not a copy); key may.
func (r Reports) Put(key, val []byte) error {
	if st := r.staged; st != nil {
		if len(st.arena)+len(key) > cap(st.arena) {
			st.arena = make([]byte, 0, max(64<<10, len(key)))
		}
		st.arena = append(st.arena, key...)
		st.keys = append(st.keys, st.arena[len(st.arena)-len(key):len(st.arena):len(st.arena)])
		st.vals = append(st.vals, val)
		if len(st.keys)&63 == 0 {
			r.Pace()
		}
		return nil
	}
	if !r.writable {
		return fmt.Errorf("kv: reports: put in a read-only transaction")
	}
	return r.b.Put(key, val)
}

// Scan calls fn for every key with the given prefix from start (at or after
// start; start nil means the prefix itself), in key order, until fn returns
// false or an error.
func (r Reports) Scan(prefix, start []byte, fn func(k, v []byte) (bool, error)) error {
	c := r.b.Cursor()
	if start == nil || bytes.Compare(start, prefix) < 0 {
		start = prefix
	}
	for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// DeleteRange deletes the keys with the given prefix for which drop says
// so, at most limit of them, and reports how many it deleted.
func (r Reports) DeleteRange(prefix []byte, drop func(k []byte) bool, limit int) (int, error) {
	if !r.writable {
		return 0, fmt.Errorf("kv: reports: delete in a read-only transaction")
	}
	var doomed [][]byte
	c := r.b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(doomed) < limit; k, _ = c.Next() {
		if drop(k) {
			doomed = append(doomed, bytes.Clone(k))
		}
	}
	for _, k := range doomed {
		if err := r.b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
}

// ViewReports runs fn in a read transaction over the reports bucket.
func (db *DB) ViewReports(fn func(Reports) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketReports)
		return fn(Reports{b: b, c: b.Cursor()})
	})
}

// UpdateReports runs fn in a read-write transaction over the reports
// bucket, committed (fsynced) before it returns.
func (db *DB) UpdateReports(fn func(Reports) error) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		rb, err := writableReports(tx)
		if err != nil {
			return err
		}
		return fn(rb)
	})
}

// reportsFillPercent is the page fill of the reports bucket: rollup keys
// mostly arrive in order within a block (a new day's keys after the
// previous day's), and rewrites of existing keys keep their size, so pages
// split at half full would stay half empty.
const reportsFillPercent = 0.9

// writableReports is the reports bucket of write transaction tx. It moves
// the bucket's sequence on, which is how a rollup's second pass knows that
// nothing was written to the reports since its first (RollupSearches).
func writableReports(tx *bolt.Tx) (Reports, error) {
	b := tx.Bucket(bucketReports)
	b.FillPercent = reportsFillPercent
	if _, err := b.NextSequence(); err != nil {
		return Reports{}, err
	}
	return Reports{b: b, c: b.Cursor(), writable: true}, nil
}
