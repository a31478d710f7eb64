package kv

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The facilitator's catalogue of paid resources (the x402 bazaar), and the
// echo merchant's payments with the per-address and per-day counters its
// caps are checked against.
var (
	bucketCatalogue  = bucket("catalogue")
	bucketEchoPay    = bucket("echo_payments")
	bucketEchoCounts = bucket("echo_counts")
)

// CatalogueEntry is one paid resource seen in a successful settlement.
// Key identifies it (canonical URL plus method, or plus tool name for MCP);
// the other members are what the merchant declared.
type CatalogueEntry struct {
	Key         string          `json:"key"`
	Resource    string          `json:"resource"`
	Type        string          `json:"type"` // "http" or "mcp"
	Method      string          `json:"method,omitempty"`
	ToolName    string          `json:"toolName,omitempty"`
	X402Version int             `json:"x402Version"`
	Description string          `json:"description,omitempty"`
	MimeType    string          `json:"mimeType,omitempty"`
	Accepts     json.RawMessage `json:"accepts"`
	// Scheme, Network, Asset, Amount and PayTo repeat the accepted terms
	// so filters need not parse Accepts.
	Scheme        string          `json:"scheme"`
	Network       string          `json:"network"`
	Asset         string          `json:"asset"`
	Amount        string          `json:"amount"`
	PayTo         string          `json:"payTo"`
	DiscoveryInfo json.RawMessage `json:"discoveryInfo,omitempty"`
	RouteTemplate string          `json:"routeTemplate,omitempty"`
	FirstSeen     time.Time       `json:"firstSeen"`
	LastSeen      time.Time       `json:"lastSeen"`
	// Settlements counts the successful settlements that named it.
	Settlements int64 `json:"settlements"`
}

// PutCatalogueEntry records e, replacing the terms and shapes of an entry
// with the same key but keeping its FirstSeen and adding to its settlement
// count. It returns the stored entry.
func (db *DB) PutCatalogueEntry(e CatalogueEntry) (CatalogueEntry, error) {
	if e.Key == "" || len(e.Key) > maxSecondaryKeyPart {
		return e, errors.New("kv: catalogue entry: empty or oversized key")
	}
	e.FirstSeen, e.LastSeen = e.FirstSeen.UTC(), e.LastSeen.UTC()
	var stored CatalogueEntry
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCatalogue)
		stored = e
		if old := b.Get([]byte(e.Key)); old != nil {
			var prev CatalogueEntry
			if err := json.Unmarshal(old, &prev); err == nil {
				stored.FirstSeen = prev.FirstSeen
				stored.Settlements = prev.Settlements + e.Settlements
			}
		}
		if stored.FirstSeen.IsZero() {
			stored.FirstSeen = stored.LastSeen
		}
		v, err := json.Marshal(stored)
		if err != nil {
			return err
		}
		return b.Put([]byte(e.Key), v)
	})
	if err != nil {
		return e, fmt.Errorf("kv: put catalogue entry %q: %w", e.Key, err)
	}
	return stored, nil
}

// CatalogueEntries returns every catalogue entry in key order.
func (db *DB) CatalogueEntries() ([]CatalogueEntry, error) {
	var out []CatalogueEntry
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCatalogue).ForEach(func(k, v []byte) error {
			var e CatalogueEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("entry %q: %w", k, err)
			}
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("kv: catalogue: %w", err)
	}
	return out, nil
}

// EchoState is where one echo payment stands.
type EchoState string

// States of an echo payment.
const (
	// EchoSettling: reserved against the caps, settlement under way.
	EchoSettling EchoState = "settling"
	// EchoPending: the settlement answered settlement_pending; the same
	// payment sent again asks the engine once more.
	EchoPending EchoState = "pending"
	// EchoSettled: the payment settled; the refund has not been recorded.
	EchoSettled EchoState = "settled"
	// EchoRefunded: the refund transaction was mined.
	EchoRefunded EchoState = "refunded"
	// EchoRefundFailed: the refund could not be sent or reverted; it is
	// never retried automatically (at most one refund per payment).
	EchoRefundFailed EchoState = "refund_failed"
)

// EchoPayment is one payment made to the echo merchant, keyed by the
// settlement body key, with its refund.
type EchoPayment struct {
	ID          string    `json:"id"`
	Day         string    `json:"day"`   // UTC date, 2006-01-02, the cap's day
	Payer       string    `json:"payer"` // lower-case address
	Network     string    `json:"network"`
	Amount      string    `json:"amount"`
	State       EchoState `json:"state"`
	Settlement  string    `json:"settlement,omitempty"` // the settle response JSON
	SettleTx    string    `json:"settleTx,omitempty"`
	RefundTx    string    `json:"refundTx,omitempty"`
	RefundError string    `json:"refundError,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// Cap scopes reported by EchoCapError.
const (
	CapPerAddress = "address"
	CapPerDay     = "day"
)

// EchoCapError is returned by ReserveEchoPayment when a cap is reached.
type EchoCapError struct {
	Scope string // CapPerAddress or CapPerDay
	Limit int64
}

func (e *EchoCapError) Error() string {
	return fmt.Sprintf("kv: echo cap per %s of %d reached", e.Scope, e.Limit)
}

// ErrEchoPaymentExists is returned by ReserveEchoPayment with the stored
// record when the payment is already known.
var ErrEchoPaymentExists = errors.New("kv: echo payment already recorded")

// ReserveEchoPayment records p (state EchoSettling) and counts it against
// its payer's and its day's caps in one commit, unless a cap (0 means none)
// would be exceeded (*EchoCapError) or p.ID is already recorded
// (ErrEchoPaymentExists, with the stored record).
func (db *DB) ReserveEchoPayment(p EchoPayment, perAddress, perDay int64) (EchoPayment, error) {
	if p.ID == "" || p.Day == "" || p.Payer == "" {
		return p, errors.New("kv: echo payment needs id, day and payer")
	}
	p.Payer = strings.ToLower(p.Payer)
	p.State = EchoSettling
	var stored EchoPayment
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		pays := tx.Bucket(bucketEchoPay)
		if old := pays.Get([]byte(p.ID)); old != nil {
			if err := json.Unmarshal(old, &stored); err != nil {
				return err
			}
			return ErrEchoPaymentExists
		}
		counts := tx.Bucket(bucketEchoCounts)
		dayKey, addrKey := echoDayKey(p.Day), echoAddrKey(p.Day, p.Payer)
		if perAddress > 0 && getCount(counts, addrKey) >= perAddress {
			return &EchoCapError{Scope: CapPerAddress, Limit: perAddress}
		}
		if perDay > 0 && getCount(counts, dayKey) >= perDay {
			return &EchoCapError{Scope: CapPerDay, Limit: perDay}
		}
		if err := errors.Join(addCount(counts, dayKey, 1), addCount(counts, addrKey, 1)); err != nil {
			return err
		}
		stored = p
		return putJSON(pays, p.ID, p)
	})
	return stored, err
}

// UpdateEchoPayment stores a recorded payment's new state.
func (db *DB) UpdateEchoPayment(p EchoPayment) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		pays := tx.Bucket(bucketEchoPay)
		if pays.Get([]byte(p.ID)) == nil {
			return ErrNotFound
		}
		return putJSON(pays, p.ID, p)
	})
}

// ReleaseEchoPayment forgets a payment that moved no money (its settlement
// failed) and gives its place under the caps back.
func (db *DB) ReleaseEchoPayment(id string) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		pays := tx.Bucket(bucketEchoPay)
		raw := pays.Get([]byte(id))
		if raw == nil {
			return nil
		}
		var p EchoPayment
		if err := json.Unmarshal(raw, &p); err != nil {
			return err
		}
		counts := tx.Bucket(bucketEchoCounts)
		if err := errors.Join(addCount(counts, echoDayKey(p.Day), -1), addCount(counts, echoAddrKey(p.Day, p.Payer), -1)); err != nil {
			return err
		}
		return pays.Delete([]byte(id))
	})
}

// EchoPaymentByID returns the recorded payment, or ErrNotFound.
func (db *DB) EchoPaymentByID(id string) (EchoPayment, error) {
	var p EchoPayment
	err := db.bolt.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketEchoPay).Get([]byte(id))
		if raw == nil {
			return ErrNotFound
		}
		return json.Unmarshal(raw, &p)
	})
	return p, err
}

// EchoCounts returns how many echo payments count against day's cap, in
// total and for payer ("" skips the payer's count).
func (db *DB) EchoCounts(day, payer string) (total, byPayer int64, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		counts := tx.Bucket(bucketEchoCounts)
		total = getCount(counts, echoDayKey(day))
		if payer != "" {
			byPayer = getCount(counts, echoAddrKey(day, strings.ToLower(payer)))
		}
		return nil
	})
	return total, byPayer, err
}

func echoDayKey(day string) []byte { return []byte("day\x00" + day) }

func echoAddrKey(day, payer string) []byte { return []byte("addr\x00" + day + "\x00" + payer) }

func getCount(b *bolt.Bucket, key []byte) int64 {
	if v := b.Get(key); len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

// addCount adjusts a counter; a counter back at zero is deleted so old days
// do not accumulate keys.
func addCount(b *bolt.Bucket, key []byte, delta int64) error {
	n := getCount(b, key) + delta
	if n <= 0 {
		return b.Delete(key)
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(n))
	return b.Put(key, buf[:])
}

func putJSON(b *bolt.Bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), raw)
}
