package kv

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Monitoring: one subscription per domain (its watcher, state, trial and
// paid period, webhook), the domains whose free trial was used (by which
// account), and the outbox of webhook deliveries.
var (
	bucketMonitors     = bucket("monitors")       // account \x00 domain → Monitor
	bucketMonitorTrial = bucket("monitor_trials") // domain → account \x00 account … that had its trial
	bucketOutbox       = bucket("webhook_outbox") // big-endian seq → OutboxItem
	bucketOutboxKeys   = bucket("webhook_keys")   // dedupe key → seq
)

// Monitor is one account's monitoring of one domain. Its states and rules live
// in registry/access; kv stores it.
type Monitor struct {
	Domain    string    `json:"domain"`
	Account   string    `json:"account"`
	State     string    `json:"state"`
	StartedAt time.Time `json:"startedAt"`
	// TrialEnd is the end of the free trial (zero when none was granted).
	TrialEnd time.Time `json:"trialEnd,omitzero"`
	// PaidUntil is the end of the period covered so far (the trial's end,
	// then each charged period's).
	PaidUntil time.Time `json:"paidUntil,omitzero"`
	StoppedAt time.Time `json:"stoppedAt,omitzero"`
	// WebhookURL receives the domain's alerts, signed with WebhookSecret
	// (kept as is: the registry must sign with it).
	WebhookURL    string `json:"webhookURL,omitempty"`
	WebhookSecret string `json:"webhookSecret,omitempty"`
}

// GetMonitor returns account's monitoring of domain or ErrNotFound.
func (db *DB) GetMonitor(account, domain string) (Monitor, error) {
	var m Monitor
	err := db.bolt.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMonitors).Get(monitorKey(account, domain))
		if v == nil {
			return ErrNotFound
		}
		return json.Unmarshal(v, &m)
	})
	return m, err
}

// Monitors calls fn with every subscription, in account and domain order.
func (db *DB) Monitors(fn func(Monitor) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMonitors).ForEach(func(k, v []byte) error {
			var m Monitor
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("decode monitor %s: %w", k, err)
			}
			return fn(m)
		})
	})
}

// TrialAccounts returns the accounts that had a monitoring trial of domain.
func (db *DB) TrialAccounts(domain string) ([]string, error) {
	var out []string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMonitorTrial).Get([]byte(domain))
		if v != nil {
			return json.Unmarshal(v, &out)
		}
		return nil
	})
	return out, err
}

// StartMonitor stores m and, when trial is set, records that m.Account had
// the domain's trial, in one commit. allow decides, inside the transaction,
// whether the trial may be granted given the accounts that had one; when it
// says no, nothing is stored and its error is returned.
func (db *DB) StartMonitor(m Monitor, trial bool, allow func(had []string) error) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		tb := tx.Bucket(bucketMonitorTrial)
		var had []string
		if cur := tb.Get([]byte(m.Domain)); cur != nil {
			if err := json.Unmarshal(cur, &had); err != nil {
				return err
			}
		}
		if allow != nil {
			if err := allow(had); err != nil {
				return err
			}
		}
		if trial {
			b, err := json.Marshal(append(had, m.Account))
			if err != nil {
				return err
			}
			if err := tb.Put([]byte(m.Domain), b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMonitors).Put(monitorKey(m.Account, m.Domain), v)
	})
}

// OutboxItem is one webhook delivery waiting in the outbox.
type OutboxItem struct {
	Seq     uint64 `json:"seq"`
	Key     string `json:"key"` // what makes it unique (the event and the subscription)
	Account string `json:"account"`
	Domain  string `json:"domain"`
	URL     string `json:"url"`
	// Body is the JSON posted; it is signed at each attempt.
	Body        json.RawMessage `json:"body"`
	CreatedAt   time.Time       `json:"createdAt"`
	Attempts    int             `json:"attempts"`
	NextAttempt time.Time       `json:"nextAttempt"`
	LastError   string          `json:"lastError,omitempty"`
	// Dead is set when the deliverer gave up; the item is kept for the owner.
	Dead bool `json:"dead,omitempty"`
}

// EnqueueOutbox adds items whose Key is new and sets the counter named
// cursor to cursorValue, in one commit, so a tailer that dies between
// reading events and enqueueing them neither loses nor repeats one.
func (db *DB) EnqueueOutbox(items []OutboxItem, cursor string, cursorValue int64) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		ob, keys := tx.Bucket(bucketOutbox), tx.Bucket(bucketOutboxKeys)
		for _, it := range items {
			if it.Key == "" {
				return errors.New("kv: outbox item without a key")
			}
			if keys.Get([]byte(it.Key)) != nil {
				continue
			}
			seq, err := ob.NextSequence()
			if err != nil {
				return err
			}
			it.Seq = seq
			v, err := json.Marshal(it)
			if err != nil {
				return err
			}
			if err := ob.Put(seqKey(seq), v); err != nil {
				return err
			}
			if err := keys.Put([]byte(it.Key), seqKey(seq)); err != nil {
				return err
			}
		}
		if cursor == "" {
			return nil
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(cursorValue))
		return tx.Bucket(bucketCounters).Put([]byte(cursor), b[:])
	})
}

// DueOutbox returns up to limit live items whose next attempt is at or
// before now, oldest first.
func (db *DB) DueOutbox(now time.Time, limit int) ([]OutboxItem, error) {
	var out []OutboxItem
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(_, v []byte) error {
			if len(out) >= limit {
				return nil
			}
			var it OutboxItem
			if err := json.Unmarshal(v, &it); err != nil {
				return err
			}
			if !it.Dead && !it.NextAttempt.After(now) {
				out = append(out, it)
			}
			return nil
		})
	})
	return out, err
}

// OutboxItems returns every item of domain, delivered ones excluded.
func (db *DB) OutboxItems(domain string) ([]OutboxItem, error) {
	var out []OutboxItem
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(_, v []byte) error {
			var it OutboxItem
			if err := json.Unmarshal(v, &it); err != nil {
				return err
			}
			if it.Domain == domain {
				out = append(out, it)
			}
			return nil
		})
	})
	return out, err
}

// UpdateOutbox stores it again after an attempt (its attempts, next attempt,
// error, dead mark), or removes it when delivered; the dedupe key stays, so
// the event is never enqueued again.
func (db *DB) UpdateOutbox(it OutboxItem, delivered bool) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		ob := tx.Bucket(bucketOutbox)
		if delivered {
			return ob.Delete(seqKey(it.Seq))
		}
		v, err := json.Marshal(it)
		if err != nil {
			return err
		}
		return ob.Put(seqKey(it.Seq), v)
	})
}

func monitorKey(account, domain string) []byte {
	return []byte(account + "\x00" + domain)
}

// UpdateMonitor applies fn to account's monitoring of domain and stores the
// result, in one commit, so concurrent changes (a stop during a charge) are
// never lost. ErrNotFound when there is none.
func (db *DB) UpdateMonitor(account, domain string, fn func(*Monitor) error) (Monitor, error) {
	var m Monitor
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMonitors)
		v := b.Get(monitorKey(account, domain))
		if v == nil {
			return ErrNotFound
		}
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		if err := fn(&m); err != nil {
			return err
		}
		nv, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return b.Put(monitorKey(account, domain), nv)
	})
	return m, err
}
