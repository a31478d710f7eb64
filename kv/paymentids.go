package kv

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Payment ids: the x402 payment-identifier extension's id → the purchase it
// was first used for (a fingerprint of the terms) and the body that pays
// for it, so a retry that carries a fresh authorization finds the first
// body's settlement instead of starting a second purchase.
var bucketPaymentIDs = bucket("payment_ids")

// PaymentIDBinding is what a payment id is bound to.
type PaymentIDBinding struct {
	// Fingerprint identifies the purchase (terms and resource).
	Fingerprint string `json:"fingerprint"`
	// BodyKey and Body are the settle body that pays for it.
	BodyKey   string    `json:"bodyKey"`
	Body      []byte    `json:"body"`
	CreatedAt time.Time `json:"createdAt"`
}

// BindPaymentID binds id to b unless id is bound already, and returns the
// binding in force (b itself when this call bound it). A binding older than
// ttl (ttl > 0) has expired and is replaced, and so is one whose body key
// is replace (replace "" replaces nothing): the caller's way to hand a
// purchase whose first body failed to a new body, atomically. The binding
// is committed (fsynced) before it returns.
func (db *DB) BindPaymentID(id string, b PaymentIDBinding, replace string, ttl time.Duration) (PaymentIDBinding, error) {
	if id == "" || b.BodyKey == "" || b.Fingerprint == "" {
		return PaymentIDBinding{}, errors.New("kv: empty payment id, body key or fingerprint")
	}
	// current is the binding that stands, if any.
	current := func(tx *bolt.Tx) (PaymentIDBinding, bool, error) {
		v := tx.Bucket(bucketPaymentIDs).Get([]byte(id))
		if v == nil {
			return PaymentIDBinding{}, false, nil
		}
		var cur PaymentIDBinding
		if err := json.Unmarshal(v, &cur); err != nil {
			return PaymentIDBinding{}, false, fmt.Errorf("decode payment id: %w", err)
		}
		expired := ttl > 0 && b.CreatedAt.Sub(cur.CreatedAt) >= ttl
		stands := !expired && (replace == "" || cur.BodyKey != replace)
		return cur, stands, nil
	}
	// Retries of a bound id are the common case: answer them from a read.
	var found PaymentIDBinding
	var stands bool
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		found, stands, err = current(tx)
		return err
	})
	if err != nil || stands {
		return found, err
	}
	err = db.group(func(tx *bolt.Tx) error {
		var err error
		if found, stands, err = current(tx); err != nil || stands {
			return err
		}
		v, err := json.Marshal(b)
		if err != nil {
			return err
		}
		found = b
		return tx.Bucket(bucketPaymentIDs).Put([]byte(id), v)
	})
	return found, err
}
