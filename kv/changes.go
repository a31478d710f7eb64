package kv

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The change feed is an append-only bucket keyed by the big-endian sequence
// number, so a cursor seek resumes a reader exactly where it left off.
var bucketChanges = bucket("changes")

// Change kinds recorded by ReplaceSource.
const (
	ChangeAdded   = "entry.added"
	ChangeChanged = "entry.changed"
	ChangeRemoved = "entry.removed"
)

// Change is one event of the registry's change feed.
type Change struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"` // ChangeAdded, ChangeChanged, ChangeRemoved, or another component's kind
	ID        string    `json:"identifier"`
	Publisher string    `json:"publisher"`
	Source    string    `json:"source"`
	// Endpoint is the probed URL, for the prober's kinds.
	Endpoint string `json:"endpoint,omitempty"`
	// Detail is the kind's own data (for instance the tool counts before
	// and after), a JSON object.
	Detail json.RawMessage `json:"detail,omitempty"`
}

// Changes returns up to limit events with a sequence number above afterSeq,
// oldest first. A limit of zero or less means no limit.
func (db *DB) Changes(afterSeq uint64, limit int) ([]Change, error) {
	var out []Change
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketChanges).Cursor()
		for k, v := c.Seek(seqKey(afterSeq + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			var ch Change
			if err := json.Unmarshal(v, &ch); err != nil {
				return fmt.Errorf("decode change %x: %w", k, err)
			}
			out = append(out, ch)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kv: changes: %w", err)
	}
	return out, nil
}

// ScanChanges calls fn with each event whose sequence number is above
// afterSeq, oldest first, in one read transaction, until fn returns false.
func (db *DB) ScanChanges(afterSeq uint64, fn func(Change) bool) error {
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketChanges).Cursor()
		for k, v := c.Seek(seqKey(afterSeq + 1)); k != nil; k, v = c.Next() {
			var ch Change
			if err := json.Unmarshal(v, &ch); err != nil {
				return fmt.Errorf("decode change %x: %w", k, err)
			}
			if !fn(ch) {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kv: changes: %w", err)
	}
	return nil
}

// ChangeSeqBefore returns the sequence number of the newest event recorded
// before t (0 if none), walking back from the newest: events are appended
// in time order, so everything after it happened at t or later.
func (db *DB) ChangeSeqBefore(t time.Time) (uint64, error) {
	var seq uint64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketChanges).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			var ch struct {
				Time time.Time `json:"time"`
			}
			if err := json.Unmarshal(v, &ch); err != nil {
				return fmt.Errorf("decode change %x: %w", k, err)
			}
			if ch.Time.Before(t) {
				seq = binary.BigEndian.Uint64(k)
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("kv: changes: %w", err)
	}
	return seq, nil
}

// AppendChanges appends events of other kinds (for example endpoint up/down
// from the prober) to the feed in one fsynced transaction. Seq is assigned
// here; the stored events are returned.
func (db *DB) AppendChanges(events []Change) ([]Change, error) {
	out := make([]Change, 0, len(events))
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChanges)
		for _, ev := range events {
			ev.Time = ev.Time.UTC()
			if ev.Publisher == "" {
				ev.Publisher = publisherOf(ev.ID)
			}
			c, err := appendChange(b, ev)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kv: append changes: %w", err)
	}
	return out, nil
}

// LastChangeSeq returns the sequence number of the newest event (0 if none).
func (db *DB) LastChangeSeq() (uint64, error) {
	var seq uint64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketChanges).Cursor().Last(); len(k) == 8 {
			seq = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return seq, err
}

func appendChange(b *bolt.Bucket, c Change) (Change, error) {
	seq, err := b.NextSequence()
	if err != nil {
		return Change{}, err
	}
	c.Seq = seq
	v, err := json.Marshal(c)
	if err != nil {
		return Change{}, fmt.Errorf("encode change: %w", err)
	}
	return c, b.Put(seqKey(seq), v)
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}
