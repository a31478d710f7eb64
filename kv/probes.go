package kv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Probe counters: per probe target (for instance "eip155:8453/rpc"), one
// success/total pair per UTC day, so availability can be computed over a
// sliding window of days rather than over all time, plus the last result.
// Keys are "<target>\x00d<YYYYMMDD>" for days and "<target>\x00last" for the
// last result; the separator cannot occur in a target name.
var bucketProbes = bucket("probes")

const (
	probeSep     = "\x00"
	probeDayTag  = "d"
	probeLastTag = "last"
	probeDayFmt  = "20060102"
)

// ProbeCounts are the successes and attempts of one probe target.
type ProbeCounts struct {
	Successes int64 `json:"s"`
	Total     int64 `json:"t"`
}

// ProbeResult is the last probe of a target.
type ProbeResult struct {
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
	// Since is when the target entered its current state (OK or not).
	Since time.Time `json:"since"`
}

// ErrBadProbeTarget is returned for a target name that is empty or holds a
// NUL byte (the key separator).
var ErrBadProbeTarget = errors.New("kv: probe target must be non-empty and hold no NUL byte")

func probeTargetOK(target string) bool {
	return target != "" && !strings.Contains(target, probeSep)
}

func probeDayKey(target string, day time.Time) []byte {
	return []byte(target + probeSep + probeDayTag + day.UTC().Format(probeDayFmt))
}

func probeLastKey(target string) []byte {
	return []byte(target + probeSep + probeLastTag)
}

// RecordProbe counts one probe of target at time at and stores it as the
// last result, in one committed transaction. It returns the previous last
// result (zero At when there was none), so the caller can tell a change of
// state.
func (db *DB) RecordProbe(target string, at time.Time, ok bool, errMsg string) (prev ProbeResult, err error) {
	if !probeTargetOK(target) {
		return ProbeResult{}, ErrBadProbeTarget
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProbes)
		dayKey := probeDayKey(target, at)
		var c ProbeCounts
		if raw := b.Get(dayKey); raw != nil {
			if err := json.Unmarshal(raw, &c); err != nil {
				return fmt.Errorf("probe counts %q: %w", dayKey, err)
			}
		}
		c.Total++
		if ok {
			c.Successes++
		}
		raw, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if err := b.Put(dayKey, raw); err != nil {
			return err
		}
		if raw := b.Get(probeLastKey(target)); raw != nil {
			if err := json.Unmarshal(raw, &prev); err != nil {
				return fmt.Errorf("last probe of %q: %w", target, err)
			}
		}
		last := ProbeResult{At: at.UTC(), OK: ok, Error: errMsg, Since: at.UTC()}
		if !prev.At.IsZero() && prev.OK == ok {
			last.Since = prev.Since
		}
		if raw, err = json.Marshal(last); err != nil {
			return err
		}
		return b.Put(probeLastKey(target), raw)
	})
	if err != nil {
		return ProbeResult{}, fmt.Errorf("kv: record probe: %w", err)
	}
	return prev, nil
}

// ProbeWindow sums target's counts over the UTC days from since's day to
// until's day, both included, and returns the last result (zero At when the
// target was never probed).
func (db *DB) ProbeWindow(target string, since, until time.Time) (ProbeCounts, ProbeResult, error) {
	if !probeTargetOK(target) {
		return ProbeCounts{}, ProbeResult{}, ErrBadProbeTarget
	}
	var sum ProbeCounts
	var last ProbeResult
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProbes)
		from, to := probeDayKey(target, since), probeDayKey(target, until)
		cur := b.Cursor()
		for k, v := cur.Seek(from); k != nil && bytes.Compare(k, to) <= 0; k, v = cur.Next() {
			var c ProbeCounts
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("probe counts %q: %w", k, err)
			}
			sum.Successes += c.Successes
			sum.Total += c.Total
		}
		if raw := b.Get(probeLastKey(target)); raw != nil {
			if err := json.Unmarshal(raw, &last); err != nil {
				return fmt.Errorf("last probe of %q: %w", target, err)
			}
		}
		return nil
	})
	if err != nil {
		return ProbeCounts{}, ProbeResult{}, fmt.Errorf("kv: probe window: %w", err)
	}
	return sum, last, nil
}

// PruneProbes deletes the day counts of every target older than before's
// UTC day, so the bucket stays as small as the window it serves.
func (db *DB) PruneProbes(before time.Time) (deleted int, err error) {
	cutoff := before.UTC().Format(probeDayFmt)
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProbes)
		var doomed [][]byte
		err := b.ForEach(func(k, _ []byte) error {
			i := bytes.LastIndex(k, []byte(probeSep))
			if i < 0 {
				return nil
			}
			tag := string(k[i+1:])
			if strings.HasPrefix(tag, probeDayTag) && tag[len(probeDayTag):] < cutoff {
				doomed = append(doomed, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		deleted = len(doomed)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("kv: prune probes: %w", err)
	}
	return deleted, nil
}
