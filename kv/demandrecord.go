package kv

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Search records are stored in a compact binary form: the report rollups
// decode every record once, thousands a second, and decoding JSON was a
// tenth of their cost. Records written before are JSON and are still
// read; a JSON record starts with '{', a binary one with its version.
//
// Version 1 is the byte 1, then the time (varint Unix nanoseconds, read
// back in UTC), text, federation, offset (varint), probe (a byte 0 or 1),
// the filter (a count, then per name in order: name and a count of
// values, each a string), the results (a count, then each: identifier,
// rank (varint), source, private (a byte 0 or 1)) and the upstreams (a
// count, then each: upstream and outcome). A count is a uvarint; a string
// a uvarint length and its bytes.
const searchRecordV1 = 1

// errBadRecord is the error of a search record that does not decode.
var errBadRecord = errors.New("kv: corrupt search record")

// appendSearchRecord appends rec's encoding to b.
func appendSearchRecord(b []byte, rec *SearchRecord) []byte {
	b = append(b, searchRecordV1)
	b = binary.AppendVarint(b, rec.Time.UnixNano())
	b = appendString(b, rec.Text)
	b = appendString(b, rec.Federation)
	b = binary.AppendVarint(b, int64(rec.Offset))
	b = appendBool(b, rec.Probe)
	b = binary.AppendUvarint(b, uint64(len(rec.Filter)))
	for _, name := range slices.Sorted(maps.Keys(rec.Filter)) {
		b = appendString(b, name)
		b = binary.AppendUvarint(b, uint64(len(rec.Filter[name])))
		for _, v := range rec.Filter[name] {
			b = appendString(b, v)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(rec.Results)))
	for i := range rec.Results {
		r := &rec.Results[i]
		b = appendString(b, r.ID)
		b = binary.AppendVarint(b, int64(r.Rank))
		b = appendString(b, r.Source)
		b = appendBool(b, r.Private)
	}
	b = binary.AppendUvarint(b, uint64(len(rec.Upstreams)))
	for _, u := range rec.Upstreams {
		b = appendString(b, u.Upstream)
		b = appendString(b, u.Outcome)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// decodeSearchRecord decodes a stored search record, binary or JSON, into
// rec, which must be zero.
func decodeSearchRecord(raw []byte, rec *SearchRecord) error {
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, rec); err != nil {
			return fmt.Errorf("kv: decode search record: %w", err)
		}
		return nil
	}
	if len(raw) == 0 || raw[0] != searchRecordV1 {
		return errBadRecord
	}
	// One string for the record: every text of it is a part of that, not
	// a copy of its own.
	r := recordReader{b: raw, s: string(raw), i: 1}
	rec.Time = time.Unix(0, r.varint()).UTC()
	rec.Text = r.string()
	rec.Federation = r.string()
	rec.Offset = int(r.varint())
	rec.Probe = r.bool()
	if n := r.count(); n > 0 {
		rec.Filter = make(map[string][]string, n)
		for range n {
			name := r.string()
			vals := make([]string, r.count())
			for i := range vals {
				vals[i] = r.string()
			}
			rec.Filter[name] = vals
		}
	}
	if n := r.count(); n > 0 {
		rec.Results = make([]ReturnedEntry, n)
		for i := range rec.Results {
			e := &rec.Results[i]
			e.ID = r.string()
			e.Rank = int(r.varint())
			e.Source = r.string()
			e.Private = r.bool()
		}
	}
	if n := r.count(); n > 0 {
		rec.Upstreams = make([]UpstreamOutcome, n)
		for i := range rec.Upstreams {
			rec.Upstreams[i] = UpstreamOutcome{Upstream: r.string(), Outcome: r.string()}
		}
	}
	if r.bad || r.i != len(raw) {
		return errBadRecord
	}
	return nil
}

// recordReader reads a binary search record; past its first error every
// read returns zero and bad stays set.
type recordReader struct {
	b   []byte
	s   string // b as a string
	i   int
	bad bool
}

func (r *recordReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }

func (r *recordReader) varint() int64 { return readVarint(r, binary.Varint) }

// readVarint reads one varint with decode (binary.Uvarint or Varint).
func readVarint[T uint64 | int64](r *recordReader, decode func([]byte) (T, int)) T {
	if r.bad {
		return 0
	}
	v, n := decode(r.b[r.i:])
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.i += n
	return v
}

// count reads a count of items, each at least a byte long, so a corrupt
// count cannot ask for more items than bytes remain.
func (r *recordReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)-r.i) {
		r.bad = true
		return 0
	}
	return int(n)
}

func (r *recordReader) string() string {
	n := r.count()
	if r.bad {
		return ""
	}
	s := r.s[r.i : r.i+n]
	r.i += n
	return s
}

func (r *recordReader) bool() bool {
	if r.bad || r.i >= len(r.b) || r.b[r.i] > 1 {
		r.bad = true
		return false
	}
	r.i++
	return r.b[r.i-1] == 1
}
