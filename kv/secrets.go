package kv

import (
	"crypto/rand"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var bucketSecrets = bucket("secrets")

// Secret returns the named random secret of size bytes, creating it on
// first use, so a key (such as the one that signs page tokens) survives
// restarts. A stored secret of another size is replaced.
func (db *DB) Secret(name string, size int) ([]byte, error) {
	var out []byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketSecrets).Get([]byte(name)); len(v) == size {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil || out != nil {
		return out, err
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSecrets)
		if v := b.Get([]byte(name)); len(v) == size { // another writer won
			out = append([]byte(nil), v...)
			return nil
		}
		out = make([]byte, size)
		if _, err := rand.Read(out); err != nil {
			return err
		}
		return b.Put([]byte(name), out)
	})
	if err != nil {
		return nil, fmt.Errorf("kv: secret %s: %w", name, err)
	}
	return out, nil
}
