package kv

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Benchmark runs are kept as their reports (opaque JSON), keyed by the
// big-endian UnixNano of the run, so the newest is the last key.
var bucketBenchRuns = bucket("bench_runs")

// keepBenchRuns is how many reports are kept: a month of daily runs.
const keepBenchRuns = 32

// PutBenchRun stores the report of a benchmark run made at `at` and drops
// the oldest reports beyond the last keepBenchRuns.
func (db *DB) PutBenchRun(at time.Time, report []byte) error {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(at.UnixNano()))
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBenchRuns)
		if err := b.Put(k[:], report); err != nil {
			return err
		}
		c := b.Cursor()
		extra := -keepBenchRuns
		for key, _ := c.First(); key != nil; key, _ = c.Next() {
			extra++
		}
		for key, _ := c.First(); key != nil && extra > 0; key, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
			extra--
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kv: put bench run: %w", err)
	}
	return nil
}

// BenchRuns returns up to limit stored reports, newest first (limit <= 0:
// all kept).
func (db *DB) BenchRuns(limit int) ([][]byte, error) {
	var out [][]byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBenchRuns).Cursor()
		for k, v := c.Last(); k != nil && (limit <= 0 || len(out) < limit); k, v = c.Prev() {
			out = append(out, append([]byte(nil), v...))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kv: bench runs: %w", err)
	}
	return out, nil
}
