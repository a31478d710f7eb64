package report

import (
	"bytes"
	"encoding/binary"
	"slices"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// Blocks of 8 and 64 days are built once they are complete, from the
// blocks one level down, instead of being counted search by search: a
// search's rollups then cost one key per result and per domain in its
// results (the day's), not three. Each level above the day has a mark, the
// first block not built yet; blocks before it are built, and a search
// counted later for a day of a built block (a record that straggled, a log
// appended out of time order) is counted into the built blocks too, so a
// built block always equals the sum of its days. Reports read a block
// only below its level's mark and the days (or smaller blocks) of the rest.
//
// A store without marks (rollups from before this scheme) counted every
// level search by search; Compact then marks the block holding today as
// the first to build, so the complete blocks before it stay as they were
// and the current one is rebuilt from its days when it ends.

// kindMark keys a level's mark: m level → varint first unbuilt block.
const kindMark = 'm'

func markKey(level uint8) []byte { return []byte{kindMark, level} }

// marks are the first unbuilt block of each level (index 0 unused); ok is
// false in a store without marks, whose every level is counted per search.
type marks struct {
	first [len(levels)]uint32
	ok    bool
}

func readMarks(rb kv.Reports) marks {
	var m marks
	for li := 1; li < len(levels); li++ {
		raw := rb.Get(markKey(uint8(li)))
		if raw == nil {
			return marks{}
		}
		n, _ := binary.Uvarint(raw)
		m.first[li] = uint32(n)
	}
	m.ok = true
	return m
}

// counted reports whether a search of day counts into level li's block
// when it is rolled up: the day always, a larger block once it is built.
func (m marks) counted(li int, day Day) bool {
	return li == 0 || !m.ok || uint32(day)/levels[li] < m.first[li]
}

// usable reports whether reports may read block of level li: a day
// always, a larger block once built.
func (m marks) usable(li int, block uint32) bool {
	return li == 0 || !m.ok || block < m.first[li]
}

// Compact builds the blocks that are complete on now's day and not built
// yet, one block per transaction, at most limit blocks, and reports how
// many it built. A store without marks gets them (see above).
func Compact(db *kv.DB, now time.Time, limit int) (int, error) {
	today := uint32(DayOf(now))
	var m marks
	if err := db.ViewReports(func(rb kv.Reports) error {
		m = readMarks(rb)
		return nil
	}); err != nil {
		return 0, err
	}
	if !m.ok {
		return 0, db.UpdateReports(func(rb kv.Reports) error {
			if readMarks(rb).ok {
				return nil
			}
			for li := 1; li < len(levels); li++ {
				if err := rb.Put(markKey(uint8(li)), binary.AppendUvarint(nil, uint64(today/levels[li]))); err != nil {
					return err
				}
			}
			return nil
		})
	}
	built := 0
	for li := 1; li < len(levels) && built < limit; li++ {
		size, child := levels[li], levels[li-1]
		for built < limit {
			b := m.first[li]
			// Complete, and (above the first level) its children built.
			if (b+1)*size > today || li > 1 && (b+1)*size/child > m.first[li-1] {
				break
			}
			if err := db.UpdateReports(func(rb kv.Reports) error {
				if readMarks(rb).first[li] != b {
					return nil // built meanwhile
				}
				if err := buildBlock(rb, uint8(li), b); err != nil {
					return err
				}
				return rb.Put(markKey(uint8(li)), binary.AppendUvarint(nil, uint64(b+1)))
			}); err != nil {
				return built, err
			}
			m.first[li] = b + 1
			built++
		}
	}
	return built, nil
}

// buildBlock writes the block b of level li as the sum of its blocks one
// level down: per domain, its entries and query texts (with the count of
// texts kept), and the zero-result texts.
func buildBlock(rb kv.Reports, li uint8, b uint32) error {
	cl := li - 1
	c0 := b * levels[li] / levels[cl]
	c1 := (b+1)*levels[li]/levels[cl] - 1
	for _, kind := range []byte{kindEntry, kindQuery} {
		domain := []byte(nil)
		for {
			next, ok, err := nextDomain(rb, kind, domain)
			if err != nil || !ok {
				if err != nil {
					return err
				}
				break
			}
			domain = next
			if err := buildDomainBlock(rb, kind, string(domain), li, b, c0, c1); err != nil {
				return err
			}
		}
	}
	return buildZeroBlock(rb, li, b, c0, c1)
}

// nextDomain returns the first domain with keys of kind after after (the
// first of all when after is nil).
func nextDomain(rb kv.Reports, kind byte, after []byte) ([]byte, bool, error) {
	start := []byte{kind}
	if after != nil {
		start = append(append(start, after...), 1) // past every key of after: a domain holds no control byte
	}
	var found []byte
	err := rb.Scan([]byte{kind}, start, func(k, _ []byte) (bool, error) {
		if i := bytes.IndexByte(k[1:], 0); i >= 0 {
			found = bytes.Clone(k[1 : 1+i])
		}
		return false, nil
	})
	return found, found != nil, err
}

// childRange scans the keys of the blocks c0..c1 of level cl under the
// prefix of kind and domain, calling fn with what follows the block number.
func childRange(rb kv.Reports, kind byte, domain string, cl uint8, c0, c1 uint32, fn func(rest, raw []byte) error) error {
	for c := c0; c <= c1; c++ {
		prefix := blockPrefix(kind, domain, cl, c)
		if err := rb.Scan(prefix, nil, func(k, raw []byte) (bool, error) {
			return true, fn(k[len(prefix):], raw)
		}); err != nil {
			return err
		}
	}
	return nil
}

func buildDomainBlock(rb kv.Reports, kind byte, domain string, li uint8, b, c0, c1 uint32) error {
	// An unbuilt block holds keys only in a store from before the marks,
	// counted search by search up to the upgrade: the sum replaces them.
	if err := deleteAll(rb, blockPrefix(kind, domain, li, b)); err != nil {
		return err
	}
	if err := deleteAll(rb, countKey(kind, domain, li, b)); err != nil {
		return err
	}
	w := newRollupWriter(rb, 0)
	cl := li - 1
	texts := int64(0)
	err := childRange(rb, kind, domain, cl, c0, c1, func(rest, raw []byte) error {
		key := append(blockPrefix(kind, domain, li, b), rest...)
		switch kind {
		case kindEntry:
			var v entryVal
			if err := decodeEntryVal(raw, &v); err != nil {
				return err
			}
			acc := w.entry(key)
			acc.Searches.Add(v.Searches)
			acc.Probe.Add(v.Probe)
		case kindQuery:
			var v queryVal
			if err := decodeQueryVal(raw, &v); err != nil {
				return err
			}
			acc := w.listQuery(key)
			if acc.absent {
				acc.absent = false
				acc.Shown = v.Shown
				if string(rest) != otherTexts {
					texts++
				}
			}
			acc.Searches.add(v.Searches)
			acc.Probe.add(v.Probe)
			mergeAbove(&acc.Above, v.Above)
			mergeAbove(&acc.ProbeAbve, v.ProbeAbve)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if kind == kindQuery && texts > 0 {
		w.counts[string(countKey(kindQuery, domain, li, b))] = &texts
	}
	return w.flush()
}

func buildZeroBlock(rb kv.Reports, li uint8, b, c0, c1 uint32) error {
	if err := deleteAll(rb, zeroKey(li, b, "")); err != nil {
		return err
	}
	if err := deleteAll(rb, countKey(kindZero, "", li, b)); err != nil {
		return err
	}
	w := newRollupWriter(rb, 0)
	cl := li - 1
	texts := int64(0)
	for c := c0; c <= c1; c++ {
		prefix := zeroKey(cl, c, "")
		if err := rb.Scan(prefix, nil, func(k, raw []byte) (bool, error) {
			var v zeroVal
			if err := decodeZeroVal(raw, &v); err != nil {
				return false, err
			}
			text := k[len(prefix):]
			acc := w.listZero(append(zeroKey(li, b, ""), text...))
			if acc.absent {
				acc.absent = false
				acc.Shown = v.Shown
				if string(text) != otherTexts {
					texts++
				}
			}
			acc.Searches += v.Searches
			acc.Probe += v.Probe
			for _, t := range v.Tags {
				if len(acc.Tags) < 16 && !slices.Contains(acc.Tags, t) {
					acc.Tags = append(acc.Tags, t)
				}
			}
			return true, nil
		}); err != nil {
			return err
		}
	}
	if texts > 0 {
		w.counts[string(countKey(kindZero, "", li, b))] = &texts
	}
	return w.flush()
}

// mergeAbove adds src's publishers into *dst, keeping at most maxAbove
// named ones; the rest count under "" (others), so totals stay exact.
func mergeAbove(dst *map[string]int64, src map[string]int64) {
	for o, n := range src {
		if *dst == nil {
			*dst = map[string]int64{}
		}
		if _, ok := (*dst)[o]; !ok && o != "" && len(*dst) >= maxAbove {
			o = ""
		}
		(*dst)[o] += n
	}
}

// deleteAll deletes every key with the prefix.
func deleteAll(rb kv.Reports, prefix []byte) error {
	for {
		n, err := rb.DeleteRange(prefix, func([]byte) bool { return true }, 10000)
		if err != nil || n < 10000 {
			return err
		}
	}
}
