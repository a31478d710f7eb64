package kv

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Settlement records: the facilitator's write-ahead log for exactly-once
// settlement. One record per canonical request body (its SHA-256, the "body
// key"), plus three indexes: authorization ID → body key (so two bodies that
// carry one signed authorization never broadcast twice), Idempotency-Key →
// body key, and the set of pending body keys (what Reconcile walks on start).
// Outcome counters live beside them and change in the same transaction as the
// outcome, so a settlement is counted exactly once.
var (
	bucketSettlements       = bucket("settlements")
	bucketSettlePending     = bucket("settlements_pending")
	bucketSettleAuthorities = bucket("settlements_by_authorization")
	bucketSettleIdemKeys    = bucket("settlements_idempotency_keys")
	bucketSettleCounts      = bucket("settlements_counts")
)

// SettlementState is where a settlement stands.
type SettlementState string

// The states of a settlement record. Pending is never a final answer.
const (
	SettlementPending   SettlementState = "pending"
	SettlementSucceeded SettlementState = "succeeded"
	SettlementFailed    SettlementState = "failed"
)

// Final reports whether the state is succeeded or failed.
func (s SettlementState) Final() bool {
	return s == SettlementSucceeded || s == SettlementFailed
}

// ErrSettlementFinal is returned when a write would change a settlement that
// already has a final outcome; the stored record is returned alongside it.
var ErrSettlementFinal = errors.New("kv: settlement already final")

// AuthorizationClaimedError is returned by RecordSettlementIntent when another
// body already owns the authorization.
type AuthorizationClaimedError struct {
	AuthorizationID string
	Owner           string // body key of the owning settlement
}

func (e *AuthorizationClaimedError) Error() string {
	return fmt.Sprintf("kv: authorization %s already claimed by settlement %s", e.AuthorizationID, e.Owner)
}

// SettlementIntent is what the facilitator is about to broadcast, recorded
// before the broadcast so a crash can be reconciled from it.
type SettlementIntent struct {
	AuthorizationID string    `json:"authorizationId"` // "<chainId>:<asset>:<from>:<nonce>", lower case
	Signer          string    `json:"signer"`
	Nonce           uint64    `json:"nonce"`  // the signer's account nonce
	TxHash          string    `json:"txHash"` // the latest transaction broadcast for it
	RawTx           []byte    `json:"rawTx"`  // TxHash's signed bytes
	RecordedAt      time.Time `json:"recordedAt"`
	// Replaced are the hashes broadcast before TxHash with the same signer
	// and nonce (a stuck transaction replaced at a higher fee), oldest
	// first. Any of them may be the one that mines.
	Replaced []string `json:"replaced,omitempty"`
	// Genesis is the genesis block hash of the chain the transaction was
	// signed for; a node that now serves another genesis is another chain.
	Genesis string `json:"genesis,omitempty"`
}

// Hashes returns every transaction hash broadcast for the intent, the
// latest first.
func (in *SettlementIntent) Hashes() []string {
	out := make([]string, 0, 1+len(in.Replaced))
	out = append(out, in.TxHash)
	for i := len(in.Replaced) - 1; i >= 0; i-- {
		out = append(out, in.Replaced[i])
	}
	return out
}

// Settlement is the durable record of one request body's settlement.
type Settlement struct {
	BodyKey string          `json:"bodyKey"` // hex SHA-256 of the canonical body
	Network string          `json:"network"` // label for counters: CAIP-2 id, or "unknown"
	State   SettlementState `json:"state"`
	// Body is the request as received; reconciliation after a restart decodes
	// it again to ask the chain about the authorization.
	Body   []byte            `json:"body,omitempty"`
	Intent *SettlementIntent `json:"intent,omitempty"`
	// Outcome labels the final result for counters: "succeeded" or the
	// failure's errorReason.
	Outcome string `json:"outcome,omitempty"`
	// Response is the final settle response JSON, nil while pending.
	Response   json.RawMessage `json:"response,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
	FinishedAt time.Time       `json:"finishedAt,omitzero"`
}

// SettlementCount is one counter: settlements on Network that ended in
// Outcome ("succeeded" or an errorReason).
type SettlementCount struct {
	Network string
	Outcome string
	Count   int64
}

// Settlement returns the record for bodyKey, or ErrNotFound.
func (db *DB) Settlement(bodyKey string) (Settlement, error) {
	var s Settlement
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		s, err = getSettlement(tx, bodyKey)
		return err
	})
	return s, err
}

// RecordSettlementIntent durably records s as pending with its intent, claims
// s.Intent.AuthorizationID for s.BodyKey and adds the body to the pending
// set, all in one fsynced commit. It refuses with *AuthorizationClaimedError
// when another body owns the authorization, and with ErrSettlementFinal when
// the body already has a final outcome. Re-recording a pending body replaces
// its intent.
func (db *DB) RecordSettlementIntent(s Settlement) error {
	return db.RecordSettlementIntents([]Settlement{s})
}

// RecordSettlementIntents records several intents as RecordSettlementIntent
// does, all or none, in one fsynced commit: a settlement worker records a
// run of prepared transactions before broadcasting them in nonce order.
func (db *DB) RecordSettlementIntents(recs []Settlement) error {
	for i := range recs {
		s := &recs[i]
		if s.Intent == nil || s.Intent.AuthorizationID == "" {
			return errors.New("kv: settlement intent without authorization id")
		}
		if s.BodyKey == "" {
			return errors.New("kv: settlement without body key")
		}
		s.State = SettlementPending
		s.Outcome, s.Response, s.FinishedAt = "", nil, time.Time{}
	}
	return db.group(func(tx *bolt.Tx) error {
		for _, s := range recs {
			if err := putIntent(tx, s); err != nil {
				return err
			}
		}
		return nil
	})
}

func putIntent(tx *bolt.Tx, s Settlement) error {
	auths := tx.Bucket(bucketSettleAuthorities)
	if owner := auths.Get([]byte(s.Intent.AuthorizationID)); owner != nil && string(owner) != s.BodyKey {
		return &AuthorizationClaimedError{AuthorizationID: s.Intent.AuthorizationID, Owner: string(owner)}
	}
	old, err := getSettlement(tx, s.BodyKey)
	switch {
	case err == nil && old.State.Final():
		return ErrSettlementFinal
	case err == nil:
		s.CreatedAt = old.CreatedAt
		// A replaced intent must not leave its old authorization claimed.
		if old.Intent != nil && old.Intent.AuthorizationID != s.Intent.AuthorizationID {
			if err := auths.Delete([]byte(old.Intent.AuthorizationID)); err != nil {
				return err
			}
		}
	case !errors.Is(err, ErrNotFound):
		return err
	}
	if err := auths.Put([]byte(s.Intent.AuthorizationID), []byte(s.BodyKey)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketSettlePending).Put([]byte(s.BodyKey), nil); err != nil {
		return err
	}
	return putSettlement(tx, s)
}

// FinishSettlement records s's final outcome (s.State succeeded or failed,
// s.Outcome and s.Response set), removes it from the pending set and counts
// it, in one fsynced commit. With releaseAuthorization the authorization the
// record claimed is freed (the transfer provably did not happen), so another
// body carrying it may settle. A record that is already final is left
// unchanged and returned with ErrSettlementFinal, so racing finishers count
// once. Concurrent callers are grouped into shared commits.
func (db *DB) FinishSettlement(s Settlement, releaseAuthorization bool) (Settlement, error) {
	if !s.State.Final() {
		return s, fmt.Errorf("kv: finish settlement with non-final state %q", s.State)
	}
	if s.BodyKey == "" || s.Outcome == "" || s.Network == "" {
		return s, errors.New("kv: finished settlement needs body key, network and outcome")
	}
	var stored Settlement
	var already bool
	err := db.group(func(tx *bolt.Tx) error {
		// group may run this function again; everything below is recomputed
		// from the transaction's view, so a retry writes the same result.
		stored, already = s, false
		old, err := getSettlement(tx, s.BodyKey)
		switch {
		case err == nil && old.State.Final():
			stored, already = old, true
			return nil
		case err == nil:
			stored.CreatedAt = old.CreatedAt
			if stored.Intent == nil {
				stored.Intent = old.Intent
			}
			if len(stored.Body) == 0 {
				stored.Body = old.Body
			}
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if stored.CreatedAt.IsZero() {
			stored.CreatedAt = s.FinishedAt
		}
		if err := tx.Bucket(bucketSettlePending).Delete([]byte(s.BodyKey)); err != nil {
			return err
		}
		if releaseAuthorization && stored.Intent != nil {
			auths := tx.Bucket(bucketSettleAuthorities)
			if owner := auths.Get([]byte(stored.Intent.AuthorizationID)); string(owner) == s.BodyKey {
				if err := auths.Delete([]byte(stored.Intent.AuthorizationID)); err != nil {
					return err
				}
			}
		}
		if err := incrCount(tx.Bucket(bucketSettleCounts), countKey(stored.Network, stored.Outcome)); err != nil {
			return err
		}
		return putSettlement(tx, stored)
	})
	if err != nil {
		return s, err
	}
	if already {
		return stored, ErrSettlementFinal
	}
	return stored, nil
}

// ReplaceSettlementTx records, before it is broadcast, a transaction that
// replaces the pending intent's latest one (same signer and nonce, higher
// fee): the old hash moves to Replaced, so whichever of them mines is
// found. It returns the updated record, or ErrSettlementFinal with the
// stored one when the settlement is already final.
func (db *DB) ReplaceSettlementTx(bodyKey, txHash string, raw []byte) (Settlement, error) {
	var out Settlement
	var final bool
	err := db.group(func(tx *bolt.Tx) error {
		final = false
		s, err := getSettlement(tx, bodyKey)
		if err != nil {
			return err
		}
		out = s
		if s.State.Final() {
			final = true
			return nil
		}
		if s.Intent == nil {
			return fmt.Errorf("kv: settlement %s has no intent to replace", bodyKey)
		}
		in := *s.Intent
		if in.TxHash != txHash {
			in.Replaced = append(slices.Clone(in.Replaced), in.TxHash)
			in.TxHash, in.RawTx = txHash, raw
		}
		s.Intent = &in
		out = s
		return putSettlement(tx, s)
	})
	if err == nil && final {
		return out, ErrSettlementFinal
	}
	return out, err
}

// AuthorizationOwner returns the body key of the settlement that claimed
// authID, or ErrNotFound.
func (db *DB) AuthorizationOwner(authID string) (string, error) {
	var owner string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSettleAuthorities).Get([]byte(authID))
		if v == nil {
			return ErrNotFound
		}
		owner = string(v)
		return nil
	})
	return owner, err
}

// PendingSettlements returns every settlement recorded with an intent and no
// final outcome yet, ordered by signer and account nonce.
func (db *DB) PendingSettlements() ([]Settlement, error) {
	var out []Settlement
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSettlePending).ForEach(func(k, _ []byte) error {
			s, err := getSettlement(tx, string(k))
			if err != nil {
				return fmt.Errorf("pending settlement %s: %w", k, err)
			}
			out = append(out, s)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sortSettlements(out)
	return out, nil
}

type idemRecord struct {
	BodyKey   string    `json:"bodyKey"`
	CreatedAt time.Time `json:"createdAt"`
}

// BindIdempotencyKey binds key to bodyKey unless it is already bound, and
// returns the body key the key is bound to (bodyKey itself when this call
// bound it). A binding older than ttl (ttl > 0) has expired and is replaced.
// The binding is committed (fsynced) before it returns.
func (db *DB) BindIdempotencyKey(key, bodyKey string, now time.Time, ttl time.Duration) (string, error) {
	if key == "" || bodyKey == "" {
		return "", errors.New("kv: empty idempotency key or body key")
	}
	live := func(r idemRecord) bool { return ttl <= 0 || now.Sub(r.CreatedAt) < ttl }
	// Most calls are retries of a bound key: answer them from a read, with no
	// commit to wait for.
	var bound string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketSettleIdemKeys).Get([]byte(key)); v != nil {
			var r idemRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode idempotency key: %w", err)
			}
			if live(r) {
				bound = r.BodyKey
			}
		}
		return nil
	})
	if err != nil || bound != "" {
		return bound, err
	}
	err = db.group(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSettleIdemKeys)
		if v := b.Get([]byte(key)); v != nil {
			var r idemRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode idempotency key: %w", err)
			}
			if live(r) {
				bound = r.BodyKey
				return nil
			}
		}
		v, err := json.Marshal(idemRecord{BodyKey: bodyKey, CreatedAt: now.UTC()})
		if err != nil {
			return err
		}
		bound = bodyKey
		return b.Put([]byte(key), v)
	})
	return bound, err
}

// SettlementCounts returns every outcome counter, ordered by network then
// outcome.
func (db *DB) SettlementCounts() ([]SettlementCount, error) {
	var out []SettlementCount
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSettleCounts).ForEach(func(k, v []byte) error {
			network, outcome, ok := strings.Cut(string(k), "\x00")
			if !ok || len(v) != 8 {
				return fmt.Errorf("malformed settlement counter %q", k)
			}
			out = append(out, SettlementCount{Network: network, Outcome: outcome, Count: int64(binary.BigEndian.Uint64(v))})
			return nil
		})
	})
	return out, err
}

// countKey joins network and outcome with a NUL, which neither contains, so
// byte order of keys is network order then outcome order.
func countKey(network, outcome string) []byte {
	return []byte(network + "\x00" + outcome)
}

func incrCount(b *bolt.Bucket, key []byte) error {
	var n uint64
	if cur := b.Get(key); len(cur) == 8 {
		n = binary.BigEndian.Uint64(cur)
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], n+1)
	return b.Put(key, buf[:])
}

func getSettlement(tx *bolt.Tx, bodyKey string) (Settlement, error) {
	v := tx.Bucket(bucketSettlements).Get([]byte(bodyKey))
	if v == nil {
		return Settlement{}, ErrNotFound
	}
	var s Settlement
	if err := json.Unmarshal(v, &s); err != nil {
		return Settlement{}, fmt.Errorf("kv: decode settlement %s: %w", bodyKey, err)
	}
	return s, nil
}

func putSettlement(tx *bolt.Tx, s Settlement) error {
	v, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("kv: encode settlement: %w", err)
	}
	return tx.Bucket(bucketSettlements).Put([]byte(s.BodyKey), v)
}

// sortSettlements orders by signer then account nonce, so reconciliation
// re-broadcasts each signer's transactions in nonce order (a later nonce is
// not accepted before an earlier one is).
func sortSettlements(s []Settlement) {
	slices.SortFunc(s, func(a, b Settlement) int {
		var as, bs string
		var an, bn uint64
		if a.Intent != nil {
			as, an = a.Intent.Signer, a.Intent.Nonce
		}
		if b.Intent != nil {
			bs, bn = b.Intent.Signer, b.Intent.Nonce
		}
		return cmp.Or(strings.Compare(as, bs), cmp.Compare(an, bn), strings.Compare(a.BodyKey, b.BodyKey))
	})
}
