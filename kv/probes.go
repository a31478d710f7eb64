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

// ProbeDay is what was counted of one target on one UTC day: the counts,
// how many probes ended in each outcome class, a latency histogram (counts
// per bucket; the prober owns the bucket bounds) and how often the target
// was declared down.
type ProbeDay struct {
	ProbeCounts
	Day     time.Time        `json:"-"`
	Classes map[string]int64 `json:"c,omitempty"`
	Latency []int64          `json:"l,omitempty"`
	Downs   int64            `json:"d,omitempty"`
}

// ProbeResult is the last probe of a target and the state the prober keeps
// between probes.
type ProbeResult struct {
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
	// Since is when the target entered its current state (OK or not).
	Since time.Time `json:"since"`

	Class     string `json:"class,omitempty"`
	LatencyMs int64  `json:"latencyMs,omitempty"`
	// Group and Path are the target's kind and transport (or network and
	// path), kept so reports can group targets without their definitions.
	Group string `json:"group,omitempty"`
	Path  string `json:"path,omitempty"`
	// State is the debounced state: "up", "down", or "" before one is known.
	State string `json:"state,omitempty"`
	// Fails counts consecutive failed probes.
	Fails int `json:"fails,omitempty"`
	// Tools, SchemaHash and ToolHashes are the last tool list seen (MCP).
	Tools          *int              `json:"tools,omitempty"`
	SchemaHash     string            `json:"schemaHash,omitempty"`
	ToolHashes     map[string]string `json:"toolHashes,omitempty"`
	ToolsChangedAt time.Time         `json:"toolsChangedAt,omitzero"`
	// PayTerms are the fingerprints of the payment terms the last 402
	// answer stated, seen at PayAt (a paid endpoint's probe); cleared when
	// the endpoint answers without a 402, kept across failed probes.
	PayTerms []string  `json:"payTerms,omitempty"`
	PayAt    time.Time `json:"payAt,omitzero"`
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
	prev, _, err = db.UpdateProbe(target, at, func(p ProbeResult, day *ProbeDay) (ProbeResult, []Change) {
		day.Total++
		if ok {
			day.Successes++
		}
		last := ProbeResult{At: at.UTC(), OK: ok, Error: errMsg, Since: at.UTC()}
		if !p.At.IsZero() && p.OK == ok {
			last.Since = p.Since
		}
		return last, nil
	})
	return prev, err
}

// UpdateProbe loads target's last result and its counts of at's UTC day,
// lets next change the counts and return the new last result plus change
// events, and commits all three in one transaction shared with concurrent
// writers (kv's group commit), so a crash never keeps a state change
// without its event. next may run more than once and must compute
// everything from its arguments. It returns the previous and the stored
// events.
func (db *DB) UpdateProbe(target string, at time.Time, next func(prev ProbeResult, day *ProbeDay) (ProbeResult, []Change)) (prev ProbeResult, events []Change, err error) {
	if !probeTargetOK(target) {
		return ProbeResult{}, nil, ErrBadProbeTarget
	}
	err = db.group(func(tx *bolt.Tx) error {
		prev, events = ProbeResult{}, nil
		b := tx.Bucket(bucketProbes)
		dayKey := probeDayKey(target, at)
		y, m, d := at.UTC().Date()
		day := ProbeDay{Day: time.Date(y, m, d, 0, 0, 0, 0, time.UTC)}
		if raw := b.Get(dayKey); raw != nil {
			if err := json.Unmarshal(raw, &day); err != nil {
				return fmt.Errorf("probe counts %q: %w", dayKey, err)
			}
		}
		if raw := b.Get(probeLastKey(target)); raw != nil {
			if err := json.Unmarshal(raw, &prev); err != nil {
				return fmt.Errorf("last probe of %q: %w", target, err)
			}
		}
		last, evs := next(prev, &day)
		raw, err := json.Marshal(day)
		if err != nil {
			return err
		}
		if err := b.Put(dayKey, raw); err != nil {
			return err
		}
		if raw, err = json.Marshal(last); err != nil {
			return err
		}
		if err := b.Put(probeLastKey(target), raw); err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		changes := tx.Bucket(bucketChanges)
		for _, ev := range evs {
			ev.Time = ev.Time.UTC()
			if ev.Publisher == "" {
				ev.Publisher = publisherOf(ev.ID)
			}
			c, err := appendChange(changes, ev)
			if err != nil {
				return err
			}
			events = append(events, c)
		}
		return nil
	})
	if err != nil {
		return ProbeResult{}, nil, fmt.Errorf("kv: record probe: %w", err)
	}
	return prev, events, nil
}

// ProbeWindow sums target's counts over the UTC days from since's day to
// until's day, both included, and returns the last result (zero At when the
// target was never probed).
func (db *DB) ProbeWindow(target string, since, until time.Time) (ProbeCounts, ProbeResult, error) {
	days, last, err := db.ProbeDays(target, since, until)
	var sum ProbeCounts
	for _, d := range days {
		sum.Successes += d.Successes
		sum.Total += d.Total
	}
	return sum, last, err
}

// ProbeDays returns target's days from since's UTC day to until's, both
// included, oldest first (days without probes are absent), and the last
// result (zero At when the target was never probed).
func (db *DB) ProbeDays(target string, since, until time.Time) ([]ProbeDay, ProbeResult, error) {
	if !probeTargetOK(target) {
		return nil, ProbeResult{}, ErrBadProbeTarget
	}
	var days []ProbeDay
	var last ProbeResult
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		days, last, err = probeDays(tx.Bucket(bucketProbes), target, since, until)
		return err
	})
	if err != nil {
		return nil, ProbeResult{}, fmt.Errorf("kv: probe window: %w", err)
	}
	return days, last, nil
}

func probeDays(b *bolt.Bucket, target string, since, until time.Time) ([]ProbeDay, ProbeResult, error) {
	var days []ProbeDay
	var last ProbeResult
	from, to := probeDayKey(target, since), probeDayKey(target, until)
	cur := b.Cursor()
	for k, v := cur.Seek(from); k != nil && bytes.Compare(k, to) <= 0; k, v = cur.Next() {
		d, err := decodeProbeDay(k, v)
		if err != nil {
			return nil, last, err
		}
		days = append(days, d)
	}
	if raw := b.Get(probeLastKey(target)); raw != nil {
		if err := json.Unmarshal(raw, &last); err != nil {
			return nil, last, fmt.Errorf("last probe of %q: %w", target, err)
		}
	}
	return days, last, nil
}

func decodeProbeDay(k, v []byte) (ProbeDay, error) {
	var d ProbeDay
	if err := json.Unmarshal(v, &d); err != nil {
		return d, fmt.Errorf("probe counts %q: %w", k, err)
	}
	i := bytes.LastIndex(k, []byte(probeSep+probeDayTag))
	if i >= 0 {
		d.Day, _ = time.Parse(probeDayFmt, string(k[i+2:]))
	}
	return d, nil
}

// ForEachProbeTarget calls fn for every target whose name starts with
// prefix, in name order, with its days from since's UTC day to until's and
// its last result, in one read transaction. fn returning false stops.
func (db *DB) ForEachProbeTarget(prefix string, since, until time.Time, fn func(target string, days []ProbeDay, last ProbeResult) bool) error {
	fromTag, toTag := probeDayTag+since.UTC().Format(probeDayFmt), probeDayTag+until.UTC().Format(probeDayFmt)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketProbes).Cursor()
		var (
			target string
			days   []ProbeDay
			last   ProbeResult
			have   bool
		)
		flush := func() bool {
			if !have {
				return true
			}
			ok := fn(target, days, last)
			days, last, have = nil, ProbeResult{}, false
			return ok
		}
		for k, v := cur.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = cur.Next() {
			i := bytes.LastIndex(k, []byte(probeSep))
			if i < 0 {
				continue
			}
			name, tag := string(k[:i]), string(k[i+1:])
			if !have || name != target {
				if !flush() {
					return nil
				}
				target, have = name, true
			}
			switch {
			case tag == probeLastTag:
				if err := json.Unmarshal(v, &last); err != nil {
					return fmt.Errorf("last probe of %q: %w", name, err)
				}
			case strings.HasPrefix(tag, probeDayTag) && tag >= fromTag && tag <= toTag:
				d, err := decodeProbeDay(k, v)
				if err != nil {
					return err
				}
				days = append(days, d)
			}
		}
		flush()
		return nil
	})
	if err != nil {
		return fmt.Errorf("kv: probe targets: %w", err)
	}
	return nil
}

// PruneProbes deletes the day counts of every target older than before's
// UTC day, so the bucket stays as small as the window it serves.
func (db *DB) PruneProbes(before time.Time) (deleted int, err error) {
	cutoff := before.UTC().Format(probeDayFmt)
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProbes)
		var doomed [][]byte
		err := b.ForEach(func(k, v []byte) error {
			i := bytes.LastIndex(k, []byte(probeSep))
			if i < 0 {
				return nil
			}
			tag := string(k[i+1:])
			if strings.HasPrefix(tag, probeDayTag) && tag[len(probeDayTag):] < cutoff {
				doomed = append(doomed, bytes.Clone(k))
			}
			// A target probed by nobody since the window began (an entry
			// that left the index) has nothing left to report.
			if tag == probeLastTag {
				var last ProbeResult
				if json.Unmarshal(v, &last) == nil && last.At.UTC().Format(probeDayFmt) < cutoff {
					doomed = append(doomed, bytes.Clone(k))
				}
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
