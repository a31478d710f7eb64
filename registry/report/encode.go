package report

import (
	"encoding/binary"
	"errors"
	"slices"
)

// Values are sequences of unsigned varints (and length-prefixed strings):
// a rollup is read 10,000 times for one report, so JSON is too slow.

var errCorrupt = errors.New("report: corrupt rollup value")

type reader struct {
	b   []byte
	err error
}

func (r *reader) uint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return int64(v)
}

func (r *reader) str() string {
	n := r.uint()
	if r.err != nil {
		return ""
	}
	if n > int64(len(r.b)) {
		r.err = errCorrupt
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func appendUint(b []byte, v int64) []byte { return binary.AppendUvarint(b, uint64(v)) }

func appendStr(b []byte, s string) []byte {
	b = appendUint(b, int64(len(s)))
	return append(b, s...)
}

func appendStats(b []byte, s *Stats) []byte {
	b = appendUint(b, s.Returned)
	if s.Returned == 0 {
		return b
	}
	b = appendUint(b, s.FirstPage)
	b = appendUint(b, s.Best)
	for _, h := range s.Hist {
		b = appendUint(b, h)
	}
	return b
}

func (r *reader) stats(s *Stats) {
	s.Returned = r.uint()
	if s.Returned == 0 {
		return
	}
	s.FirstPage = r.uint()
	s.Best = r.uint()
	for i := range s.Hist {
		s.Hist[i] = r.uint()
	}
}

func encodeEntryVal(b []byte, v *entryVal) []byte {
	b = appendStats(b, &v.Searches)
	return appendStats(b, &v.Probe)
}

func decodeEntryVal(raw []byte, v *entryVal) error { return decodeEntryStats(raw, v, true) }

// decodeEntryStats decodes an entry value, the probe traffic's half only
// when asked: a report without it reads half the numbers.
func decodeEntryStats(raw []byte, v *entryVal, probe bool) error {
	r := reader{b: raw}
	r.stats(&v.Searches)
	if probe {
		r.stats(&v.Probe)
	}
	return r.err
}

func appendQS(b []byte, q *QueryStats) []byte {
	b = appendUint(b, q.Searches)
	b = appendUint(b, q.BestSum)
	return appendUint(b, q.Best)
}

func (r *reader) qs(q *QueryStats) {
	q.Searches = r.uint()
	q.BestSum = r.uint()
	q.Best = r.uint()
}

func appendCounts(b []byte, m map[string]int64) []byte {
	b = appendUint(b, int64(len(m)))
	var small [maxAbove + 1]string // what a rollup keeps: no allocation
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendStr(b, k)
		b = appendUint(b, m[k])
	}
	return b
}

func (r *reader) counts() map[string]int64 {
	n := r.uint()
	if n == 0 || r.err != nil {
		return nil
	}
	if n > maxAbove+1 {
		r.err = errCorrupt
		return nil
	}
	m := make(map[string]int64, n)
	for range n {
		k := r.str()
		m[k] = r.uint()
	}
	return m
}

func encodeQueryVal(b []byte, v *queryVal) []byte {
	b = appendStr(b, v.Shown)
	b = appendQS(b, &v.Searches)
	b = appendQS(b, &v.Probe)
	b = appendCounts(b, v.Above)
	return appendCounts(b, v.ProbeAbve)
}

func decodeQueryVal(raw []byte, v *queryVal) error {
	r := reader{b: raw}
	v.Shown = r.str()
	r.qs(&v.Searches)
	r.qs(&v.Probe)
	v.Above = r.counts()
	v.ProbeAbve = r.counts()
	return r.err
}

func encodeDomainVal(b []byte, v *domainVal) []byte {
	b = appendQS(b, &v.Searches)
	return appendQS(b, &v.Probe)
}

func decodeDomainVal(raw []byte, v *domainVal) error {
	r := reader{b: raw}
	r.qs(&v.Searches)
	r.qs(&v.Probe)
	return r.err
}

func encodeZeroVal(b []byte, v *zeroVal) []byte {
	b = appendStr(b, v.Shown)
	b = appendUint(b, v.Searches)
	b = appendUint(b, v.Probe)
	b = appendUint(b, int64(len(v.Tags)))
	for _, t := range v.Tags {
		b = appendStr(b, t)
	}
	return b
}

func decodeZeroVal(raw []byte, v *zeroVal) error {
	r := reader{b: raw}
	v.Shown = r.str()
	v.Searches = r.uint()
	v.Probe = r.uint()
	n := r.uint()
	if n > 16 {
		return errCorrupt
	}
	for range n {
		v.Tags = append(v.Tags, r.str())
	}
	return r.err
}
