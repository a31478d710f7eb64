package kv

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The credit ledger: one balance per account, every movement as an entry
// keyed by account and sequence number, and each movement's reference
// (a payment, a monitoring period) bound to its entry so the same
// movement applied twice changes nothing.
var (
	bucketCreditBalances = bucket("credit_balances") // account → int64
	bucketCreditLedger   = bucket("credit_ledger")   // account \x00 seq → CreditEntry
	bucketCreditRefs     = bucket("credit_refs")     // ref → account \x00 seq
)

// ErrInsufficientCredits is ApplyCredit's error when a debit is larger than
// the balance; nothing is recorded.
var ErrInsufficientCredits = errors.New("kv: insufficient credits")

// CreditEntry is one movement of an account's credits.
type CreditEntry struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Delta is positive for a purchase, negative for a charge.
	Delta int64 `json:"delta"`
	// Balance is the account's balance after this movement.
	Balance int64 `json:"balance"`
	// Kind names the movement ("purchase", "monitoring").
	Kind string `json:"kind"`
	// Ref identifies the movement (a payment's authorization, a monitoring
	// period); one ref moves credits once.
	Ref string `json:"ref"`
	// Detail is the kind's own data, a JSON object.
	Detail json.RawMessage `json:"detail,omitempty"`
}

// ApplyCredit adds e.Delta to account's balance and records e, committed
// (fsynced) before it returns, unless e.Ref was applied already: then it
// returns the recorded entry and applied false. A debit the balance does not
// cover is ErrInsufficientCredits and records nothing.
func (db *DB) ApplyCredit(account string, e CreditEntry) (CreditEntry, bool, error) {
	if account == "" || e.Ref == "" || e.Kind == "" {
		return CreditEntry{}, false, errors.New("kv: credit needs an account, a kind and a ref")
	}
	var out CreditEntry
	applied := false
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		refs := tx.Bucket(bucketCreditRefs)
		ledger := tx.Bucket(bucketCreditLedger)
		if k := refs.Get([]byte(e.Ref)); k != nil {
			return json.Unmarshal(ledger.Get(k), &out)
		}
		bal := tx.Bucket(bucketCreditBalances)
		var cur int64
		if v := bal.Get([]byte(account)); len(v) == 8 {
			cur = int64(binary.BigEndian.Uint64(v))
		}
		if cur+e.Delta < 0 {
			return ErrInsufficientCredits
		}
		seq, err := ledger.NextSequence()
		if err != nil {
			return err
		}
		e.Seq, e.Balance = seq, cur+e.Delta
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		k := ledgerKey(account, seq)
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(e.Balance))
		if err := bal.Put([]byte(account), b[:]); err != nil {
			return err
		}
		if err := ledger.Put(k, v); err != nil {
			return err
		}
		out, applied = e, true
		return refs.Put([]byte(e.Ref), k)
	})
	if err != nil && !errors.Is(err, ErrInsufficientCredits) {
		err = fmt.Errorf("kv: apply credit: %w", err)
	}
	return out, applied, err
}

// CreditBalance returns account's balance (0 for an account with none).
func (db *DB) CreditBalance(account string) (int64, error) {
	var cur int64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketCreditBalances).Get([]byte(account)); len(v) == 8 {
			cur = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return cur, err
}

// CreditHistory returns account's last limit movements, newest first.
func (db *DB) CreditHistory(account string, limit int) ([]CreditEntry, error) {
	out := []CreditEntry{}
	prefix := append([]byte(account), 0)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketCreditLedger).Cursor()
		// Seek past the account's last key, then walk back.
		k, v := c.Seek(ledgerKey(account, ^uint64(0)))
		if k == nil {
			k, v = c.Last()
		} else if !bytes.Equal(k, ledgerKey(account, ^uint64(0))) {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Prev() {
			var e CreditEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode credit entry: %w", err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kv: credit history: %w", err)
	}
	return out, nil
}

func ledgerKey(account string, seq uint64) []byte {
	k := make([]byte, 0, len(account)+9)
	k = append(k, account...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// bucketCreditIntents binds a payment reference to the account it buys for
// and the settle body, before the facilitator is asked.
var bucketCreditIntents = bucket("credit_intents") // ref → CreditIntent

// CreditIntent is a purchase whose payment went (or is about to go) to the
// facilitator.
type CreditIntent struct {
	Account   string    `json:"account"`
	BodyHash  string    `json:"bodyHash"`
	CreatedAt time.Time `json:"createdAt"`
	// Body is the settle request body and Credits what it buys, so a
	// purchase whose answer never reached the buyer (settlement pending, a
	// crash) is settled and credited by the registry itself.
	Body    json.RawMessage `json:"body,omitempty"`
	Credits int64           `json:"credits,omitempty"`
	// Done marks an intent that needs nothing more: credited, or refused
	// by the facilitator for good.
	Done bool `json:"done,omitempty"`
}

// PendingCreditIntent is an intent that is not done, with its reference.
type PendingCreditIntent struct {
	Ref string
	CreditIntent
}

// PendingCreditIntents returns up to max intents that are not done and
// were bound before before, oldest reference order.
func (db *DB) PendingCreditIntents(before time.Time, max int) ([]PendingCreditIntent, error) {
	var out []PendingCreditIntent
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCreditIntents).ForEach(func(k, v []byte) error {
			if len(out) >= max {
				return nil
			}
			var in CreditIntent
			if err := json.Unmarshal(v, &in); err != nil {
				return fmt.Errorf("decode credit intent %q: %w", k, err)
			}
			if !in.Done && in.CreatedAt.Before(before) {
				out = append(out, PendingCreditIntent{Ref: string(k), CreditIntent: in})
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("kv: pending credit intents: %w", err)
	}
	return out, nil
}

// FinishCreditIntent marks ref's intent done; committed before it returns.
// An unknown ref is no error.
func (db *DB) FinishCreditIntent(ref string) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCreditIntents)
		v := b.Get([]byte(ref))
		if v == nil {
			return nil
		}
		var in CreditIntent
		if err := json.Unmarshal(v, &in); err != nil {
			return err
		}
		if in.Done {
			return nil
		}
		in.Done = true
		nv, err := json.Marshal(in)
		if err != nil {
			return err
		}
		return b.Put([]byte(ref), nv)
	})
	if err != nil {
		return fmt.Errorf("kv: finish credit intent: %w", err)
	}
	return nil
}

// BindCreditIntent records in for ref unless ref is bound already, and
// returns the binding in force and whether this call made it; committed
// before it returns.
func (db *DB) BindCreditIntent(ref string, in CreditIntent) (CreditIntent, bool, error) {
	var out CreditIntent
	made := false
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCreditIntents)
		if v := b.Get([]byte(ref)); v != nil {
			return json.Unmarshal(v, &out)
		}
		v, err := json.Marshal(in)
		if err != nil {
			return err
		}
		out, made = in, true
		return b.Put([]byte(ref), v)
	})
	if err != nil {
		return CreditIntent{}, false, fmt.Errorf("kv: bind credit intent: %w", err)
	}
	return out, made, nil
}

// CreditByRef returns the entry ref moved and its account, or ErrNotFound.
func (db *DB) CreditByRef(ref string) (string, CreditEntry, error) {
	var e CreditEntry
	var account string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		k := tx.Bucket(bucketCreditRefs).Get([]byte(ref))
		if k == nil || len(k) < 9 {
			return ErrNotFound
		}
		account = string(k[:len(k)-9])
		return json.Unmarshal(tx.Bucket(bucketCreditLedger).Get(k), &e)
	})
	return account, e, err
}
