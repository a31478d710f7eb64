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

// The demand log: one record per answered search, keyed by time, plus one
// aggregate per UTC day kept in the same transaction so statistics never scan
// the log. Nothing here identifies the caller: the record type has no field
// that could hold an address, key or user agent.
//
// Records not yet counted by the report rollups are listed in a bucket of
// their own (their log keys), in the transaction that appends them:
// RollupSearches counts them later in bigger batches and removes them from
// the list in the transaction that writes the counts, so a crash between the
// two leaves them listed and they are counted at the next call, exactly
// once. A list rather than a mark in the log: records are keyed by their
// time, and one appended with an earlier time than a counted one (a clock
// step, a straggler) would fall behind a mark.
var (
	bucketDemand         = bucket("demand")
	bucketDemandDaily    = bucket("demand_daily")
	bucketDemandToRollup = bucket("demand_to_rollup")
)

// demandDayLayout keys the daily aggregates; it sorts lexically by date.
const demandDayLayout = "2006-01-02"

// SearchRecord is what the demand log keeps of one search: what was asked,
// how it was routed, and which entries came back at which rank. It is
// stored in binary (demandrecord.go); the JSON names are those of the
// records stored before, which are still read.
type SearchRecord struct {
	Time       time.Time           `json:"t"`
	Text       string              `json:"q"`
	Filter     map[string][]string `json:"f,omitempty"`
	Federation string              `json:"fed,omitempty"`
	// Offset is the rank before the first result: a second page of ten has
	// Offset 10, so Results[0] was returned at rank 11.
	Offset    int               `json:"o,omitempty"`
	Results   []ReturnedEntry   `json:"r,omitempty"`
	Upstreams []UpstreamOutcome `json:"u,omitempty"`
	// Probe marks traffic the registry generated itself (probes, benchmark
	// runs, web-position checks): demand reports leave it out unless asked.
	Probe bool `json:"p,omitempty"`
}

// ReturnedEntry is one result of a search: its identifier, its 1-based rank
// in the ranking the caller saw, and, for a result fused from another
// registry, that registry's URL (empty for this registry's own entries).
type ReturnedEntry struct {
	ID     string `json:"id"`
	Rank   int    `json:"rank"`
	Source string `json:"src,omitempty"`
	// Private marks a private entry (seen by its owner's key): reports
	// never count it, so no public number reveals it.
	Private bool `json:"pv,omitempty"`
}

// UpstreamOutcome is how one upstream registry answered a federated search
// (the caller names the outcomes, e.g. ok, error, timeout).
type UpstreamOutcome struct {
	Upstream string `json:"up"`
	Outcome  string `json:"out"`
}

// DemandDay aggregates the demand log of one UTC day.
type DemandDay struct {
	Date string `json:"date"` // YYYY-MM-DD, UTC
	// Searches counts every recorded search; ZeroResults those that asked
	// for the first page and got nothing back.
	Searches    int `json:"searches"`
	ZeroResults int `json:"zeroResults"`
	// ProbeSearches counts the searches marked Probe, which Searches leaves out.
	ProbeSearches int `json:"probeSearches,omitempty"`
	// Upstreams counts federation outcomes: upstream → outcome → count.
	Upstreams map[string]map[string]int `json:"upstreams,omitempty"`
}

// AppendSearches commits recs to the demand log in one fsynced transaction,
// updating the daily aggregates with them and listing them for
// RollupSearches.
func (db *DB) AppendSearches(recs []SearchRecord) error {
	if len(recs) == 0 {
		return nil
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		log := tx.Bucket(bucketDemand)
		// Keys only ever grow (time, then sequence): fill pages rather than
		// split them in half, or the log takes twice its size on disk and
		// in the mapped file.
		log.FillPercent = appendFillPercent
		toRollup := tx.Bucket(bucketDemandToRollup)
		toRollup.FillPercent = appendFillPercent
		daily := tx.Bucket(bucketDemandDaily)
		days := map[string]*DemandDay{}
		var vals []byte // every record, one after another: bbolt keeps a put's value until the commit
		for i := range recs {
			rec := &recs[i]
			if rec.Time.IsZero() {
				return errors.New("kv: search record without time")
			}
			seq, err := log.NextSequence()
			if err != nil {
				return err
			}
			start := len(vals)
			vals = appendSearchRecord(vals, rec)
			val := vals[start:len(vals):len(vals)]
			key := demandKey(rec.Time, seq)
			if err := log.Put(key, val); err != nil {
				return err
			}
			if err := toRollup.Put(key, nil); err != nil {
				return err
			}

			date := rec.Time.UTC().Format(demandDayLayout)
			day := days[date]
			if day == nil {
				day = &DemandDay{Date: date}
				if cur := daily.Get([]byte(date)); cur != nil {
					if err := json.Unmarshal(cur, day); err != nil {
						return fmt.Errorf("kv: decode demand day %s: %w", date, err)
					}
				}
				days[date] = day
			}
			if rec.Probe {
				// The registry's own traffic (the benchmark) is kept
				// out of the counts of what callers asked.
				day.ProbeSearches++
				continue
			}
			day.Searches++
			if len(rec.Results) == 0 && rec.Offset == 0 {
				day.ZeroResults++
			}
			for _, u := range rec.Upstreams {
				if day.Upstreams == nil {
					day.Upstreams = map[string]map[string]int{}
				}
				if day.Upstreams[u.Upstream] == nil {
					day.Upstreams[u.Upstream] = map[string]int{}
				}
				day.Upstreams[u.Upstream][u.Outcome]++
			}
		}
		for date, day := range days {
			val, err := json.Marshal(day)
			if err != nil {
				return err
			}
			if err := daily.Put([]byte(date), val); err != nil {
				return err
			}
		}
		return nil
	})
}

// RollupSearches calls rollup with up to limit of the records appended and
// not yet rolled up, oldest first, and commits what it writes to the
// reports bucket in one fsynced transaction that also takes those records
// off the list: both commit, or neither does. It reports how many records
// it handed over; fewer than limit means none is left. A listed record the
// log no longer holds (pruned first) is taken off the list uncounted.
//
// It works in two passes, so that the write lock, which every other writer
// of the store (a settlement among them) waits for, is held only to write.
// The first, in a read transaction, hands rollup the records and a Reports
// that reads the bucket and keeps the puts; there rollup may call
// Reports.Pace, which calls pace (when not nil) to spread the counting out.
// The second, in the write transaction, writes the kept puts and takes the
// records off the list, if nothing was written to the reports bucket
// meanwhile (its sequence, which every write transaction over it moves on)
// and the records are still listed; otherwise rollup runs again there, as
// in a single pass. So rollup must read a key only before it puts it,
// must not delete (its puts are not visible to its reads in the first
// pass), and must not put bytes it read (they belong to the first pass's
// transaction).
func (db *DB) RollupSearches(limit int, rollup func([]SearchRecord, Reports) error, pace func()) (int, error) {
	var keys [][]byte
	var seq uint64
	st := &staging{pace: pace}
	if err := db.bolt.View(func(tx *bolt.Tx) error {
		var recs []SearchRecord
		var err error
		if keys, recs, err = listedRecords(tx, limit, pace); err != nil {
			return err
		}
		b := tx.Bucket(bucketReports)
		if seq = b.Sequence(); len(recs) == 0 {
			return nil
		}
		if err := rollup(recs, Reports{b: b, c: b.Cursor(), staged: st}); err != nil {
			return fmt.Errorf("kv: demand rollup: %w", err)
		}
		return nil
	}); err != nil || len(keys) == 0 {
		return 0, err
	}
	if rollupBetweenPasses != nil {
		rollupBetweenPasses()
	}
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		list := tx.Bucket(bucketDemandToRollup)
		if tx.Bucket(bucketReports).Sequence() != seq || !allListed(list.Cursor(), keys) {
			// Written meanwhile: count again, here.
			k, recs, err := listedRecords(tx, limit, nil)
			if err != nil {
				return err
			}
			if keys = k; len(recs) > 0 {
				rb, err := writableReports(tx)
				if err != nil {
					return err
				}
				if err := rollup(recs, rb); err != nil {
					return fmt.Errorf("kv: demand rollup: %w", err)
				}
			}
		} else if len(st.keys) > 0 {
			rb, err := writableReports(tx)
			if err != nil {
				return err
			}
			for i, k := range st.keys {
				if err := rb.b.Put(k, st.vals[i]); err != nil {
					return err
				}
			}
		}
		for _, k := range keys {
			if err := list.Delete(k); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// rollupBetweenPasses, when set (by tests), runs between a rollup's two
// passes.
var rollupBetweenPasses func()

// listedRecords is the first limit keys of the list of records to roll
// up, in order, and the records of those the log still holds, calling
// pace (when not nil) as it goes.
func listedRecords(tx *bolt.Tx, limit int, pace func()) (keys [][]byte, recs []SearchRecord, err error) {
	log := tx.Bucket(bucketDemand).Cursor()
	c := tx.Bucket(bucketDemandToRollup).Cursor()
	recs = make([]SearchRecord, 0, min(limit, 4096))
	var lk, lv []byte // where log is
	for k, _ := c.First(); k != nil && len(keys) < limit; k, _ = c.Next() {
		// Copied: the keys outlive a first pass's read transaction.
		keys = append(keys, bytes.Clone(k))
		if pace != nil && len(keys)&63 == 0 {
			pace()
		}
		// The listed records mostly follow one another in the log.
		if lk != nil {
			lk, lv = log.Next()
		}
		if !bytes.Equal(lk, k) {
			if lk, lv = log.Seek(k); !bytes.Equal(lk, k) {
				lk = nil
				continue // pruned
			}
		}
		recs = append(recs, SearchRecord{})
		if err := decodeSearchRecord(lv, &recs[len(recs)-1]); err != nil {
			return nil, nil, err
		}
	}
	return keys, recs, nil
}

// allListed reports whether the list (c's bucket) still holds every one
// of keys, which are in ascending order.
func allListed(c *bolt.Cursor, keys [][]byte) bool {
	var k []byte
	for i, want := range keys {
		if i == 0 {
			k, _ = c.Seek(want)
		}
		for k != nil && bytes.Compare(k, want) < 0 {
			k, _ = c.Next()
		}
		if !bytes.Equal(k, want) {
			return false
		}
	}
	return true
}

// demandKey orders records by time; the bucket sequence keeps two records
// of the same nanosecond apart.
func demandKey(t time.Time, seq uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, uint64(t.UnixNano()))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k
}

// SearchesSince calls fn for every search recorded at or after since, oldest
// first, until fn returns false or an error.
func (db *DB) SearchesSince(since time.Time, fn func(SearchRecord) (bool, error)) error {
	start := make([]byte, 8)
	if ns := since.UnixNano(); ns > 0 {
		binary.BigEndian.PutUint64(start, uint64(ns))
	}
	return db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDemand).Cursor()
		for k, v := c.Seek(start); k != nil; k, v = c.Next() {
			var rec SearchRecord
			if err := decodeSearchRecord(v, &rec); err != nil {
				return err
			}
			more, err := fn(rec)
			if err != nil || !more {
				return err
			}
		}
		return nil
	})
}

// DemandDays returns the daily aggregates for the UTC days from the day of
// from to the day of to, inclusive, one per day in date order; a day without
// searches is present with zero counts.
func (db *DB) DemandDays(from, to time.Time) ([]DemandDay, error) {
	from = truncateDay(from)
	to = truncateDay(to)
	if to.Before(from) {
		return nil, nil
	}
	var out []DemandDay
	err := db.bolt.View(func(tx *bolt.Tx) error {
		daily := tx.Bucket(bucketDemandDaily)
		for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
			date := d.Format(demandDayLayout)
			day := DemandDay{Date: date}
			if cur := daily.Get([]byte(date)); cur != nil {
				if err := json.Unmarshal(cur, &day); err != nil {
					return fmt.Errorf("kv: decode demand day %s: %w", date, err)
				}
			}
			out = append(out, day)
		}
		return nil
	})
	return out, err
}

func truncateDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// PruneSearches deletes the search records from before cutoff, oldest
// first, at most limit of them in one transaction, and reports how many it
// deleted. The daily aggregates stay: /stats reads only those.
func (db *DB) PruneSearches(cutoff time.Time, limit int) (int, error) {
	end := make([]byte, 8)
	if ns := cutoff.UnixNano(); ns > 0 {
		binary.BigEndian.PutUint64(end, uint64(ns))
	}
	// Usually nothing is due: look before taking the write lock and an
	// fsync.
	due := false
	if err := db.bolt.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketDemand).Cursor().First()
		due = k != nil && bytes.Compare(k[:8], end) < 0
		return nil
	}); err != nil || !due {
		return 0, err
	}
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDemand).Cursor()
		// Always the first key: a bbolt cursor's Next after Delete can
		// skip one.
		for k, _ := c.First(); k != nil && n < limit && bytes.Compare(k[:8], end) < 0; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("kv: prune search records: %w", err)
	}
	return n, nil
}
