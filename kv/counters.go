package kv

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

var bucketCounters = bucket("counters")

// Incr adds delta to the named counter and returns the new value.
func (db *DB) Incr(name string, delta int64) (int64, error) {
	var v int64
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCounters)
		if cur := b.Get([]byte(name)); len(cur) == 8 {
			v = int64(binary.BigEndian.Uint64(cur))
		}
		v += delta
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], uint64(v))
		return b.Put([]byte(name), buf[:])
	})
	return v, err
}

// Counter returns the named counter's value (zero if never incremented).
func (db *DB) Counter(name string) (int64, error) {
	var v int64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if cur := tx.Bucket(bucketCounters).Get([]byte(name)); len(cur) == 8 {
			v = int64(binary.BigEndian.Uint64(cur))
		}
		return nil
	})
	return v, err
}
